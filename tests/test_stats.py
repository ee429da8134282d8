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


def test_mean_interval_method_comes_from_the_declaration_not_the_values():
    # a continuous score whose values happen to be 0/1 keeps the bootstrap (issue 15, kind 6)
    assert stats.mean_interval([0, 1, 1, 0, 1]).method == "bootstrap-percentile"
    assert stats.mean_interval([0, 0.5, 1, 0, 1]).method == "bootstrap-percentile"
    declared = stats.mean_interval([0, 1, 1, 0, 1], binary=True)
    assert declared.method == "wilson" and (declared.low, declared.high) == pytest.approx(
        tuple(sps.binomtest(3, 5).proportion_ci(method="wilson")), abs=1e-12)
    # a declared 0/1 score with other values contradicts its declaration: no interval, a reason
    bad = stats.mean_interval([0, 0.5, 1], binary=True)
    assert bad.low is None and "declared 0/1" in bad.note


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


def test_mcnemar_exact_equals_scipy_binomtest_on_random_tables():
    # computed from the binomial CDF (scipy.special.bdtr) so a run needs no scipy.stats: the
    # same p as scipy.stats.binomtest(b, b + c, 0.5) (two-sided), within 1e-9 relative
    rng = np.random.default_rng(26)
    checked = 0
    for n in (1, 2, 3, 7, 40, 333, 4000):
        for _ in range(20):
            x, y = rng.integers(0, 2, n), rng.integers(0, 2, n)
            res = stats.mcnemar_exact(x, y)
            b, c = res.extra["b"], res.extra["c"]
            if b + c:
                assert res.p_value == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-9), (b, c)
                checked += 1
    assert checked > 100


def test_mcnemar_without_discordant_pairs_and_on_non_binary_input():
    assert stats.mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(stats.StatsError, match="0/1"):
        stats.mcnemar_exact([0.5, 1], [1, 1])
    assert stats.paired_test([0, 1, 1], [1, 1, 1], binary=True).test == "mcnemar-exact"
    assert stats.paired_test([0, 1, 1], [1, 1, 1]).test == "paired-permutation"  # not declared 0/1: values do not decide
    assert stats.paired_test([0, 0.5, 1], [1, 1, 1]).test == "paired-permutation"
    contradicted = stats.paired_test([0, 0.5, 1], [1, 1, 1], binary=True)
    assert contradicted.p_value is None and "declared 0/1" in contradicted.note


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
    assert stats.paired_effect_size(x, y, binary=True).name == "cohens_g"
    assert stats.paired_effect_size(x, y, binary=True).value == pytest.approx(0.4)
    assert stats.paired_effect_size(x, y).name == "cohens_dz"


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


# --------------------------------------------------------------------------- zero variance at the data's scale
@pytest.mark.parametrize(
    "x,y",
    [
        ([0.2, 0.3, 0.4, 0.5], [0.3, 0.4, 0.5, 0.6]),  # the case: d = 0.1 everywhere, sd 2.8e-17 from float subtraction
        ([0.1, 0.7, 0.35, 0.9, 0.05], [0.8, 1.4, 1.05, 1.6, 0.75]),  # constant shift 0.7
        ([1e6 + 0.1, 1e6 + 0.2, 1e6 + 0.3], [1e6 + 0.4, 1e6 + 0.5, 1e6 + 0.6]),  # large magnitude, residue ~1e-10
        ([1e-9, 2e-9, 3e-9], [1.1e-9, 2.1e-9, 3.1e-9]),  # tiny magnitude: the tolerance scales down with the data
    ],
)
def test_cohens_dz_is_undefined_with_a_reason_for_a_constant_shift(x, y):
    d = np.subtract(y, x)
    assert np.std(d, ddof=1) < 1e-6 * np.abs(d).max()  # float residue only, not a real spread
    assert stats.cohens_dz(x, y) is None
    effect = stats.effect_dz(x, y)
    assert effect.value is None and "no variance" in effect.note


def test_cohens_dz_keeps_small_but_real_spreads():
    # a spread of 1e-9 on values of 1e-3 is data, not residue (relative 1e-6 >> RTOL)
    x = np.array([1e-3, 2e-3, 3e-3, 4e-3])
    y = x + np.array([1e-6, 1e-6 + 1e-9, 1e-6 - 1e-9, 1e-6])
    d = y - x
    assert stats.cohens_dz(x, y) == pytest.approx(d.mean() / d.std(ddof=1))
    tiny = np.array([1e-9, 2e-9, 3e-9, 4e-9])
    assert stats.cohens_dz(tiny, tiny + np.array([1e-12, 3e-12, 2e-12, 5e-12])) is not None


def test_zero_variance_checks_use_the_data_scale_everywhere():
    residue = [0.1 + 0.2, 0.3, 0.3, 0.6 / 2]  # equal up to 5.6e-17
    assert np.ptp(residue) > 0
    corr = stats.correlation(residue, [1.0, 2.0, 3.0, 4.0], "pearson")
    assert corr.r is None and "constant" in corr.note
    ci = stats.bootstrap_ci(residue)
    assert ci.low == ci.high and ci.note == "constant values"
    x = np.array([0.1, 0.2, 0.7, 0.4])
    y = x + 0.3 - 0.3  # float residue differences on some pairs
    res = stats.paired_permutation_test(x, y)
    assert res.p_value == 1.0 and res.note == "all differences are zero"
    assert stats.is_constant([5.0, 5.0 + 1e-14]) and not stats.is_constant([5.0, 5.0 + 1e-6])


# --------------------------------------------------------------------------- vectorised vs scipy (issue 14)
def _scipy_permutation(x, y, n_resamples, seed, alternative="two-sided"):
    """The implementation facetlake used before: scipy's permutation_test, paired samples."""
    return sps.permutation_test(
        (np.asarray(x, float), np.asarray(y, float)), lambda u, v, axis=-1: np.mean(v - u, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=n_resamples, alternative=alternative, rng=np.random.default_rng(seed),
    ).pvalue


@pytest.mark.parametrize("n", [5, 9, 13])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_permutation_equals_scipy_exactly_where_scipy_is_exact(n, alternative):
    rng = np.random.default_rng(n)
    x = rng.normal(0.5, 0.2, n)
    y = x + rng.normal(0.05, 0.1, n)
    y[0] = x[0]  # a zero difference: set aside, the exact p is unchanged
    res = stats.paired_permutation_test(x, y, n_resamples=9999, alternative=alternative)
    assert res.exact and res.extra["n_nonzero"] == n - 1
    assert res.p_value == pytest.approx(_scipy_permutation(x, y, 9999, 0, alternative), abs=1e-12)


def test_permutation_exact_on_ties_matches_brute_force_enumeration():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    y = [2.0, 3.0, 2.0, 5.0, 6.0, 5.0, 8.0, 8.0]  # differences +-1 and 0: many tied null values
    res = stats.paired_permutation_test(x, y)
    assert res.exact and res.p_value == pytest.approx(_enumerated_sign_flip_p(x, y), abs=1e-12)


@pytest.mark.parametrize("n,shift", [(20, 0.03), (40, 0.0), (200, 0.02), (2000, 0.004)])
def test_permutation_agrees_with_scipy_within_monte_carlo_error(n, shift):
    # n = 20 is exact here (enumerated) and Monte Carlo in scipy; larger n are Monte Carlo in both.
    # Tolerance: 4 standard errors of the difference of two independent estimates with B = 9999.
    rng = np.random.default_rng(100 + n)
    x = rng.normal(0.5, 0.2, n)
    y = x + rng.normal(shift, 0.1, n)
    for alternative in ("two-sided", "greater"):
        ours = stats.paired_permutation_test(x, y, n_resamples=9999, seed=1, alternative=alternative).p_value
        ref = _scipy_permutation(x, y, 9999, 2, alternative)
        p = max(ref, 1e-4)
        assert abs(ours - ref) <= 4 * math.sqrt(2 * p * (1 - p) / 9999) + 2e-4, (n, alternative, ours, ref)


def test_permutation_is_reproducible_at_a_fixed_seed_and_monte_carlo_for_large_n():
    rng = np.random.default_rng(3)
    x = rng.normal(size=500)
    y = x + rng.normal(0.05, 1, 500)
    a = stats.paired_permutation_test(x, y, n_resamples=2000, seed=9)
    assert not a.exact and a.extra["n_resamples"] == 2000
    assert a.p_value == stats.paired_permutation_test(x, y, n_resamples=2000, seed=9).p_value
    # the null distribution of the flipped sum: mean sum(d)/2, variance sum(d^2)/4 (fair independent flips)
    d = y - x
    null = stats.sign_flip_null(d, 20000, seed=4)
    assert null.mean() == pytest.approx(d.sum() / 2, abs=4 * math.sqrt((d**2).sum() / 4 / 20000))
    assert null.var() == pytest.approx((d**2).sum() / 4, rel=0.05)


def test_blocked_lookups_give_the_per_group_sums_bit_for_bit(monkeypatch):
    """Past 65,536 values the sign-flip null adds the looked-up group sums in blocks: the
    same floats, in the same order, as adding group after group (so p-values and wild
    bootstrap intervals do not move at any seed)."""
    from metric_ops.stats import core as stats_core

    rng = np.random.default_rng(11)
    for groups, rows in ((1, 7), (3, 2000), (8192, 9), (9001, 31), (20000, 13)):
        table = rng.normal(size=(groups, 256)) * 10.0 ** rng.integers(-3, 4, size=(groups, 1))
        raw = rng.integers(0, 256, size=(groups, rows), dtype=np.uint8)
        assert np.array_equal(stats_core._flipped_sums_blocked(table, raw), stats_core._flipped_sums(table, raw))
    d = rng.normal(0.01, 1.0, 70_001)
    blocked = stats.sign_flip_null(d, 999, seed=5)
    monkeypatch.setattr(stats_core, "_BLOCKED_FROM_GROUPS", 10**9)
    assert np.array_equal(blocked, stats.sign_flip_null(d, 999, seed=5))


def test_bootstrap_matches_scipy_exactly_below_the_wild_threshold():
    rng = np.random.default_rng(8)
    x = rng.exponential(1.0, 3000)
    assert stats.bootstrap_resampling(x.size, 500) == "resample"
    ours = stats.bootstrap_ci(x, n_resamples=500, seed=4)
    ref = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=500, rng=np.random.default_rng(4)).confidence_interval
    assert ours.method == "bootstrap-percentile"
    assert (ours.low, ours.high) == pytest.approx((ref.low, ref.high), rel=1e-12)
    with pytest.raises(stats.StatsError, match="mean only"):
        stats.bootstrap_ci(x, np.median, resampling="wild")


def test_wild_bootstrap_above_the_threshold_agrees_with_the_resampling_bootstrap():
    # skewed data past WILD_BOOTSTRAP_ABOVE draws; both intervals' bounds carry Monte Carlo
    # error ~0.06 sd/sqrt(n) at B = 4000: allow 0.25 sd/sqrt(n)
    rng = np.random.default_rng(12)
    n = stats.WILD_BOOTSTRAP_ABOVE // 4000 + 5000
    x = rng.exponential(0.3, n)
    wild = stats.bootstrap_ci(x, n_resamples=4000, seed=1)
    assert wild.method == "bootstrap-percentile (wild, Rademacher)"
    resampled = np.quantile(stats.bootstrap_distribution(x, n_resamples=4000, seed=2), [0.025, 0.975])
    se = x.std() / math.sqrt(n)
    assert wild.low == pytest.approx(resampled[0], abs=0.25 * se) and wild.high == pytest.approx(resampled[1], abs=0.25 * se)
    assert wild.low == pytest.approx(x.mean() - 1.959964 * se, abs=0.25 * se)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (3, 7), (50, 100), (999, 1000), (0, 5000), (1234, 5000)])
def test_wilson_equals_scipy(k, n):
    ours = stats.wilson_interval(k, n)
    ref = sps.binomtest(k, n).proportion_ci(method="wilson")
    assert (ours.low, ours.high) == pytest.approx((ref.low, ref.high), abs=1e-12)
    for level in (0.9, 0.99):
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
        got = stats.wilson_interval(k, n, level)
        assert (got.low, got.high) == pytest.approx((ref.low, ref.high), abs=1e-12)
    low, high = stats.wilson_bounds(np.array([k, 0]), np.array([n, n]))
    assert (low[0], high[0]) == pytest.approx((ours.low, ours.high), abs=1e-15)


# --------------------------------------------------------------------------- correlations without scipy.stats (issue 14)
def _correlation_cases():
    rng = np.random.default_rng(7)
    for trial in range(240):
        n = int(rng.choice([3, 4, 5, 8, 12, 20, 33, 34, 50, 200, 1181]))
        kind = trial % 4
        if kind == 0:  # continuous, no ties (Kendall: exact p for n <= 33)
            x, y = rng.random(n), rng.random(n)
        elif kind == 1:  # Likert-like ratings: heavy ties
            x = rng.integers(1, 6, n).astype(float)
            y = x + rng.integers(0, 3, n)
        elif kind == 2:  # strongly correlated (tiny p, nearly perfect order)
            x = rng.random(n)
            y = x * 0.9 + rng.normal(0, 0.05, n)
        else:  # rounded values: ties on both sides
            x = np.round(rng.random(n), 1)
            y = np.round(rng.random(n) + x, 1)
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            yield x, y


def test_correlations_equal_scipy_on_random_and_tied_data():
    """metric_ops.stats.corr against scipy.stats itself: r within 1e-12 absolute, p within
    1e-9 relative (or 1e-300 absolute), for every method, on 240 inputs of 3 to 1,181
    pairs with and without ties."""
    import scipy.stats as sps

    reference = {"pearson": sps.pearsonr, "spearman": sps.spearmanr, "kendall": sps.kendalltau}
    checked = 0
    for x, y in _correlation_cases():
        for method, fn in reference.items():
            mine, expected = stats.correlation(x, y, method), fn(x, y)
            assert mine.r == pytest.approx(float(expected.statistic), abs=1e-12), (method, x.size)
            assert mine.p_value == pytest.approx(float(expected.pvalue), rel=1e-9, abs=1e-300), (method, x.size)
            checked += 1
    assert checked > 600


def test_ranks_equal_scipys_average_ranks():
    import scipy.stats as sps

    from metric_ops.stats.corr import rank_average

    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100):
        values = rng.integers(0, 4, n).astype(float)
        assert np.array_equal(rank_average(values), sps.rankdata(values))


def test_correlations_do_not_import_scipy_stats():
    import subprocess
    import sys

    code = ("import sys\nfrom metric_ops.stats import correlation\n"
            "for m in ('pearson', 'spearman', 'kendall'):\n    correlation([1, 2, 3, 4, 6], [2, 1, 4, 3, 5], m)\n"
            "print('scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=__import__("pathlib").Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]
