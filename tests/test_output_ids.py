"""Precomputed outputs whose sample ids are not the dataset's (issue 26, fault 8).

A real small dataset (the first rows of the shipped HaluEval file, as a generic ``file``
dataset) and an outputs file of its ChatGPT responses keyed by ``ID``, run through
registration and the Dagster assets (and once through ``facetlake run``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA_DIR
from support.cli import run_main

N = 6


def _files(tmp_path: Path, ids: list[str]) -> tuple[Path, Path]:
    """The dataset file (N real HaluEval rows) and an outputs file holding the responses of
    the first len(ids) rows under the given ``ids``."""
    rows = []
    with open(DATA_DIR / "halueval" / "general_data.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == N:
                break
    data = tmp_path / "halueval-small.jsonl"
    data.write_text("".join(json.dumps({"ID": r["ID"], "user_query": r["user_query"], "reference": r["chatgpt_response"]}) + "\n"
                            for r in rows), encoding="utf-8")
    outs = tmp_path / "outputs.jsonl"
    outs.write_text("".join(json.dumps({"sample_id": sid, "output": r["chatgpt_response"]}) + "\n" for sid, r in zip(ids, rows)),
                    encoding="utf-8")
    return data, outs


def _spec(name: str, data: Path, outs: Path):
    from resources.catalog.spec import EvaluationSpec

    return EvaluationSpec.from_mapping({
        "name": name,
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "ID", "input": "user_query", "references": "reference"}},
        "models": {"m": f"precomputed:{outs}"},
        "metrics": ["exact_match"],
    })


def test_partly_matching_ids_warn_and_only_matching_samples_are_scored(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.backends import OutputIdsWarning
    from resources.lake.resource import LakeStore

    # rows 1-4 under the dataset's ids; rows 5 and 6 under ids the dataset does not have
    data, outs = _files(tmp_path, ["1", "2", "3", "4", "5x", "id-6"])
    lake = LakeStore(root=str(tmp_path / "lake"))
    with pytest.warns(OutputIdsWarning) as caught:
        resolved = run_evaluation(_spec("ids-partial", data, outs), lake, instance)
    message = str(caught[0].message)
    assert message == (
        f"model m: precomputed outputs file {outs}: 4 of the dataset's 6 samples have an output; 2 of its 6 sample ids are "
        "not in the dataset (e.g. '5x', 'id-6') and are ignored; 2 samples have no output (e.g. '5', '6'): they are "
        "unscored (status error), not scored as zero; check that the file belongs to this dataset and that its sample_id "
        "values are the dataset's ids (the dataset's id column is mapped with dataset: {mapping: {sample_id: COLUMN}})")
    fp = resolved.fingerprint
    gens = lake.read("generations", where={"fingerprint": fp}).sort("sample_id")
    assert gens["sample_id"].to_list() == ["1", "2", "3", "4", "5", "6"]  # nothing recorded under an unknown id
    assert gens["status"].to_list() == ["ok"] * 4 + ["error"] * 2
    assert all("no precomputed output for sample" in e for e in gens.filter(pl.col("status") == "error")["error"])
    scores = lake.read("scores", where={"fingerprint": fp}).sort("sample_id")
    assert scores["sample_id"].to_list() == ["1", "2", "3", "4", "5", "6"]
    assert scores["status"].to_list() == ["scored"] * 4 + ["unscored"] * 2
    assert scores["value"].to_list()[:4] == [1.0] * 4 and scores["value"].to_list()[4:] == [None, None]  # not zeros
    summary = lake.read("summary", where={"fingerprint": fp}).row(0, named=True)
    assert (summary["n_scored"], summary["n_total"], summary["mean"]) == (4, 6, 1.0)


def test_no_matching_id_is_refused_before_anything_runs(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.backends import BackendError
    from resources.lake.resource import LakeStore

    data, outs = _files(tmp_path, [f"q{i}" for i in range(1, N + 1)])  # another id scheme
    lake = LakeStore(root=str(tmp_path / "lake"))
    runs_before = instance.get_runs_count()
    with pytest.raises(BackendError) as exc:
        run_evaluation(_spec("ids-none", data, outs), lake, instance)
    assert str(exc.value) == (
        f"model m: precomputed outputs file {outs}: none of its 6 sample ids is in the dataset (6 samples): 6 unknown ids, "
        "e.g. 'q1', 'q2', 'q3', 'q4', 'q5', ...; the dataset's ids look like '1', '2', '3', ...; check that the file "
        "belongs to this dataset and that its sample_id values are the dataset's ids (the dataset's id column is mapped "
        "with dataset: {mapping: {sample_id: COLUMN}}); nothing was run")
    assert instance.get_runs_count() == runs_before
    assert not lake.exists("evaluations") and not lake.exists("generations")  # not even registered


def test_generations_asset_refuses_a_file_changed_to_unknown_ids(tmp_path, instance):
    """The asset checks too (a file replaced after registration, a run from the UI): no
    matching id fails the step before anything is written; the stored outputs stay."""
    import dagster as dg

    from pipelines.runs.runner import materialize_model, run_evaluation
    from resources.lake.resource import LakeStore

    data, outs = _files(tmp_path, [str(i) for i in range(1, N + 1)])
    lake = LakeStore(root=str(tmp_path / "lake"))
    resolved = run_evaluation(_spec("ids-changed", data, outs), lake, instance)
    before = lake.version("generations")
    outs.write_text(json.dumps({"sample_id": "nope", "output": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(dg.Failure, match=r"model m: precomputed outputs file .*outputs\.jsonl: none of its 1 sample ids is in the dataset"):
        materialize_model("m", resolved.fingerprint, lake, instance)
    assert lake.version("generations") == before
    assert lake.read("generations", where={"fingerprint": resolved.fingerprint})["status"].to_list() == ["ok"] * N




def _yaml(tmp_path: Path, name: str, data: Path, outs: Path) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ndataset: {{kind: file, path: {data}, mapping: {{sample_id: ID, input: user_query, "
                    f"references: reference}}}}\nmodels:\n  m: \"precomputed:{outs}\"\nmetrics: [exact_match]\n")
    return path


def test_cli_run_warns_on_unknown_ids_and_refuses_when_none_match(tmp_path, monkeypatch, capsys, instance):
    from resources.lake.resource import LakeStore

    data, outs = _files(tmp_path, ["1", "2", "3", "4", "5", "typo-6"])
    lake = tmp_path / "lake"
    code, err = run_main(monkeypatch, capsys, ["run", str(_yaml(tmp_path, "ids-cli", data, outs)), "--lake", str(lake)])
    flat = " ".join(err.split())
    assert code == 0, err
    assert (f"warning: model m: precomputed outputs file {outs}: 5 of the dataset's 6 samples have an output; 1 of its 6 "
            "sample ids are not in the dataset (e.g. 'typo-6') and are ignored; 1 sample has no output (e.g. '6')") in flat
    assert "check that the file belongs to this dataset" in flat
    assert flat.count("typo-6") == 1  # shown once, not again by the run's own log
    gens = LakeStore(root=str(lake)).read("generations")
    assert sorted(gens["sample_id"].to_list()) == [str(i) for i in range(1, N + 1)]
    assert gens.filter(pl.col("status") == "ok").height == 5

    (tmp_path / "other").mkdir()
    _, other_outs = _files(tmp_path / "other", ["a", "b"])  # another dataset's file
    runs_before = instance.get_runs_count()
    code, err = run_main(monkeypatch, capsys, ["run", str(_yaml(tmp_path, "ids-cli-none", data, other_outs)), "--lake", str(lake)])
    flat = " ".join(err.split())
    assert code == 1
    assert flat.startswith(f"error: model m: precomputed outputs file {other_outs}: none of its 2 sample ids is in the dataset")
    assert "nothing was run" in flat and "Traceback" not in err
    assert instance.get_runs_count() == runs_before
