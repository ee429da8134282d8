"""Clustered, powered and small-n statistics (issue 28): CR1 cluster-robust standard
errors equal statsmodels, ICC equals its ANOVA form from scipy, the clustered paired test
keeps its level where the item-level test does not (null simulation), Wilson and
Clopper-Pearson intervals, minimum detectable effects against statsmodels' power module,
and tie groups.

Real data: SF-RES (data/unieval/sfres.json) has several system outputs per meaning
representation (580 sources, 563 of them with exactly 2 outputs): the outputs of one
source are a cluster, as several questions per passage are in SQuAD v2."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as sps
from statsmodels.stats.power import NormalIndPower

from metric_ops import stats
from metric_ops.base import Sample
from metric_ops.registry import get_metric
from metric_ops.scoring.frame import score_rows
from tests.conftest import DATA_DIR


@pytest.fixture(scope="module")
def sfres():
    data = json.loads((DATA_DIR / "unieval" / "sfres.json").read_text())
    samples = [Sample(str(i), d["source"], (d["reference"],)) for i, d in enumerate(data)]
    outputs = [d["system_output"] for d in data]
    f1 = np.array([r["value"] for r in score_rows(get_metric("token_f1"), samples, outputs)], float)
    clusters = [d["source"] for d in data]
    human = np.array([d["scores"]["naturalness"] for d in data], float)
    return f1, human, clusters


def _statsmodels_cluster_se(y: np.ndarray, clusters: list[str]) -> float:
    groups = np.unique(np.array(clusters), return_inverse=True)[1]
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    return float(fit.bse[0])


def test_cluster_robust_se_equals_statsmodels_on_real_clusters(sfres):
    f1, human, clusters = sfres
    for y in (f1, human, f1 - human / 6.0):  # a mean, another, and a paired difference
        assert stats.cluster_robust_se(y, clusters) == pytest.approx(_statsmodels_cluster_se(y, clusters), rel=0, abs=1e-10)
    summary = stats.cluster_summary(f1, clusters)
    assert summary.n_clusters == 580 and summary.n == f1.size
    assert summary.se_naive == pytest.approx(f1.std(ddof=1) / np.sqrt(f1.size), abs=1e-15)


def test_icc_equals_the_anova_form_and_design_effect_its_closed_form(sfres):
    f1, _, clusters = sfres
    by_source = defaultdict(list)
    for v, c in zip(f1, clusters):
        by_source[c].append(v)
    pairs = [vals for vals in by_source.values() if len(vals) == 2]  # the balanced part: 563 clusters of 2
    y = np.concatenate(pairs)
    labels = np.repeat(np.arange(len(pairs)), 2)
    f = sps.f_oneway(*pairs).statistic  # MSB / MSW
    expected = (f - 1.0) / (f + 2 - 1.0)  # ICC(1) for clusters of k = 2
    icc = stats.icc_anova(y, labels)
    assert icc == pytest.approx(max(0.0, expected), abs=1e-12)
    summary = stats.cluster_summary(y, labels)
    assert summary.design_effect == pytest.approx(1.0 + (2 - 1) * icc, abs=1e-15)
    with pytest.raises(stats.StatsError):
        stats.design_effect(1.5, 2.0)


def test_design_effect_matches_the_variance_inflation_it_predicts():
    rng = np.random.default_rng(5)
    g, m, icc = 400, 10, 0.3
    y = rng.normal(0, np.sqrt(icc), g).repeat(m) + rng.normal(0, np.sqrt(1 - icc), g * m)
    labels = np.arange(g).repeat(m)
    summary = stats.cluster_summary(y, labels)
    assert summary.icc == pytest.approx(icc, abs=0.05)
    assert summary.variance_ratio == pytest.approx(summary.design_effect, rel=0.2)  # 1 + 9 * 0.3 = 3.7


def _null_evaluations(n_sims: int, seed: int = 2024):
    """Simulated evaluations with no true difference: 50 clusters of 10 items, paired
    differences u_cluster + e_item with ICC 0.7."""
    rng = np.random.default_rng(seed)
    labels = np.arange(50).repeat(10)
    for _ in range(n_sims):
        base = rng.normal(50, 10, 500)
        diff = rng.normal(0, np.sqrt(0.7), 50).repeat(10) + rng.normal(0, np.sqrt(0.3), 500)
        yield base, base + diff, labels


def test_null_simulation_clustered_test_keeps_its_level_and_naive_does_not():
    clustered = naive = 0
    n_sims = 500
    for i, (x, y, labels) in enumerate(_null_evaluations(n_sims)):
        clustered += stats.clustered_paired_test(x, y, labels, n_resamples=999, seed=i).p_value < 0.05
        naive += stats.paired_permutation_test(x, y, n_resamples=999, seed=i).p_value < 0.05
    assert 0.03 <= clustered / n_sims <= 0.07, clustered
    assert naive / n_sims >= 0.25, naive  # the harness can fail: items treated as independent


def test_clustered_test_statistic_ties_and_errors():
    x = np.arange(12, dtype=float)
    labels = [i // 3 for i in range(12)]
    same = stats.clustered_paired_test(x, x.copy(), labels)
    assert same.p_value == 1.0 and same.statistic == 0.0
    res = stats.clustered_paired_test(x, x + 1.0, labels)
    assert res.statistic == pytest.approx(1.0) and res.extra["n_clusters"] == 4 and res.exact
    assert res.p_value == pytest.approx(2 / 16)  # 4 clusters: 16 sign patterns, the two extremes
    assert stats.clustered_paired_test(x, x + 1, [0] * 12).p_value is None
    with pytest.raises(stats.StatsError, match="no cluster label"):
        stats.clustered_paired_test(x, x, [None] + labels[1:])


def test_cluster_bootstrap_resamples_whole_clusters():
    rng = np.random.default_rng(1)
    y = rng.normal(0, 1, 60)
    labels = np.arange(12).repeat(5)
    ci = stats.cluster_bootstrap_ci(y, labels, n_resamples=500, seed=9)
    # reference: one resample at a time from the same stream
    gen = np.random.default_rng(9)
    idx = gen.integers(0, 12, (500, 12))
    sums = np.array([y[labels == c].sum() for c in range(12)])
    means = [sums[row].sum() / (5 * 12) for row in idx]
    low, high = np.quantile(means, [0.025, 0.975])
    assert (ci.low, ci.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert ci.method == "cluster-bootstrap-percentile"


def test_small_n_intervals_are_never_zero_width():
    w = stats.wilson_interval(0, 25)
    assert (round(w.low, 4), round(w.high, 4)) == (0.0, 0.1332)
    full = stats.wilson_interval(25, 25)
    assert full.high == 1.0 and full.low < 1.0
    for k in (0, 3, 25):
        cp = stats.clopper_pearson_interval(k, 25)
        ref = sps.binomtest(k, 25).proportion_ci(method="exact")
        assert (cp.low, cp.high) == (pytest.approx(ref.low, abs=1e-12), pytest.approx(ref.high, abs=1e-12))
        assert cp.high > cp.low


def test_minimum_detectable_effect_equals_statsmodels_power():
    mde = stats.mde_two_proportions(0.5, 164)
    assert mde * 100 == pytest.approx(15.5, abs=0.1)
    d = NormalIndPower().solve_power(effect_size=None, nobs1=164, alpha=0.05, power=0.8, ratio=1.0)
    assert mde == pytest.approx(d * np.sqrt(0.25), abs=1e-4)  # Cohen's d on the Bernoulli sd (far tail: see below)
    paired = stats.min_detectable_effect(sd=12.0, n=400)
    d1 = NormalIndPower().solve_power(effect_size=None, nobs1=400, alpha=0.05, power=0.8, ratio=0.0)
    # statsmodels' two-sided power adds the far tail's rejections (~1e-6 of power here): the
    # closed form (Bloom, 1995) leaves it out, so the two agree to 1e-4 in metric units
    assert paired == pytest.approx(d1 * 12.0, abs=1e-4)
    assert stats.min_detectable_effect(12.0, 400, design_effect=4.0) == pytest.approx(2 * paired)
    assert stats.min_detectable_effect(12.0, 1) is None


def test_models_point_three_apart_on_200_items_form_one_tie_group():
    rng = np.random.default_rng(11)
    a = rng.normal(60, 20, 200)
    b = a + rng.normal(0.3, 5, 200)
    c = a - 15 + rng.normal(0, 5, 200)  # clearly worse
    scores = {"a": a, "b": b, "c": c}
    names = sorted(scores)
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    p = [stats.paired_permutation_test(scores[x], scores[y], seed=0).p_value for x, y in pairs]
    adjusted = dict(zip((frozenset(pr) for pr in pairs), stats.holm(p)))
    groups = stats.tie_groups({m: float(v.mean()) for m, v in scores.items()}, adjusted)
    assert groups["a"] == groups["b"] == 1 and groups["c"] == 2
    assert stats.tie_groups({"a": 1.0, "b": 2.0}, {frozenset("ab"): 0.001}, direction="minimize") == {"a": 1, "b": 2}


def test_wild_cluster_bootstrap_past_the_draw_limit_matches_the_cluster_robust_error():
    rng = np.random.default_rng(4)
    g, m = 8000, 5  # 8,000 clusters x 5,000 resamples = 4e7 draws: the wild path
    labels = np.arange(g).repeat(m)
    d = rng.normal(0, 2, g).repeat(m) + rng.normal(0, 2, g * m)
    ci = stats.cluster_bootstrap_ci(d, labels, n_resamples=5000, seed=2)
    assert ci.method == "cluster-wild-bootstrap-percentile"
    half = (ci.high - ci.low) / 2
    assert half == pytest.approx(1.959964 * stats.cluster_robust_se(d, labels), rel=0.05)
    assert ci.low < d.mean() < ci.high
