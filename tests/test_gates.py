"""Release gates (issue 28): one rule (metric_ops.gates.evaluate_gates) drives
`facetlake compare --fail-on-regression`, `--junit`, `--markdown` and the regression asset
check; it fires only on a significant (Holm-adjusted) regression or a declared `gate:` rule."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import polars as pl
import pytest

from assets.comparisons import regression_check
from metric_ops.compare import compare_models
from metric_ops.gates import GateError, GateRules, evaluate_gates, junit_xml, markdown_summary

N = 1000


def _frame(base: np.ndarray, cand: np.ndarray) -> pl.DataFrame:
    rows = []
    for model, vals in (("v1", base), ("v2", cand)):
        rows += [{"model": model, "sample_id": f"q{i:04d}", "metric": "token_f1", "value": float(v), "direction": "maximize",
                  "dimension": "baseline_grounding", "status": "scored", "detail": None} for i, v in enumerate(vals)]
    return pl.DataFrame(rows, schema_overrides={"detail": pl.String})


def _rows(seed: int, shift: float) -> list[dict]:
    rng = np.random.default_rng(seed)
    base = np.clip(rng.normal(60, 20, N), 0, 100)
    cand = np.clip(rng.normal(60, 20, N) + shift, 0, 100) if shift == 0 else np.clip(base + shift + rng.normal(0, 10, N), 0, 100)
    return compare_models(_frame(base, cand), baseline="v1", n_permutations=1999, n_resamples=500, seed=seed)


def test_a_seeded_regression_fires_and_junit_names_what_a_reviewer_needs(tmp_path):
    rows = _rows(1, -5.0)
    verdict = evaluate_gates(rows, "v1")
    assert not verdict.passed and [f.gate for f in verdict.fired] == ["regression"]
    f = verdict.fired[0]
    pw = next(r for r in rows if r["kind"] == "pairwise")
    assert f.delta == pytest.approx(pw["delta"]) and -6.5 < f.delta < -3.5
    assert f.ci == (pw["detail"]["delta_ci_low"], pw["detail"]["delta_ci_high"]) and f.ci[1] < 0
    worst = [r["sample_id"] for r in rows if r["kind"] == "sample_change" and r["verdict"] == "regressed"][:5]
    assert list(f.worst) == worst and len(worst) == 5
    xml = junit_xml([("qa@abc", verdict)])
    root = ET.fromstring(xml)
    assert root.get("failures") == "1" and root.get("tests") == "1"
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("type") == "regression"
    for needle in ("metric: token_f1", f"difference: {f.delta:+.4g}", f"interval: [{f.ci[0]:+.4g}, {f.ci[1]:+.4g}]",
                   f"detectable effect: {f.mde:.4g}", "worst samples: " + ", ".join(worst)):
        assert needle in failure.text
    md = markdown_summary([("qa@abc", verdict)])
    assert md.startswith("## facetlake gate: FAILED") and "| qa@abc | regression | v2 | token_f1 |" in md
    check = regression_check(rows, "v1", "f" * 64)
    assert not check.passed and "regression" in check.description and check.metadata["gates_fired"].value == "regression"
    # numbers the UI plots are keyed by evaluation, model and score: no plot mixes units (issue 26, fault 12)
    plotted = {k for k, v in check.metadata.items() if isinstance(getattr(v, "value", None), float)}
    assert plotted == {"delta · ffffffffffff · v2 · token_f1"}
    named = regression_check(rows, "v1", "f" * 64, evaluation="qa")
    assert named.metadata["delta · qa · v2 · token_f1"].value == pytest.approx(f.delta)


def test_same_distribution_passes_at_least_95_of_100_and_the_check_agrees():
    passed = 0
    for seed in range(100):
        rows = _rows(seed, 0.0)
        verdict = evaluate_gates(rows, "v1")
        assert regression_check(rows, "v1", "f" * 64).passed == verdict.passed  # CLI and asset check: one rule
        passed += verdict.passed
    assert passed >= 95, passed


def test_declared_gates_fire_on_their_own_rule():
    rows = _rows(3, -1.0)  # a small loss: maybe significant, maybe not
    base = evaluate_gates(rows, "v1")
    pw = next(r for r in rows if r["kind"] == "pairwise")
    low = pw["detail"]["delta_ci_low"]
    # non-inferiority: a margin wider than the interval's worse bound passes, a narrower one fires
    assert "margin" not in {f.gate for f in evaluate_gates(rows, "v1", GateRules.from_mapping({"margin": {"token_f1": -low + 0.01}})).fired}
    assert "margin" in {f.gate for f in evaluate_gates(rows, "v1", GateRules.from_mapping({"margin": {"token_f1": -low - 0.01}})).fired}
    cand_mean = next(r["mean"] for r in rows if r["kind"] == "model_metric" and r["model"] == "v2")
    floors = evaluate_gates(rows, "v1", GateRules.from_mapping({"min": {"*": cand_mean + 1}})).fired
    assert [(f.gate, f.model) for f in floors if f.gate == "min"] == [("min", "v2")]  # the baseline is not floored
    worst_drop = max(r["baseline_mean"] - r["mean"] for r in rows if r["kind"] == "sample_change" and r["verdict"] == "regressed")
    assert "max_severity" in {f.gate for f in evaluate_gates(rows, "v1", GateRules.from_mapping({"max_severity": {"token_f1": worst_drop - 1}})).fired}
    assert "max_severity" not in {f.gate for f in evaluate_gates(rows, "v1", GateRules.from_mapping({"max_severity": {"token_f1": worst_drop + 1}})).fired}
    assert {f.gate for f in base.fired} <= {"regression"}


@pytest.mark.parametrize("bad,match", [
    ({"margins": {"bleu": 1}}, "unknown gate rules"),
    ({"margin": {"bleu": "big"}}, "not a finite number"),
    ({"margin": {"bleu": -1}}, "must be >= 0"),
    ({"min": 0.5}, "map a score name"),
])
def test_bad_gate_rules_are_refused_naming_the_fix(bad, match):
    with pytest.raises(GateError, match=match):
        GateRules.from_mapping(bad)
    from resources.catalog.spec import EvaluationSpec, SpecError

    with pytest.raises(SpecError, match=match):
        EvaluationSpec.from_mapping({"name": "x", "dataset": {"kind": "sfres"}, "models": {"m": "precomputed:column=system_output"},
                                     "metrics": ["token_f1"], "gate": bad})


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_cli_gate_writes_junit_and_markdown_on_a_real_lake(tmp_path, instance):
    from typer.testing import CliRunner

    from pipelines.cli import app
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore
    from tests.conftest import DATA_DIR

    data = json.loads((DATA_DIR / "unieval" / "sfres.json").read_text())[:60]
    good = {str(d["doc_id"]): d["system_output"] for d in data}
    bad = {k: ("no answer ." if i % 3 == 0 else v) for i, (k, v) in enumerate(good.items())}
    for name, outputs in (("good", good), ("bad", bad)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"sample_id": k, "output": v}) + "\n" for k, v in outputs.items()))
    spec = EvaluationSpec.from_mapping({
        "name": "gated", "dataset": {"kind": "sfres", "limit": 60}, "metrics": ["token_f1"], "baseline": "good",
        "models": {"good": f"precomputed:{tmp_path / 'good.jsonl'}", "bad": f"precomputed:{tmp_path / 'bad.jsonl'}"},
        "gate": {"min": {"token_f1": 0.0}},
    })
    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(spec, lake, instance)
    out = CliRunner().invoke(app, ["compare", "--fail-on-regression", "--junit", str(tmp_path / "g.xml"),
                                   "--markdown", str(tmp_path / "g.md"), "--lake", lake.root])
    assert out.exit_code == 1 and "gate fired" in out.output, out.output
    failure = ET.parse(tmp_path / "g.xml").getroot().find("testsuite/testcase/failure")
    assert failure.get("type") == "regression" and "metric: token_f1" in failure.text and "worst samples: " in failure.text
    assert (tmp_path / "g.md").read_text().startswith("## facetlake gate: FAILED")
