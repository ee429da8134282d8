"""Versions you can query (issue 31): `facetlake sql --as-of` / `--run` read every Delta
table as it was at an earlier point (Delta time travel), through the same read-only, bounded
DuckDB connection."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from pipelines.cli import app

pytestmark = pytest.mark.xdist_group("time_travel")  # one worker builds the module fixture once

runner = CliRunner()


def _dataset(path, edited: bool):
    rows = [{"id": f"q{i}", "question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(5)]
    if edited:
        for i in (1, 2, 3):
            rows[i]["answer"] = f"{2 * i} exactly"
        rows += [{"id": f"q{i}", "question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in (5, 6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _spec(path):
    from resources.catalog.spec import EvaluationSpec

    return EvaluationSpec.from_mapping({
        "name": "versions", "metrics": ["exact_match", "token_f1"], "models": {"copy": "heuristic:copy-input"},
        "dataset": {"kind": "file", "path": str(path), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
    })


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    root = tmp_path_factory.mktemp("timetravel")
    data = root / "qa.jsonl"
    lake = LakeStore(root=str(root / "lake"))
    _dataset(data, edited=False)
    first = run_evaluation(_spec(data), lake, instance)
    state = {"samples": lake.read("samples").height, "scores": lake.read("scores").height,
             "samples_version": lake.version("samples"), "scores_version": lake.version("scores"),
             "runs": lake.read("runs"),
             "verdict": lake.read("comparisons", where={"fingerprint": first.fingerprint, "kind": "model_metric"})}
    _dataset(data, edited=True)
    second = run_evaluation(_spec(data), lake, instance)
    assert second.fingerprint != first.fingerprint
    return lake, first, second, state


def _sql(lake, *args):
    out = runner.invoke(app, ["sql", "--lake", lake.root, "-f", "json", *args])
    return out


def _count(out) -> int:
    body = out.stdout if hasattr(out, "stdout") else out.output
    return json.loads(body)[0]["n"]


def test_as_of_a_table_version_reads_the_old_samples_and_scores(two_versions):
    lake, first, second, state = two_versions
    now = _sql(lake, "select count(*) as n from samples")
    assert now.exit_code == 0 and _count(now) == state["samples"] + 7  # the second fingerprint's 7 samples beside the first 5
    old = _sql(lake, "--as-of", f"samples={state['samples_version']}", "select count(*) as n from samples")
    assert old.exit_code == 0, old.output
    assert _count(old) == state["samples"] == 5
    # the other tables as of that commit: no score existed yet
    said = _sql(lake, "--as-of", f"samples={state['samples_version']}", "select 1 as n").stderr
    assert "scores" in said.split("not yet made then:")[1], said
    missing = _sql(lake, "--as-of", f"samples={state['samples_version']}", "select count(*) from scores")
    assert missing.exit_code == 1 and "scores" in missing.output
    scores = _sql(lake, "--as-of", f"scores={state['scores_version']}", "select count(*) as n from scores")
    assert _count(scores) == state["scores"]
    values = _sql(lake, "--as-of", f"scores={state['scores_version']}",
                  "select sample_id, metric, value from scores order by sample_id, metric")
    expect = lake.read("scores", version=state["scores_version"]).sort("sample_id", "metric").select("sample_id", "metric", "value")
    assert json.loads(values.stdout) == expect.to_dicts()


def test_as_of_a_run_and_a_timestamp_read_what_that_run_left(two_versions):
    lake, first, second, state = two_versions
    runs = state["runs"].filter(pl.col("asset") == "comparisons").sort("finished_at")
    run_id, finished = runs["run_id"][0], runs["finished_at"][0]
    by_run = _sql(lake, "--run", run_id[:12], "select count(*) as n from scores")
    assert by_run.exit_code == 0, by_run.output
    assert _count(by_run) == state["scores"]
    assert "as of" in by_run.stderr
    stamp = finished.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
    by_time = _sql(lake, "--as-of", stamp, "select count(*) as n from samples")
    assert _count(by_time) == state["samples"]


@pytest.mark.parametrize("args,needle", [
    (["--as-of", "3"], "a bare version is ambiguous"),
    (["--as-of", "nosuch=1"], "no table 'nosuch'"),
    (["--as-of", "samples=999"], "samples has versions"),
    (["--as-of", "yesterday-ish"], "not a timestamp or TABLE=VERSION"),
    (["--as-of", "2001-01-01"], "before the lake's first commit"),
    (["--run", "no-such-run"], "no run with that id"),
])
def test_points_that_name_nothing_are_refused_with_the_fix(two_versions, args, needle):
    lake = two_versions[0]
    out = _sql(lake, *args, "select 1 as n")
    assert out.exit_code == 1 and needle in out.output, out.output


def test_datasets_diff_lists_exactly_the_edited_and_added_samples(two_versions):
    lake, first, second, _ = two_versions
    out = runner.invoke(app, ["datasets", "diff", "versions", "--lake", lake.root, "-f", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert sorted((r["sample_id"], r["change"], r["fields"]) for r in rows) == [
        ("q1", "changed", "references"), ("q2", "changed", "references"), ("q3", "changed", "references"),
        ("q5", "added", ""), ("q6", "added", "")]
    assert "3 changed samples (2 unchanged)" in out.stderr and f"versions@{first.fingerprint[:12]}" in out.stderr
    # explicit ends, either order, and ~1 for the fingerprint before the current one
    back = runner.invoke(app, ["datasets", "diff", "versions", second.fingerprint[:12], "~1", "--lake", lake.root, "-f", "json"])
    assert sorted((r["sample_id"], r["change"]) for r in json.loads(back.stdout)) == [
        ("q1", "changed"), ("q2", "changed"), ("q3", "changed"), ("q5", "removed"), ("q6", "removed")]
    kinds = runner.invoke(app, ["datasets", "-f", "json"])
    assert kinds.exit_code == 0 and "sfres" in {r["kind"] for r in json.loads(kinds.stdout)}  # the listing still works
    one = runner.invoke(app, ["datasets", "diff", "versions", first.fingerprint[:12], first.fingerprint[:12], "--lake", lake.root])
    assert one.exit_code == 0 and "0 added, 0 removed, 0 changed samples (5 unchanged)" in one.output


def test_compare_against_the_first_run_equals_its_stored_verdict(two_versions):
    lake, first, second, state = two_versions
    run_id = state["runs"].filter(pl.col("asset") == "comparisons").sort("finished_at")["run_id"][0]
    out = runner.invoke(app, ["compare", "-e", "versions", "--against", run_id[:10], "--lake", lake.root, "-f", "json"])
    assert out.exit_code == 0, out.output
    rows = {(r["metric"], r["model"]): r for r in json.loads(out.stdout)}
    stored = {(r["metric"], r["model"]): r["mean"] for r in state["verdict"].iter_rows(named=True)}
    assert set(rows) == set(stored) and len(stored) >= 2
    for key, mean in stored.items():
        assert abs(rows[key]["then"] - mean) <= 1e-12  # the first run's verdict, as stored
    now = lake.read("comparisons", where={"fingerprint": second.fingerprint, "kind": "model_metric"})
    for r in now.iter_rows(named=True):
        got = rows[(r["metric"], r["model"])]
        assert abs(got["now"] - r["mean"]) <= 1e-12 and abs(got["difference"] - (r["mean"] - got["then"])) <= 1e-12
        assert got["samples added"] == 2 and got["samples removed"] == 0  # q5, q6 joined the dataset
        assert got["then_evaluation"] == f"versions@{first.fingerprint[:12]}"
    table = runner.invoke(app, ["compare", "-e", "versions", "--against", run_id[:10], "--lake", lake.root], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "samples changed" in table.output
    bad = runner.invoke(app, ["compare", "-e", "versions", "--against", "nosuchrun", "--lake", lake.root])
    assert bad.exit_code == 1 and "no run with that id" in bad.output


def test_evaluations_show_and_every_verdict_name_what_they_rest_on(two_versions):
    lake, first, second, state = two_versions
    out = runner.invoke(app, ["evaluations", "show", "versions", "--lake", lake.root, "-f", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [r["fingerprint"] for r in rows] == [second.fingerprint[:12], first.fingerprint[:12]]  # newest first
    assert [r["status"] for r in rows] == ["current", "history"]
    stored = {r["fingerprint"][:12]: r for r in lake.read("evaluations").to_dicts()}
    assert all(r["dataset sha256"] == stored[r["fingerprint"]]["dataset_hash"][:12] for r in rows)
    assert rows[1]["samples version"] == state["samples_version"]
    assert rows[0]["adapter sha256"] == rows[1]["adapter sha256"] and rows[0]["dataset sha256"] != rows[1]["dataset sha256"]
    from metric_ops.registry import REGISTRY

    assert rows[0]["metrics"] == ", ".join(f"{m} v{REGISTRY.get_class(m).version}" for m in ("exact_match", "token_f1"))
    # each comparisons row carries the same in its reads record
    reads = json.loads(lake.read("comparisons", where={"fingerprint": second.fingerprint})["reads"][0])
    assert reads["rests_on"]["dataset_sha256"] == stored[second.fingerprint[:12]]["dataset_hash"]
    assert reads["rests_on"]["samples_version"] is not None and reads["rests_on"]["metric_versions"].keys() == {"exact_match", "token_f1"}
    # the summary's run provenance and the report's overview name it too
    prov = json.loads(lake.read("runs", where={"asset": "summary", "fingerprint": second.fingerprint}).sort("finished_at")["provenance"][-1])
    assert prov["rests_on"]["dataset_sha256"] == reads["rests_on"]["dataset_sha256"]
    from pipelines.report import build_html
    from pipelines.report.data import load_report_data
    from resources.lake.tables import LakeTables

    html = build_html(load_report_data(LakeTables(root=lake.root), second.fingerprint))
    assert "rests on (issue 31)" in html and f"metrics exact_match v{REGISTRY.get_class('exact_match').version}" in html


def test_the_evidence_manifest_carries_the_versions_and_verify_checks_them(two_versions, tmp_path):
    lake, first, second, state = two_versions
    out = tmp_path / "evidence"
    done = runner.invoke(app, ["export", "-e", second.fingerprint, "--out", str(out), "--unsigned", "--lake", lake.root])
    assert done.exit_code == 0, done.output
    manifest = json.loads((out / "MANIFEST.json").read_text())
    versions = manifest["versions"]
    assert versions["dataset_content_sha256"] == lake.read("evaluations", where={"fingerprint": second.fingerprint})["dataset_hash"][0]
    assert versions["tables"]["scores"] == lake.version("scores") and versions["samples_version"] is not None
    ok = runner.invoke(app, ["verify", str(out), "--lake", lake.root, "--allow-unsigned"])
    assert ok.exit_code == 0, ok.output
    # point the manifest at the scores as they were before the second evaluation: verify fails on it
    versions["tables"]["scores"] = state["scores_version"]
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    bad = runner.invoke(app, ["verify", str(out), "--lake", lake.root, "--allow-unsigned"])
    assert bad.exit_code == 1 and f"scores at scores version {state['scores_version']} are not the exported" in " ".join(bad.output.split())
    versions["tables"]["scores"] = 9999
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    gone = runner.invoke(app, ["verify", str(out), "--lake", lake.root, "--allow-unsigned"])
    assert gone.exit_code == 1 and "scores version 9999 is not in this lake's history" in " ".join(gone.output.split())
