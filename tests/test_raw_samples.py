"""Raw sample text under anonymisation (issue 16, item 16): with an evaluation's privacy
policy on, the lake's `samples` table (and the Dagster metadata preview) holds the
anonymised text; the raw text is kept only with `privacy.store_raw: true`, in
`samples_raw`, which `facetlake sql` exposes only with `--include-raw`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from resources.catalog.spec import EvaluationSpec
from resources.lake.resource import LakeStore
from resources.sql import query

# pytest-xdist: one worker runs this module (the anonymised lake is module-scoped; README "Tests")
pytestmark = pytest.mark.xdist_group("raw_samples")

runner = CliRunner()

# made-up people and places, unique to this test
ROWS = [
    {"id": "r1", "question": "Dr. Oswin Threlkeld of Marrowby Freight Ltd e-mailed oswin.threlkeld@example.org from Leeds. Who wrote?",
     "answer": "Oswin Threlkeld", "out": "Oswin Threlkeld"},
    {"id": "r2", "question": "Call Frau Hedwig Lammerskötter on +49 511 4478 2310 about the Kastanienallee 12 flat.",
     "answer": "Hedwig Lammerskötter", "out": "Hedwig Lammerskötter"},
    {"id": "r3", "question": "What is two plus two?", "answer": "four", "out": "five"},
]
RAW = ["Threlkeld", "oswin.threlkeld@example.org", "Lammerskötter", "+49 511 4478 2310", "Marrowby Freight"]


def _spec(tmp_path: Path, store_raw: bool | None) -> EvaluationSpec:
    data = tmp_path / "pii.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    privacy = {"anonymise": "ner", "references": True, **({"store_raw": store_raw} if store_raw is not None else {})}
    return EvaluationSpec.from_mapping({
        "name": "raw-text", "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "models": {"echo": "precomputed:column=out"}, "metrics": ["exact_match"], "privacy": privacy,
    })


@pytest.fixture(scope="module")
def anonymised_lake(tmp_path_factory, instance):
    from pipelines.runs.runner import run_evaluation

    folder = tmp_path_factory.mktemp("rawtext")
    lake = LakeStore(root=str(folder / "lake"))
    resolved = run_evaluation(_spec(folder, store_raw=None), lake, instance)
    return lake, resolved, folder


def _texts(frame) -> str:
    return json.dumps(frame.to_dicts(), ensure_ascii=False, default=str)


def test_samples_table_holds_anonymised_text_by_default(anonymised_lake, dagster_home):
    lake, resolved, _ = anonymised_lake
    samples = lake.read("samples", where={"fingerprint": resolved.fingerprint})
    text = _texts(samples)
    assert [r for r in RAW if r in text] == []
    assert "[PERSON_1]" in text and "[EMAIL_ADDRESS_1]" in text and "[PHONE_NUMBER_1]" in text
    assert "two plus two" in text  # text without personal data is kept as it was
    assert not lake.exists("samples_raw")
    # one placeholder map per sample: input, reference and precomputed output agree, so the
    # echoed name still matches its reference
    r1 = samples.filter(samples["sample_id"] == "r1").row(0, named=True)
    assert r1["references"] == [json.loads(r1["metadata"])["out"]] and r1["references"][0] in r1["input"]
    scores = lake.read("scores", where={"fingerprint": resolved.fingerprint})
    assert dict(zip(scores["sample_id"], scores["value"])) == {"r1": 1.0, "r2": 1.0, "r3": 0.0}
    # nothing raw in SQL, nor in Dagster's event log (the samples preview)
    assert [r for r in RAW if r in _texts(query(lake, "select * from samples"))] == []
    storage = b"".join(p.read_bytes() for p in Path(dagster_home).rglob("*") if p.is_file())
    assert [r for r in RAW if r.encode() in storage] == []
    # the dataset hash is still the raw content's (the fingerprint does not change)
    assert set(samples["dataset_hash"]) == {resolved.dataset_hash}


def test_store_raw_keeps_raw_text_in_a_table_sql_hides_unless_asked(anonymised_lake, instance):
    from pipelines.runs.runner import materialize_samples
    from pipelines.runs.register import register

    lake, resolved, folder = anonymised_lake
    spec = _spec(folder, store_raw=True)
    assert register(spec, lake, instance).fingerprint == resolved.fingerprint  # store_raw is not in the fingerprint
    materialize_samples(resolved.fingerprint, lake, instance)
    raw = lake.read("samples_raw", where={"fingerprint": resolved.fingerprint})
    assert raw.height == 3 and all(r in _texts(raw) for r in RAW)
    assert [r for r in RAW if r in _texts(lake.read("samples"))] == []

    hidden = runner.invoke(app, ["sql", "--lake", lake.root, "select count(*) from samples_raw"])
    assert hidden.exit_code == 1 and "samples_raw" in hidden.stderr and "does not exist" in hidden.stderr
    listed = runner.invoke(app, ["sql", "--lake", lake.root, "-f", "csv", "select table_name from duckdb_tables() union all select view_name from duckdb_views() where not internal"])
    assert listed.exit_code == 0 and "samples_raw" not in listed.stdout
    shown = runner.invoke(app, ["sql", "--lake", lake.root, "--include-raw", "-f", "csv", "select input from samples_raw order by sample_id"])
    assert shown.exit_code == 0 and "Threlkeld" in shown.stdout, shown.output

    # asking no longer removes the raw rows on the next materialisation
    register(_spec(folder, store_raw=False), lake, instance)
    materialize_samples(resolved.fingerprint, lake, instance)
    assert lake.read("samples_raw", where={"fingerprint": resolved.fingerprint}).height == 0


def test_evidence_with_anonymised_samples_verifies(anonymised_lake, tmp_path):
    from resources.evidence.export import export_evidence
    from resources.evidence.verify import verify_evidence

    lake, resolved, _ = anonymised_lake
    manifest = export_evidence(lake, resolved.fingerprint, tmp_path / "ev", include_samples=True)
    assert manifest["samples"] == "anonymised"
    assert [r for r in RAW if r in (tmp_path / "ev" / "samples.jsonl").read_text()] == []
    report = verify_evidence(tmp_path / "ev", allow_unsigned=True, lake=lake)
    assert report.ok, report.problems


def test_privacy_block_checks_store_raw(tmp_path):
    from resources.catalog.spec import SpecError

    with pytest.raises(SpecError, match="store_raw: must be true or false"):
        EvaluationSpec.from_mapping({"name": "x", "dataset": {"kind": "sfres"}, "models": {"m": "precomputed:column=x"},
                                     "metrics": ["bleu"], "privacy": {"anonymise": "rule_based", "store_raw": "yes please"}})
