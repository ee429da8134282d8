"""Comparisons state differences, not only p-values (issue 28): the paired difference
with its interval in the metric's units, the minimum detectable effect, clustered tests
when a cluster is declared, and tie groups on every model_metric row."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from metric_ops import compare, stats


def _frame(values: dict[str, np.ndarray], metric: str = "token_f1") -> pl.DataFrame:
    rows = []
    for model, vals in values.items():
        for i, v in enumerate(vals):
            rows.append({"model": model, "sample_id": f"s{i:04d}", "metric": metric, "value": float(v),
                         "direction": "maximize", "dimension": "baseline_grounding", "status": "scored", "detail": None})
    return pl.DataFrame(rows, schema_overrides={"detail": pl.String})


@pytest.fixture(scope="module")
def three_models():
    rng = np.random.default_rng(11)
    a = rng.normal(60, 20, 200)
    return {"a": a, "b": a + rng.normal(0.3, 5, 200), "c": a - 15 + rng.normal(0, 5, 200)}


@pytest.mark.parametrize("baseline", [None, "c"])
def test_tie_groups_on_model_rows(three_models, baseline):
    out = compare.compare_models(_frame(three_models), baseline=baseline, n_permutations=2000, n_resamples=500)
    groups = {r["model"]: r["detail"]["tie_group"] for r in out if r["kind"] == "model_metric"}
    assert groups == {"a": 1, "b": 1, "c": 2}  # 0.3 points apart on 200 items: one group


def test_pairwise_rows_carry_the_difference_interval_and_detectable_effect(three_models):
    out = compare.compare_models(_frame(three_models), baseline="a", n_permutations=2000, n_resamples=1000)
    rows = {r["model"]: r for r in out if r["kind"] == "pairwise"}
    d = three_models["c"] - three_models["a"]
    det = rows["c"]["detail"]
    assert det["delta_ci_low"] < rows["c"]["delta"] < det["delta_ci_high"] < 0
    ci = stats.bootstrap_ci(d, np.mean, 0.95, 1000, 0)
    assert (det["delta_ci_low"], det["delta_ci_high"]) == (ci.low, ci.high)
    assert det["mde"] == pytest.approx(stats.min_detectable_effect(float(d.std(ddof=1)), 200), abs=1e-12)
    assert rows["c"]["verdict"] == "regressed" and rows["b"]["verdict"] == "no significant difference"
    assert det["mde_power"] == 0.8


def test_declared_clusters_switch_to_the_clustered_test():
    rng = np.random.default_rng(3)
    labels = np.arange(40).repeat(10)
    base = rng.normal(50, 10, 400)
    cand = base + rng.normal(0, 3, 40).repeat(10) + rng.normal(0, 1, 400)  # correlated within clusters, no true shift
    clusters = {f"s{i:04d}": f"passage-{labels[i]}" for i in range(400)}
    frame = _frame({"v1": base, "v2": cand})
    naive = next(r for r in compare.compare_models(frame, baseline="v1", n_permutations=2000, n_resamples=500)
                 if r["kind"] == "pairwise")
    clustered = next(r for r in compare.compare_models(frame, baseline="v1", n_permutations=2000, n_resamples=500,
                                                       clusters=clusters) if r["kind"] == "pairwise")
    det = clustered["detail"]
    assert clustered["test"] == "clustered-permutation" and det["n_clusters"] == 40
    assert det["se_cluster"] == pytest.approx(stats.cluster_robust_se(cand - base, labels), abs=1e-12)
    assert det["design_effect"] > 3 and det["icc"] > 0.5
    assert clustered["p_value"] > naive["p_value"]
    assert det["mde"] > naive["detail"]["mde"] * 1.5  # the design effect widens what can be detected
    assert det["delta_ci_method"] == "cluster-bootstrap-percentile"
