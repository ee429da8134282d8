"""Clustered and powered statistics: items grouped in clusters (several questions per
passage, several summaries per source document, several turns per dialogue).

With within-cluster correlation, treating items as independent makes standard errors too
small and "significant" verdicts wrong far more often than alpha says (Miller, 2024,
"Adding Error Bars to Evals", arXiv:2411.00640). What this module computes:

- :func:`cluster_robust_se`: the CR1 cluster-robust (sandwich) standard error of a mean,
  equal to statsmodels ``OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": g})``
  (Liang & Zeger, 1986; the ``G/(G-1) * (N-1)/(N-K)`` small-sample factor, K = 1).
- :func:`icc_anova`: the one-way ANOVA intraclass correlation ICC(1) for unbalanced
  clusters (Donner, 1986: ``(MSB - MSW) / (MSB + (n0 - 1) MSW)``, ``n0 = (N - sum n_g^2 / N)
  / (G - 1)``), clipped below at 0.
- :func:`design_effect`: Kish's design effect ``1 + (m - 1) * ICC`` with ``m`` the mean
  cluster size (Kish, 1965).
- :func:`clustered_paired_test`: the paired sign-flip permutation test with the clusters as
  the exchangeable units: the signs of whole clusters' summed differences are flipped
  (cluster randomisation inference, e.g. Canay, Romano & Shaikh, 2017), so the test keeps
  its level under any within-cluster correlation; ties counted (``|d*| >= |d|``).
- :func:`cluster_bootstrap_ci`: percentile bootstrap of a mean that resamples whole
  clusters, not items (Field & Welsh, 2007); the mean of a resample is its summed values
  over its summed sizes.
- :func:`min_detectable_effect` / :func:`mde_two_proportions`: the minimum detectable
  effect at a power, ``(z_{1-alpha/2} + z_power) * SE`` (Bloom, 1995), paired (standard
  deviation of the differences, times the square root of the design effect) or two
  independent proportions.
- :func:`clopper_pearson_interval`: the exact binomial interval (Clopper & Pearson, 1934),
  equal to ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.
- :func:`tie_groups`: groups of models statistically indistinguishable from the best of
  the remaining models by the adjusted paired tests.

Inputs are 1-D sequences of finite floats and a same-length sequence of cluster labels
(any hashable values: strings, ints). Undefined results are None with the reason in
``note``, never a zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

import numpy as np
from scipy.special import ndtri

from metric_ops.stats.core import (
    CONFIDENCE,
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    Interval,
    StatsError,
    TestResult,
    WILD_BOOTSTRAP_ABOVE,
    _array,
    bootstrap_distribution,
    _check_confidence,
    _paired,
    sign_flip_null,
)
from metric_ops.stats.significance import paired_permutation_test

ALPHA = 0.05
POWER = 0.8


def cluster_codes(clusters: Sequence[Hashable], n: int) -> tuple[np.ndarray, int]:
    """Integer codes ``0..G-1`` for ``clusters`` (order of first appearance) and ``G``.

    Raises :class:`StatsError` when the length differs from ``n`` or a label is None/NaN
    (an item with no cluster: give it its own label, e.g. its sample id)."""
    labels = list(clusters)
    if len(labels) != n:
        raise StatsError(f"{len(labels)} cluster labels for {n} values; give one label per value")
    index: dict[Any, int] = {}
    codes = np.empty(n, dtype=np.int64)
    for i, label in enumerate(labels):
        if label is None or (isinstance(label, float) and math.isnan(label)):
            raise StatsError(f"value {i} has no cluster label; give every item a cluster (its own id if it is alone)")
        codes[i] = index.setdefault(label, len(index))
    return codes, len(index)


@dataclass(frozen=True)
class ClusterSummary:
    """A mean with its naive and cluster-robust standard errors.

    ``n`` items in ``n_clusters`` clusters of mean size ``mean_cluster_size``; ``se_naive``
    = sd / sqrt(n) (ddof 1); ``se_cluster`` = CR1; ``icc`` = ICC(1); ``design_effect`` =
    Kish's closed form from ``icc``; ``variance_ratio`` = (se_cluster / se_naive)^2, the
    design effect the data show. None where undefined (``note``)."""

    n: int
    n_clusters: int
    mean: float | None
    se_naive: float | None
    se_cluster: float | None
    icc: float | None
    design_effect: float | None
    mean_cluster_size: float | None
    variance_ratio: float | None
    note: str | None = None


def _sums(values: np.ndarray, codes: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    return np.bincount(codes, weights=values, minlength=g), np.bincount(codes, minlength=g).astype(float)


def cluster_robust_se(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """CR1 cluster-robust standard error of the mean of ``values`` (None with fewer than
    two clusters). Equal to statsmodels OLS on a constant with ``cov_type="cluster"``:
    ``sqrt(G/(G-1) * sum_g (sum_{i in g} (y_i - mean))^2) / N``."""
    y = _array(values)
    codes, g = cluster_codes(clusters, y.size)
    if g < 2:
        return None
    resid_sums, _ = _sums(y - y.mean(), codes, g)
    return float(math.sqrt(g / (g - 1) * float(np.sum(resid_sums**2))) / y.size)


def icc_anova(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """ICC(1) by one-way ANOVA for unbalanced clusters, in [0, 1] (a negative estimate is
    clipped to 0). None with fewer than two clusters, no within-cluster replication, or no
    variance at all."""
    y = _array(values)
    codes, g = cluster_codes(clusters, y.size)
    n = y.size
    if g < 2 or n <= g:
        return None
    sums, sizes = _sums(y, codes, g)
    means = sums / sizes
    grand = y.mean()
    ssb = float(np.sum(sizes * (means - grand) ** 2))
    ssw = float(np.sum((y - means[codes]) ** 2))
    msb, msw = ssb / (g - 1), ssw / (n - g)
    n0 = (n - float(np.sum(sizes**2)) / n) / (g - 1)
    denom = msb + (n0 - 1.0) * msw
    if denom <= 0:
        return None
    return float(min(1.0, max(0.0, (msb - msw) / denom)))


def design_effect(icc: float, mean_cluster_size: float) -> float:
    """Kish's design effect ``1 + (m - 1) * icc`` (``icc`` in [0, 1], ``m >= 1``)."""
    if not 0.0 <= icc <= 1.0 or mean_cluster_size < 1.0:
        raise StatsError(f"need 0 <= icc <= 1 and mean cluster size >= 1, got {icc}, {mean_cluster_size}")
    return 1.0 + (mean_cluster_size - 1.0) * icc


def cluster_summary(values: Sequence[float], clusters: Sequence[Hashable]) -> ClusterSummary:
    """Mean, naive and CR1 standard errors, ICC, design effect and clusters of ``values``."""
    y = _array(values)
    codes, g = cluster_codes(clusters, y.size)
    if y.size < 2:
        return ClusterSummary(int(y.size), g, float(y.mean()) if y.size else None, None, None, None, None, None, None,
                              note=f"needs at least 2 values, got {y.size}")
    se_naive = float(y.std(ddof=1) / math.sqrt(y.size))
    se_cl = cluster_robust_se(y, clusters)
    icc = icc_anova(y, clusters)
    m = y.size / g
    deff = design_effect(icc, m) if icc is not None else None
    ratio = (se_cl / se_naive) ** 2 if se_cl is not None and se_naive > 0 else None
    note = None if g >= 2 else "one cluster: no cluster-robust error"
    return ClusterSummary(int(y.size), g, float(y.mean()), se_naive, se_cl, icc, deff, m, ratio, note)


def clustered_paired_test(
    x: Sequence[float], y: Sequence[float], clusters: Sequence[Hashable],
    n_resamples: int = DEFAULT_PERMUTATIONS, seed: int = 0, alternative: str = "two-sided",
) -> TestResult:
    """Paired permutation test of ``mean(y - x)`` with clusters as the exchangeable units.

    Each cluster's summed difference keeps or flips its sign as a whole (exact enumeration
    up to 30 non-zero clusters, else ``n_resamples`` random sign patterns; ties counted, +1
    correction). ``statistic`` is the item-level mean difference ``y - x``; ``extra`` holds
    ``n_clusters``. Raises :class:`StatsError` on mismatched lengths or missing labels."""
    a, b = _paired(x, y)
    codes, g = cluster_codes(clusters, a.size)
    if g < 2:
        return TestResult("clustered-permutation", None, None, int(a.size), note=f"needs at least 2 clusters, got {g}",
                          extra={"n_clusters": g})
    sa, _ = _sums(a, codes, g)
    sb, _ = _sums(b, codes, g)
    res = paired_permutation_test(sa, sb, n_resamples=n_resamples, seed=seed, alternative=alternative)
    return TestResult("clustered-permutation", float((b - a).mean()), res.p_value, int(a.size), exact=res.exact,
                      note=res.note, extra={**(res.extra or {}), "n_clusters": g})


def cluster_bootstrap_ci(
    values: Sequence[float], clusters: Sequence[Hashable], confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
) -> Interval:
    """Percentile interval of the mean from resampling whole clusters with replacement
    (``Generator(seed).integers(0, G, (B, G))``, in batches); each resample's mean is its
    summed values over its summed cluster sizes.

    Past :data:`WILD_BOOTSTRAP_ABOVE` draws (clusters x resamples) it is the wild cluster
    bootstrap with Rademacher weights (Cameron, Gelbach & Miller, 2008): each resample's mean
    is ``mean + sum_g w_g (S_g - n_g * mean) / N``, drawn as random bits through
    :func:`sign_flip_null` (one bit per cluster instead of one index), the same way
    :func:`bootstrap_ci` switches for items (method ``cluster-wild-bootstrap-percentile``)."""
    _check_confidence(confidence)
    y = _array(values)
    codes, g = cluster_codes(clusters, y.size)
    if g < 2:
        return Interval(None, None, "cluster-bootstrap-percentile", confidence, note=f"needs at least 2 clusters, got {g}")
    sums, sizes = _sums(y, codes, g)
    tail = (1.0 - confidence) / 2.0
    if g * n_resamples > WILD_BOOTSTRAP_ABOVE:
        mean = float(y.mean())
        flipped = sign_flip_null(sums - sizes * mean, n_resamples, seed)  # sum of the residual sums flipped to -1
        means = mean - 2.0 * flipped / y.size  # sum_g w_g r_g = sum(r) - 2 * flipped, and sum(r) = 0
        low, high = np.quantile(means, [tail, 1.0 - tail])
        return Interval(float(low), float(high), "cluster-wild-bootstrap-percentile", confidence)
    def pooled_mean(picked: np.ndarray, axis: int = -1) -> np.ndarray:  # picked: resampled cluster numbers
        k = picked.astype(np.int64)
        return sums[k].sum(axis=axis) / sizes[k].sum(axis=axis)

    means = bootstrap_distribution(np.arange(g, dtype=float), pooled_mean, n_resamples, seed)
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(low), float(high), "cluster-bootstrap-percentile", confidence)


def _z_sum(alpha: float, power: float) -> float:
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise StatsError(f"need 0 < alpha < 1 and 0 < power < 1, got {alpha}, {power}")
    return float(ndtri(1.0 - alpha / 2.0) + ndtri(power))


def min_detectable_effect(
    sd: float, n: int, alpha: float = ALPHA, power: float = POWER, design_effect: float = 1.0
) -> float | None:
    """Minimum detectable mean difference (two-sided ``alpha``, ``power``) of a paired
    comparison: ``(z_{1-alpha/2} + z_power) * sd * sqrt(design_effect / n)``, in the units of
    ``sd`` (the standard deviation of the per-item differences). None for ``n < 2``."""
    if n < 2:
        return None
    if sd < 0 or design_effect < 1.0:
        raise StatsError(f"need sd >= 0 and design effect >= 1, got {sd}, {design_effect}")
    return _z_sum(alpha, power) * sd * math.sqrt(design_effect / n)


def mde_two_proportions(p: float, n_per_group: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable difference between two independent proportions near ``p`` with
    ``n_per_group`` items each: ``(z_{1-alpha/2} + z_power) * sqrt(2 p (1 - p) / n)``
    (p = 0.5, n = 164: 0.155)."""
    if not 0.0 <= p <= 1.0 or n_per_group < 1:
        raise StatsError(f"need 0 <= p <= 1 and n >= 1, got {p}, {n_per_group}")
    return _z_sum(alpha, power) * math.sqrt(2.0 * p * (1.0 - p) / n_per_group)


def clopper_pearson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Exact (Clopper-Pearson) interval of ``successes / n`` from beta quantiles; never
    zero width (0 of 25: [0, 0.1372] at 95%)."""
    _check_confidence(confidence)
    if n < 0 or not 0 <= successes <= n:
        raise StatsError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(None, None, "clopper-pearson", confidence, note="no trials")
    from scipy import stats as sps  # scipy.stats only when asked: a run never imports it (test_stats)

    tail = (1.0 - confidence) / 2.0
    low = 0.0 if successes == 0 else float(sps.beta.ppf(tail, successes, n - successes + 1))
    high = 1.0 if successes == n else float(sps.beta.ppf(1.0 - tail, successes + 1, n - successes))
    return Interval(low, high, "clopper-pearson", confidence)


def tie_groups(
    means: Mapping[str, float], p_adjusted: Mapping[frozenset[str], float | None],
    direction: str = "maximize", alpha: float = ALPHA,
) -> dict[str, int]:
    """Tie groups of models, 1 = the best: the best remaining model and every remaining
    model whose adjusted paired p-value against it is at least ``alpha`` (or untested) form
    the next group. ``p_adjusted`` maps ``frozenset({a, b})`` to the Holm-adjusted p of that
    pair. Returns ``{model: group}``."""
    sign = 1.0 if direction == "maximize" else -1.0
    remaining = sorted(means, key=lambda m: (-sign * means[m], m))
    groups: dict[str, int] = {}
    group = 0
    while remaining:
        group += 1
        leader = remaining[0]
        members = [leader] + [m for m in remaining[1:]
                              if (p := p_adjusted.get(frozenset((leader, m)))) is None or p >= alpha]
        for m in members:
            groups[m] = group
        remaining = [m for m in remaining if m not in groups]
    return groups
