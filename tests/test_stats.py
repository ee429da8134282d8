"""Known-answer tests for metric_ops.stats (published values, enumeration, scipy)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from metric_ops import stats


# --------------------------------------------------------------------------- Wilson
@pytest.mark.parametrize(
    "k,n,low,high",
    [
        # Newcombe (1998), Stat. Med. 17:857, Table I, method 3 (Wilson score without continuity correction)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998(k, n, low, high):
    ci = stats.wilson_interval(k, n)
    assert ci.method == "wilson"
    assert ci.low == pytest.approx(low, abs=5e-5) and ci.high == pytest.approx(high, abs=5e-5)


def test_wilson_matches_its_closed_form():
    k, n, z = 8, 10, sps.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    ci = stats.wilson_interval(k, n)
    assert ci.low == pytest.approx(centre - half, abs=1e-12) and ci.high == pytest.approx(centre + half, abs=1e-12)


def test_wilson_rejects_impossible_counts_and_is_undefined_without_trials():
    with pytest.raises(stats.StatsError, match="successes"):
        stats.wilson_interval(5, 3)
    assert stats.wilson_interval(0, 0).low is None


# --------------------------------------------------------------------------- bootstrap
def test_bootstrap_percentile_of_the_mean_is_close_to_the_normal_interval():
    rng = np.random.default_rng(7)
    x = rng.normal(10.0, 2.0, size=2000)
    ci = stats.bootstrap_ci(x, n_resamples=4000, seed=1)
    half = 1.959964 * x.std(ddof=1) / math.sqrt(x.size)
    assert ci.method == "bootstrap-percentile"
    assert ci.low == pytest.approx(x.mean() - half, abs=0.02) and ci.high == pytest.approx(x.mean() + half, abs=0.02)


def test_bootstrap_is_reproducible_and_matches_scipy_percentile_method():
    x = np.array([0.1, 0.4, 0.35, 0.8, 0.9, 0.05, 0.6, 0.7])
    a = stats.bootstrap_ci(x, seed=3)
    b = stats.bootstrap_ci(x, seed=3)
    ref = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=2000, rng=np.random.default_rng(3))
    assert (a.low, a.high) == (b.low, b.high)
    assert a.low == pytest.approx(ref.confidence_interval.low) and a.high == pytest.approx(ref.confidence_interval.high)
    assert a.low < x.mean() < a.high


def test_bootstrap_edge_cases():
    assert stats.bootstrap_ci([0.5]).low is None
    constant = stats.bootstrap_ci([0.3, 0.3, 0.3])
    assert constant.low == constant.high == pytest.approx(0.3)
    with pytest.raises(stats.StatsError, match="non-finite"):
        stats.bootstrap_ci([0.1, float("nan")])


def test_mean_interval_uses_wilson_for_binary_scores_only():
    assert stats.mean_interval([0, 1, 1, 0, 1]).method == "wilson"
    assert stats.mean_interval([0, 0.5, 1, 0, 1]).method == "bootstrap-percentile"


# --------------------------------------------------------------------------- permutation
def _enumerated_sign_flip_p(x, y):
    d = np.asarray(y, float) - np.asarray(x, float)
    observed = abs(d.mean())
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=d.size):
        total += 1
        hits += abs((d * signs).mean()) >= observed - 1e-12
    return hits / total


@pytest.mark.parametrize(
    "x,y",
    [
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.5, 2.9, 3.4, 4.8, 5.2, 7.1]),
        ([0.2, 0.4, 0.1, 0.9, 0.5, 0.3, 0.7], [0.1, 0.6, 0.1, 0.8, 0.9, 0.2, 0.75]),
    ],
)
def test_paired_permutation_is_exact_for_small_n(x, y):
    res = stats.paired_permutation_test(x, y)
    assert res.exact
    assert res.p_value == pytest.approx(_enumerated_sign_flip_p(x, y), abs=1e-12)
    assert res.statistic == pytest.approx(np.mean(np.subtract(y, x)))


def test_paired_permutation_agrees_with_the_paired_t_test_for_large_n():
    rng = np.random.default_rng(11)
    x = rng.normal(0.5, 0.2, 400)
    y = x + rng.normal(0.02, 0.1, 400)
    res = stats.paired_permutation_test(x, y, n_resamples=20000, seed=2)
    assert not res.exact
    assert res.p_value == pytest.approx(sps.ttest_rel(y, x).pvalue, abs=0.01)


def test_paired_permutation_edge_cases():
    assert stats.paired_permutation_test([1.0, 2.0], [1.0, 2.0]).p_value == 1.0
    assert stats.paired_permutation_test([1.0], [2.0]).p_value is None
    with pytest.raises(stats.StatsError, match="length"):
        stats.paired_permutation_test([1.0, 2.0], [1.0])


# --------------------------------------------------------------------------- McNemar
def test_mcnemar_exact_known_answer():
    # b = 1, c = 9 discordant pairs: p = 2 * P(X <= 1 | Bin(10, 1/2)) = 2 * 11 / 1024
    x = [1] + [0] * 9 + [1] * 5 + [0] * 3
    y = [0] + [1] * 9 + [1] * 5 + [0] * 3
    res = stats.mcnemar_exact(x, y)
    assert (res.extra["b"], res.extra["c"]) == (1, 9)
    assert res.p_value == pytest.approx(22 / 1024, abs=1e-15)
    assert res.p_value == pytest.approx(sps.binomtest(1, 10, 0.5).pvalue)


def test_mcnemar_without_discordant_pairs_and_on_non_binary_input():
    assert stats.mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(stats.StatsError, match="0/1"):
        stats.mcnemar_exact([0.5, 1], [1, 1])
    assert stats.paired_test([0, 1, 1], [1, 1, 1]).test == "mcnemar-exact"
    assert stats.paired_test([0, 0.5, 1], [1, 1, 1]).test == "paired-permutation"


# --------------------------------------------------------------------------- Holm
def test_holm_known_answers():
    # m = 4: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.06, 0.04*1) = 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1 and None kept in place (not counted in m)
    out = stats.holm([0.5, None, 0.4])
    assert out[1] is None and out[0] == pytest.approx(0.8) and out[2] == pytest.approx(0.8)
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    with pytest.raises(stats.StatsError):
        stats.holm([1.5])


# --------------------------------------------------------------------------- effect sizes
def test_cohens_dz_and_g():
    # d = [1, 2, 2, 1]: mean 1.5, sd 0.57735 -> 2.598
    assert stats.cohens_dz([1, 2, 3, 4], [2, 4, 5, 5]) == pytest.approx(1.5 / math.sqrt(1 / 3))
    assert stats.cohens_dz([1, 2], [2, 3]) is None  # zero variance of differences
    x = [1] + [0] * 9
    y = [0] + [1] * 9
    assert stats.cohens_g(x, y) == pytest.approx(0.9 - 0.5)
    assert stats.cohens_g(y, x) == pytest.approx(0.1 - 0.5)
    assert stats.paired_effect_size(x, y)[1] == "cohens_g"


# --------------------------------------------------------------------------- correlations
def _kendall_tau_a(x, y):
    c = d = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        s = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        c += s > 0
        d += s < 0
    return (c - d) / (len(x) * (len(x) - 1) / 2)


def test_correlation_known_answers():
    assert stats.correlation([1, 2, 3, 4, 5], [2, 4, 5, 4, 5], "pearson").r == pytest.approx(0.7745966692414834)
    assert stats.correlation([1, 2, 3, 4, 5], [1, 8, 27, 64, 125], "spearman").r == pytest.approx(1.0)
    x, y = [1, 2, 3, 4, 5], [3, 4, 1, 2, 5]  # no ties: tau-b = tau-a
    assert stats.correlation(x, y, "kendall").r == pytest.approx(_kendall_tau_a(x, y))


def test_correlation_matches_scipy_on_tied_data():
    rng = np.random.default_rng(5)
    x = rng.integers(1, 6, 80).astype(float)
    y = x + rng.integers(-2, 3, 80)
    assert stats.correlation(x, y, "pearson").r == pytest.approx(sps.pearsonr(x, y).statistic, abs=1e-12)
    assert stats.correlation(x, y, "spearman").r == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
    res = sps.kendalltau(x, y)
    got = stats.correlation(x, y, "kendall")
    assert got.r == pytest.approx(res.statistic, abs=1e-12) and got.p_value == pytest.approx(res.pvalue, rel=1e-9)


def test_correlation_is_undefined_not_zero_for_constant_or_tiny_input():
    const = stats.correlation([1, 1, 1, 1], [1, 2, 3, 4], "pearson")
    assert const.r is None and "constant" in const.note
    assert stats.correlation([1, 2], [1, 2], "spearman").r is None
    with pytest.raises(stats.StatsError, match="unknown correlation"):
        stats.correlation([1, 2, 3], [1, 2, 3], "cosine")
