"""BFCL v4 loader on the shipped data, and BFCL scoring through facetlake's matcher."""

from __future__ import annotations

import collections
import json

import pytest

from metric_ops.scoring.frame import score_rows
from metric_ops.toolcalls import BFCLAstAccuracy, ToolCallMetrics, bfcl_verdict
from resources.datasets.bfcl import (
    BFCL_CATEGORIES,
    BFCLDataset,
    bfcl_categories,
    perturb_calls,
    render_reference_calls,
    write_bfcl_demo_outputs,
)
from resources.datasets import DatasetError, content_hash, make_dataset

COUNTS = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240, "live_simple": 258}
# two live_simple possible answers list no accepted value for a required argument: no reply can pass them
UNSATISFIABLE = {"live_simple_106-63-0", "live_simple_112-68-0"}


@pytest.fixture(scope="module")
def samples():
    return make_dataset({"kind": "bfcl", "category": "all"}).load()


def test_loader_counts_and_shape(samples):
    by_cat = collections.Counter(s.metadata["category"] for s in samples)
    assert dict(by_cat) == COUNTS
    assert len({s.sample_id for s in samples}) == len(samples)
    first = next(s for s in samples if s.sample_id == "simple_python_0")
    assert first.input == "Find the area of a triangle with a base of 10 units and height of 5 units."
    assert first.metadata["arg_match"] == "bfcl"
    assert first.metadata["reference_calls"] == [
        [{"name": "calculate_triangle_area", "arguments": {"base": [10], "height": [5], "unit": ["units", ""]}}]
    ]
    assert first.metadata["tools"][0]["name"] == "calculate_triangle_area"
    irr = next(s for s in samples if s.metadata["category"] == "irrelevance")
    assert irr.metadata["reference_calls"] == []
    par = next(s for s in samples if s.sample_id == "parallel_0")
    assert len(par.metadata["reference_calls"]) == 1 and len(par.metadata["reference_calls"][0]) == 2


def test_category_selection_and_errors():
    assert bfcl_categories("simple") == ["simple_python"]
    assert bfcl_categories("parallel, irrelevance") == ["parallel", "irrelevance"]
    assert bfcl_categories("all") == list(BFCL_CATEGORIES)
    with pytest.raises(DatasetError, match="unknown BFCL category"):
        bfcl_categories("multi_turn")
    with pytest.raises(DatasetError, match="does not exist"):
        BFCLDataset(path="/nonexistent/bfcl", category="parallel").load()
    small = BFCLDataset(category="parallel", limit=3).load()
    assert [s.sample_id for s in small] == ["parallel_0", "parallel_1", "parallel_2"]
    assert content_hash(small) == content_hash(BFCLDataset(category="parallel", limit=3).load())


def test_possible_answers_pass_bfcl_rules_on_every_satisfiable_sample(samples):
    failures = {}
    for s in samples:
        calls = render_reference_calls(s.metadata["reference_calls"], s.metadata["tools"])
        ok, reason = bfcl_verdict(s.metadata["category"], json.dumps(calls) if calls else "No call.", s.metadata["reference_calls"], s.metadata["tools"])
        if not ok:
            failures[s.sample_id] = reason
    assert set(failures) == UNSATISFIABLE, failures


def test_perturbations_fail_and_are_deterministic(samples):
    for s in samples[:50] + samples[-50:]:
        calls = render_reference_calls(s.metadata["reference_calls"], s.metadata["tools"])
        kind, wrong = perturb_calls(s, calls)
        assert (kind, wrong) == perturb_calls(s, calls)
        output = wrong if isinstance(wrong, str) else (json.dumps(wrong) if wrong else "No call.")
        ok, _ = bfcl_verdict(s.metadata["category"], output, s.metadata["reference_calls"], s.metadata["tools"])
        assert ok == (kind == "none"), (s.sample_id, kind)


def test_demo_files_through_the_precomputed_backend(tmp_path, samples):
    """Done-when check of issue 6: two precomputed "models" over every BFCL category;
    the possible answers win on every tool-call score."""
    backends = pytest.importorskip("resources.backends")
    paths = write_bfcl_demo_outputs(tmp_path)
    means = {}
    for model, path in paths.items():
        backend = backends.PrecomputedBackend(f"precomputed:{path}")
        requests = [backends.GenerationRequest(sample=s, prompt=s.input) for s in samples]
        outputs = [r.output for r in backend.generate(requests, {})]
        assert all(o is not None for o in outputs)
        rows = score_rows(BFCLAstAccuracy(), samples, outputs) + score_rows(ToolCallMetrics(), samples, outputs)
        agg = collections.defaultdict(list)
        for row in rows:
            if row["status"] == "scored":
                agg[row["metric"]].append(row["value"])
            assert row["status"] != "error", row
        means[model] = {k: sum(v) / len(v) for k, v in agg.items()}
    gold, bad = means["possible_answers"], means["perturbed"]
    assert gold["bfcl_ast_accuracy"] == pytest.approx(1 - len(UNSATISFIABLE) / len(samples))
    assert gold["tool_call_parse_failure"] == 0.0
    assert gold["tool_irrelevance"] == 1.0
    assert bad["bfcl_ast_accuracy"] < 0.4
    for name in ("bfcl_ast_accuracy", "tool_call_f1", "tool_call_exact_set", "tool_irrelevance", "tool_call_validity"):
        assert gold[name] > bad[name], name


def test_metric_winners_by_direction():
    pl = pytest.importorskip("polars")
    demo = pytest.importorskip("pipelines.cli.demo_bfcl")
    summary = pl.DataFrame(
        {
            "model": ["good", "bad", "good", "bad", "good", "bad"],
            "metric": ["tool_call_f1", "tool_call_f1", "tool_call_redundancy", "tool_call_redundancy", "tool_call_parse_failure", "tool_call_parse_failure"],
            "mean": [0.9, 0.4, 0.0, 0.2, 0.0, 0.0],
        }
    )
    directions = {"tool_call_f1": "maximize", "tool_call_redundancy": "minimize", "tool_call_parse_failure": "minimize"}
    got = {r["metric"]: r["winner"] for r in demo.metric_winners(summary, directions).to_dicts()}
    assert got == {"tool_call_f1": "good", "tool_call_redundancy": "good", "tool_call_parse_failure": "tie"}


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_demo_bfcl_command_end_to_end(tmp_path, monkeypatch):
    testing = pytest.importorskip("typer.testing")
    cli = pytest.importorskip("pipelines.cli")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    result = testing.CliRunner().invoke(cli.app, ["demo-bfcl", "--lake", str(tmp_path / "lake"), "--category", "parallel,irrelevance", "--outputs-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "BFCL AST accuracy winner: bfcl-possible-answers" in result.output
