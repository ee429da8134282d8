"""Statistics for comparing models and meta-evaluating metrics (pure: numpy + scipy).

Every resampling method here runs as numpy array operations over batches of resamples
(never one Python call per resample), so a test over 100k paired samples with 10,000
resamples costs well under a second (``benchmarks/bench_analysis.py`` measures it).

What each function computes and where it comes from:

- :func:`bootstrap_ci`: percentile bootstrap interval of a statistic (Efron & Tibshirani,
  1993, ch. 13). Same resampling stream and quantile rule as
  ``scipy.stats.bootstrap(method="percentile")`` at the same seed (indices drawn with
  ``Generator.integers(0, n, (B, n))``, linear-interpolated quantiles), in batches; for
  the mean when values x resamples exceed :data:`WILD_BOOTSTRAP_ABOVE`, the wild
  bootstrap with Rademacher weights (same mean and variance of the resampled means,
  one random bit per value).
- :func:`wilson_interval`: Wilson score interval of a binomial proportion (Wilson,
  1927), in closed form (equal to ``scipy.stats.binomtest(...).proportion_ci(
  method="wilson")``); :func:`wilson_bounds` does arrays of counts at once.
- :func:`mean_interval`: the 95% interval the comparisons table reports: Wilson for a
  score *declared* 0/1 (``Metric.binary``), percentile bootstrap of the mean otherwise.
  The choice comes from the declaration, never from the values a run produced.
- :func:`paired_permutation_test`: the paired (sign-flip) permutation test of the mean
  difference (Fisher, 1935; Good, 2005), p-values defined as
  ``scipy.stats.permutation_test(permutation_type="samples")`` defines them. Exact
  (every sign pattern enumerated, by meet in the middle) when at most
  :data:`EXACT_MAX_PAIRS` differences are non-zero or ``2**m <= n_resamples``; otherwise
  Monte Carlo over random sign patterns drawn as raw random bits and summed through a
  256-entry table per group of 8 differences.
- :func:`mcnemar_exact`: exact McNemar test for paired 0/1 outcomes (McNemar, 1947): a
  two-sided binomial test on the discordant pairs, via ``scipy.stats.binomtest``.
- :func:`holm`: Holm's step-down adjustment of p-values (Holm, 1979).
- :func:`effect_dz` / :func:`cohens_dz` / :func:`cohens_g`: paired effect sizes (Cohen,
  1988): mean difference over the standard deviation of the differences; discordant
  proportion minus one half (signed).
- :func:`correlation`: Pearson r, Spearman rho and Kendall tau-b with their p-values,
  via ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau``.
- Corpus-level metrics (corpus BLEU, chrF, idf BERTScore): :func:`corpus_bootstrap`,
  :func:`paired_bootstrap_corpus` and :func:`approximate_randomization` resample the
  per-segment sufficient statistics and recompute the corpus score of every resample,
  as sacrebleu's ``significance._bootstrap_resample`` / ``_paired_bs_test`` /
  ``_paired_ar_test`` do (Koehn, 2004; Riezler & Maxwell, 2005), with the same random
  streams at the same seed.

Conventions: inputs are 1-D sequences of finite floats (NaN/None are the caller's to
drop: every function raises :class:`StatsError` on a non-finite value rather than
silently skipping it). A statistic that is undefined for the data (fewer than two
values, a constant vector for a correlation, zero variance of differences) is ``None``
with the reason in ``note``, never a zero. "Zero" and "constant" are judged with a
tolerance relative to the data's scale (:data:`RTOL`): a spread below ``RTOL`` times the
largest magnitude involved is float residue (e.g. ``0.3 - (0.1 + 0.2)``), not signal.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from metric_ops.errors import FacetlakeError

CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_PERMUTATIONS = 9999
# relative tolerance below which a spread or a difference is float residue, not signal
RTOL = 1e-10
# sign-flip tests with at most this many non-zero differences are enumerated exactly
EXACT_MAX_PAIRS = 30
# past this many random draws (values x resamples) the mean's bootstrap interval uses the
# wild (Rademacher) bootstrap, one random bit per value instead of one index (bootstrap_ci)
WILD_BOOTSTRAP_ABOVE = 1 << 25
BOOTSTRAP_RESAMPLING = ("auto", "resample", "wild")
# resample batches are sized to hold about this many random draws at once
_BATCH_DRAWS = 1 << 22


class StatsError(FacetlakeError, ValueError):
    """Input a statistic cannot take (non-finite values, mismatched lengths, bad level)."""


@dataclass(frozen=True)
class Interval:
    """A confidence interval ``[low, high]`` at ``confidence`` computed by ``method``.

    ``low``/``high`` are None when the interval is undefined (``note`` says why).
    """

    low: float | None
    high: float | None
    method: str
    confidence: float = CONFIDENCE
    note: str | None = None


@dataclass(frozen=True)
class TestResult:
    """Outcome of a paired significance test.

    ``statistic``: the test statistic (mean difference ``y - x`` for the permutation test,
    the number of ``x=1, y=0`` pairs for McNemar, the corpus-score difference ``y - x``
    for the corpus tests); ``p_value`` in [0, 1] (None when the test is undefined, see
    ``note``); ``exact``: whether the null distribution was enumerated rather than
    sampled; ``extra``: test-specific counts.
    """

    test: str
    statistic: float | None
    p_value: float | None
    n: int
    exact: bool = False
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient in [-1, 1] with its two-sided p-value over ``n`` pairs."""

    method: str
    r: float | None
    p_value: float | None
    n: int
    note: str | None = None


@dataclass(frozen=True)
class Effect:
    """A paired effect size: ``value`` (None when undefined, ``note`` says why) and its ``name``."""

    value: float | None
    name: str
    note: str | None = None


def _array(values: Sequence[float], name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise StatsError(f"{name} has {bad} non-finite value(s) (NaN/inf/None); drop unscored rows before computing statistics")
    return arr


def _paired(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = _array(x, "x"), _array(y, "y")
    if a.shape != b.shape:
        raise StatsError(f"paired inputs differ in length ({a.size} vs {b.size}); pair them by sample id first")
    return a, b


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise StatsError(f"confidence must be in (0, 1), got {confidence}")


# --------------------------------------------------------------------------- tolerance
def data_scale(*arrays: np.ndarray) -> float:
    """The largest magnitude in ``arrays`` (0.0 when all are empty or zero): the scale a
    float residue of arithmetic on these values is relative to."""
    return max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)


def negligible(spread: float, scale: float, rtol: float = RTOL) -> bool:
    """Whether ``spread`` (a standard deviation, a range, a difference) is float residue
    at data of magnitude ``scale``: ``|spread| <= rtol * scale`` (exactly 0 when scale is 0)."""
    return abs(spread) <= rtol * scale


def is_constant(values: Sequence[float], rtol: float = RTOL) -> bool:
    """True when the values' range is negligible relative to their magnitude (see :func:`negligible`)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return True
    return negligible(float(np.ptp(arr)), data_scale(arr), rtol)


def clean_differences(x: np.ndarray, y: np.ndarray, rtol: float = RTOL) -> np.ndarray:
    """``y - x`` with differences that are float residue at the data's scale set to 0."""
    d = y - x
    tol = rtol * data_scale(x, y)
    d[np.abs(d) <= tol] = 0.0
    return d


def is_binary(values: Sequence[float]) -> bool:
    """True when every value is exactly 0 or 1 (and there is at least one).

    Used only to check data against a metric's declaration (``Metric.binary``); the
    choice of interval, test and effect size comes from the declaration itself."""
    arr = _array(values)
    return bool(arr.size) and bool(np.all((arr == 0.0) | (arr == 1.0)))


# --------------------------------------------------------------------------- bootstrap
def _batch_rows(n_resamples: int, width: int) -> int:
    return max(1, min(n_resamples, _BATCH_DRAWS // max(width, 1)))


def bootstrap_distribution(
    values: Sequence[float], statistic: Callable[..., Any] = np.mean, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """``statistic`` of ``n_resamples`` bootstrap resamples of ``values`` (shape ``(B,)``).

    Resample indices are ``Generator(PCG64(seed)).integers(0, n, (B, n))`` drawn in
    batches of rows (the stream is the same as one call, and as scipy's), and
    ``statistic(resamples, axis=-1)`` is evaluated per batch, so ``statistic`` must be
    vectorised (``np.mean``, ``np.median``, ...)."""
    arr = _array(values)
    n = arr.size
    if n == 0:
        raise StatsError("cannot bootstrap an empty sample")
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    step = _batch_rows(n_resamples, n)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        idx = rng.integers(0, n, (rows, n))
        out[start : start + rows] = statistic(arr[idx], axis=-1)
    return out


def bootstrap_resampling(n: int, n_resamples: int) -> str:
    """``wild`` when a resampling bootstrap of the mean would draw more than
    :data:`WILD_BOOTSTRAP_ABOVE` random indices (``n * n_resamples``), else ``resample``."""
    return "wild" if n * n_resamples > WILD_BOOTSTRAP_ABOVE else "resample"


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., Any] = np.mean,
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    resampling: str = "auto",
) -> Interval:
    """Percentile bootstrap interval of ``statistic`` over ``values``.

    Args:
        values: 1-D finite floats (any units; the interval is in the same units).
        statistic: a vectorised statistic taking ``(sample, axis=...)`` (default mean).
        confidence: two-sided level in (0, 1).
        n_resamples: bootstrap resamples (the percentiles' Monte-Carlo error shrinks
            as 1/sqrt(n_resamples)).
        seed: seed of the resampling generator (the interval is reproducible).
        resampling: ``resample`` (Efron's bootstrap), ``wild`` (the mean only) or ``auto``
            (:func:`bootstrap_resampling`: wild past :data:`WILD_BOOTSTRAP_ABOVE` draws).
            A caller comparing several models picks one for all of them.

    Returns an :class:`Interval`: the ``(1 - confidence)/2`` and ``(1 + confidence)/2``
    quantiles (linear interpolation) of the bootstrap distribution; undefined (None
    bounds) for fewer than two values. A constant vector (up to float residue) gives
    ``[c, c]``.

    ``resample`` is Efron's resampling bootstrap, ``method="bootstrap-percentile"``, equal
    to ``scipy.stats.bootstrap(method="percentile")`` at the same seed. ``wild``: the
    mean's interval comes from the wild bootstrap with Rademacher weights (Wu, 1986;
    Liu, 1988): ``mean + sum(s_i (x_i - mean)) / n`` with fair random signs ``s_i``,
    whose resampled means have exactly the resampling bootstrap's mean and variance
    (``sd^2 / n``, ddof 0) and need one random bit per value instead of one random
    index, so 10,000 resamples of 100k values cost a fraction of a second
    (``method="bootstrap-percentile (wild, Rademacher)"``). It differs from the
    resampling bootstrap only through the third moment, an O(1/n) shift of the bounds
    that is far below the Monte Carlo error at these sizes (tests/test_stats.py checks
    the two against each other).
    Source: Efron & Tibshirani (1993); Wu (1986), Liu (1988), Mammen (1993).
    """
    _check_confidence(confidence)
    arr = _array(values)
    method = "bootstrap-percentile"
    if arr.size < 2:
        return Interval(None, None, method, confidence, note=f"needs at least 2 values, got {arr.size}")
    if is_constant(arr):
        c = float(statistic(arr))
        return Interval(c, c, method, confidence, note="constant values")
    if resampling not in BOOTSTRAP_RESAMPLING:
        raise StatsError(f"resampling must be one of {', '.join(BOOTSTRAP_RESAMPLING)}, got {resampling!r}")
    if resampling == "auto":
        resampling = bootstrap_resampling(arr.size, n_resamples)
    if resampling == "wild":
        if statistic is not np.mean:
            raise StatsError("the wild bootstrap here is for the mean only; use resampling='resample' for other statistics")
        method = "bootstrap-percentile (wild, Rademacher)"
        centre = float(arr.mean())
        centred = arr - centre
        # sum(s_i c_i) = 2 * sum(c_i over flipped i) - sum(c_i), and sum(c_i) = 0
        dist = centre + 2.0 * sign_flip_null(centred, n_resamples, seed) / arr.size
    else:
        dist = bootstrap_distribution(arr, statistic, n_resamples, seed)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), method, confidence)


# --------------------------------------------------------------------------- Wilson
def _z(confidence: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2.0))


def wilson_bounds(successes: np.ndarray, n: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score bounds for arrays of counts (element-wise; ``n > 0`` required).

    ``centre = (p + z^2/2n) / (1 + z^2/n)``, ``half = z/(1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2)``
    with ``z`` the two-sided normal quantile; bounds clipped to [0, 1] (exactly 0 for no
    successes, 1 for all). Source: Wilson (1927); Newcombe (1998) method 3."""
    _check_confidence(confidence)
    k = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    z = _z(confidence)
    p = k / m
    denom = 1.0 + z * z / m
    centre = (p + z * z / (2.0 * m)) / denom
    half = z / denom * np.sqrt(p * (1.0 - p) / m + z * z / (4.0 * m * m))
    low = np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(k == m, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a binomial proportion ``successes / n``.

    Args: ``successes`` in [0, n]; ``n`` trials (0 gives an undefined interval);
    ``confidence`` in (0, 1). Bounds lie in [0, 1]. Source: Wilson (1927); same values
    as ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``.
    """
    _check_confidence(confidence)
    if n < 0 or successes < 0 or successes > n:
        raise StatsError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(None, None, "wilson", confidence, note="no trials")
    low, high = wilson_bounds(np.array([successes]), np.array([n]), confidence)
    return Interval(float(low[0]), float(high[0]), "wilson", confidence)


def mean_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    *,
    binary: bool = False,
    resampling: str = "auto",
) -> Interval:
    """Interval of the mean: Wilson when the score is declared 0/1 (``binary``, from
    ``Metric.binary``), percentile bootstrap otherwise.

    The method depends only on the declaration, so every model's interval for one score
    is computed the same way. A declared-0/1 score with other values has no interval
    (the note names the offending values): the data contradict the declaration.
    ``resampling``: see :func:`bootstrap_ci`.
    """
    arr = _array(values)
    if binary:
        bad = arr[(arr != 0.0) & (arr != 1.0)]
        if bad.size:
            return Interval(None, None, "wilson", confidence,
                            note=f"score is declared 0/1 but {bad.size} value(s) are not (e.g. {bad[0]:g}); fix the metric")
        return wilson_interval(int(arr.sum()), int(arr.size), confidence)
    return bootstrap_ci(arr, np.mean, confidence, n_resamples, seed, resampling)


# --------------------------------------------------------------------------- sign-flip permutation
_BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float64)  # (256, 8)


def _subset_sums(values: np.ndarray) -> np.ndarray:
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums, sums + v])
    return sums


def _flip_counts_exact(d: np.ndarray, tol: float) -> tuple[int, int, int]:
    """(#patterns with flipped sum >= -tol, #patterns with flipped sum <= tol, #patterns)
    over all 2^m sign patterns of ``d``, by meet in the middle."""
    h = d.size // 2
    left, right = _subset_sums(d[:h]), np.sort(_subset_sums(d[h:]))
    n_right = right.size
    ge = n_right - np.searchsorted(right, -tol - left, side="left")  # left + right >= -tol
    le = np.searchsorted(right, tol - left, side="right")  # left + right <= tol
    return int(ge.sum()), int(le.sum()), int(left.size * n_right)


def sign_flip_null(d: Sequence[float], n_resamples: int, seed: int = 0) -> np.ndarray:
    """Monte Carlo null distribution of the *flipped sum* ``sum(d[i] for flipped i)``
    under independent fair sign flips: shape ``(n_resamples,)``.

    Random sign patterns are raw random bits (``Generator.bit_generator.random_raw``),
    one byte per group of 8 differences; each group's 256 possible flipped sums are
    tabulated once, so a resample costs one table lookup per 8 differences. The
    resampled statistic is ``sum(d) - 2 * flipped_sum``."""
    arr = np.asarray(d, dtype=float)
    m = arr.size
    groups = max(1, (m + 7) // 8)
    padded = np.zeros(groups * 8)
    padded[:m] = arr
    table = padded.reshape(groups, 8) @ _BITS.T  # (groups, 256)
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    # one random byte per group and resample; batches of about 32 MB of bytes keep the
    # Python loop over groups short (it runs once per group and batch, not per resample)
    step = max(1, min(n_resamples, (1 << 25) // groups))
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        raw = rng.bit_generator.random_raw((groups * rows + 7) // 8).view(np.uint8)[: groups * rows].reshape(groups, rows)
        acc = np.zeros(rows)
        looked_up = np.empty(rows)
        for g in range(groups):
            np.take(table[g], raw[g], out=looked_up, mode="clip")  # bytes index 0..255: no bounds check needed
            acc += looked_up
        out[start : start + rows] = acc
    return out


def paired_permutation_test(
    x: Sequence[float],
    y: Sequence[float],
    n_resamples: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    alternative: str = "two-sided",
) -> TestResult:
    """Paired sign-flip permutation test of the mean difference ``mean(y - x)``.

    Under the null the two values of each pair are exchangeable, so each difference's
    sign is flipped at random. Differences that are zero (up to float residue at the
    data's scale) cannot change the statistic and are set aside; with ``m`` non-zero
    differences the test is exact (all ``2**m`` patterns enumerated) when
    ``m <= EXACT_MAX_PAIRS`` or ``2**m <= n_resamples``, else ``n_resamples`` random
    patterns are drawn and the p-value counts the observed statistic (never 0).
    p-values follow ``scipy.stats.permutation_test``: ``less`` = P(null <= observed),
    ``greater`` = P(null >= observed), two-sided = ``min(1, 2 * min(less, greater))``,
    with ties judged at a tolerance relative to the data's scale.

    Args:
        x, y: paired 1-D finite floats of equal length (x = baseline, y = candidate).
        n_resamples: random sign patterns when the test is not exact.
        seed: generator seed (reproducible p-values).
        alternative: ``two-sided``, ``greater`` (y > x) or ``less``.

    Returns a :class:`TestResult` whose statistic is ``mean(y - x)``; p is None for
    fewer than 2 pairs. If every difference is 0 the p-value is 1.
    Source: Fisher (1935), Good (2005); checked against ``scipy.stats.permutation_test``.
    """
    a, b = _paired(x, y)
    n = int(a.size)
    if alternative not in ("two-sided", "greater", "less"):
        raise StatsError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    if n < 2:
        return TestResult("paired-permutation", None, None, n, note=f"needs at least 2 pairs, got {n}")
    diff = clean_differences(a, b)
    observed = float(diff.mean())
    nonzero = diff[diff != 0.0]
    if nonzero.size == 0:
        return TestResult("paired-permutation", 0.0, 1.0, n, exact=True, note="all differences are zero")
    m = int(nonzero.size)
    tol = 1e-9 * float(np.abs(nonzero).sum())
    exact = m <= EXACT_MAX_PAIRS or (m <= 40 and 2**m <= n_resamples)  # halves of at most 2^20 subset sums
    if exact:
        # null statistic = total - 2 * flipped; <= observed (= total) iff flipped >= 0
        n_ge, n_le, total = _flip_counts_exact(nonzero, tol / 2)
        p_less, p_greater = n_ge / total, n_le / total
    else:
        flipped = sign_flip_null(nonzero, n_resamples, seed)
        p_less = (int(np.count_nonzero(flipped >= -tol / 2)) + 1) / (n_resamples + 1)
        p_greater = (int(np.count_nonzero(flipped <= tol / 2)) + 1) / (n_resamples + 1)
    p = {"less": p_less, "greater": p_greater, "two-sided": 2.0 * min(p_less, p_greater)}[alternative]
    return TestResult("paired-permutation", observed, float(min(1.0, p)), n, exact=exact,
                      extra={"n_resamples": None if exact else n_resamples, "n_nonzero": m})


def mcnemar_exact(x: Sequence[float], y: Sequence[float]) -> TestResult:
    """Exact (binomial) McNemar test for paired 0/1 outcomes.

    ``b`` = pairs with x=1, y=0; ``c`` = pairs with x=0, y=1. Under the null the
    discordant pairs split 50/50, so p = two-sided ``binomtest(b, b + c, 0.5)``; with no
    discordant pairs p = 1. Raises :class:`StatsError` for values other than 0/1.
    Source: McNemar (1947); the exact form as in statsmodels' ``mcnemar(exact=True)``.
    """
    from scipy import stats

    a, b_ = _paired(x, y)
    if a.size and not (is_binary(a) and is_binary(b_)):
        raise StatsError("McNemar's test needs 0/1 values; use paired_permutation_test for continuous scores")
    b = int(np.sum((a == 1) & (b_ == 0)))
    c = int(np.sum((a == 0) & (b_ == 1)))
    n = int(a.size)
    if b + c == 0:
        return TestResult("mcnemar-exact", float(b), 1.0, n, exact=True, note="no discordant pairs", extra={"b": b, "c": c})
    p = stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    return TestResult("mcnemar-exact", float(b), float(min(1.0, p)), n, exact=True, extra={"b": b, "c": c})


def paired_test(x: Sequence[float], y: Sequence[float], binary: bool = False, **kwargs: Any) -> TestResult:
    """Exact McNemar for a score declared 0/1 (``binary``), else the paired permutation test.

    A declared-0/1 score whose values are not all 0/1 is not tested (p None, the note
    says why): the data contradict the declaration."""
    if binary:
        a, b = _paired(x, y)
        if a.size and not (is_binary(a) and is_binary(b)):
            return TestResult("mcnemar-exact", None, None, int(a.size),
                              note="score is declared 0/1 but has other values; fix the metric")
        return mcnemar_exact(a, b)
    return paired_permutation_test(x, y, **kwargs)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values, in the input order (None stays None).

    Sort the m defined p-values ascending; the i-th (1-based) becomes
    ``max_{j<=i} min(1, (m - j + 1) * p_(j))``. Rejecting where the adjusted value is
    below alpha controls the family-wise error rate at alpha. Source: Holm (1979);
    same values as statsmodels' ``multipletests(method="holm")``.
    """
    idx = [i for i, p in enumerate(p_values) if p is not None]
    for i in idx:
        p = p_values[i]
        if not (0.0 <= float(p) <= 1.0):  # type: ignore[arg-type]
            raise StatsError(f"p-value {p} at position {i} is outside [0, 1]")
    m = len(idx)
    order = sorted(idx, key=lambda i: float(p_values[i]))  # type: ignore[arg-type]
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        value = min(1.0, (m - rank) * float(p_values[i]))  # type: ignore[arg-type]
        running = max(running, value)
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------- effect sizes
def effect_dz(x: Sequence[float], y: Sequence[float]) -> Effect:
    """Cohen's d_z for paired data: ``mean(y - x) / sd(y - x)`` (sd with ddof=1), unitless.

    Undefined (value None, ``note`` says why) for fewer than 2 pairs, or when the
    differences' standard deviation is float residue at the data's scale (``sd <=
    RTOL * max(|x|, |y|)``): e.g. x = [.2, .3, .4, .5], y = [.3, .4, .5, .6] differ by
    exactly 0.1 on every pair, and the 2.8e-17 spread that float subtraction leaves
    would otherwise give d_z of 3.6e15. Source: Cohen (1988), Lakens (2013) eq. 6.
    """
    a, b = _paired(x, y)
    if a.size < 2:
        return Effect(None, "cohens_dz", f"needs at least 2 pairs, got {a.size}")
    d = b - a
    sd = float(np.std(d, ddof=1))
    scale = data_scale(a, b)
    if not math.isfinite(sd) or negligible(sd, scale):
        return Effect(None, "cohens_dz",
                      f"the differences have no variance (sd {sd:.2g} at data scale {scale:.2g}): every pair differs by the same "
                      f"amount ({float(d.mean()):.6g}), so d_z is undefined")
    return Effect(float(d.mean() / sd), "cohens_dz")


def cohens_dz(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Cohen's d_z (see :func:`effect_dz`, which also gives the reason when it is None)."""
    return effect_dz(x, y).value


def cohens_g(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Signed Cohen's g for paired 0/1 data: ``c / (b + c) - 0.5`` in [-0.5, 0.5].

    ``c`` = pairs where y=1 and x=0 (y better), ``b`` = the reverse; None with no
    discordant pairs. Source: Cohen (1988) §5 (g = P - 0.5 for McNemar's test).
    """
    a, b_ = _paired(x, y)
    b = int(np.sum((a == 1) & (b_ == 0)))
    c = int(np.sum((a == 0) & (b_ == 1)))
    if b + c == 0:
        return None
    return c / (b + c) - 0.5


def paired_effect_size(x: Sequence[float], y: Sequence[float], binary: bool = False) -> Effect:
    """Cohen's g for a score declared 0/1 (``binary``), Cohen's d_z otherwise."""
    if binary:
        g = cohens_g(x, y)
        return Effect(g, "cohens_g", None if g is not None else "no discordant pairs")
    return effect_dz(x, y)


# --------------------------------------------------------------------------- correlations
CORRELATION_METHODS = ("pearson", "spearman", "kendall")


def correlation(x: Sequence[float], y: Sequence[float], method: str) -> Correlation:
    """Pearson r, Spearman rho or Kendall tau-b between paired vectors, with p-value.

    Undefined (None, with a note) for fewer than 3 pairs or a constant vector (constant
    up to float residue at the vector's scale, see :func:`is_constant`); never 0 in
    that case. Source: ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau``
    (tau-b, ties corrected).
    """
    from scipy import stats

    if method not in CORRELATION_METHODS:
        raise StatsError(f"unknown correlation method {method!r}; use one of {', '.join(CORRELATION_METHODS)}")
    a, b = _paired(x, y)
    n = int(a.size)
    if n < 3:
        return Correlation(method, None, None, n, note=f"needs at least 3 pairs, got {n}")
    for name, v in (("x", a), ("y", b)):
        if is_constant(v):
            return Correlation(method, None, None, n, note=f"{name} is constant ({v[0]:g}); correlation undefined")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "pearson":
            res = stats.pearsonr(a, b)
            r, p = res.statistic, res.pvalue
        elif method == "spearman":
            res = stats.spearmanr(a, b)
            r, p = res.statistic, res.pvalue
        else:
            res = stats.kendalltau(a, b)
            r, p = res.statistic, res.pvalue
    r = float(r)
    p = float(p)
    if not math.isfinite(r):
        return Correlation(method, None, None, n, note="undefined for these data")
    return Correlation(method, r, p if math.isfinite(p) else None, n)


# --------------------------------------------------------------------------- corpus-level metrics
Aggregate = Callable[[np.ndarray], np.ndarray]
"""A corpus score from summed sufficient statistics: ``(B, k)`` totals -> ``(B,)`` scores."""


def _stats_matrix(stats: Any, name: str) -> np.ndarray:
    arr = np.asarray(stats, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise StatsError(f"{name}: need a non-empty (segments, statistics) matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise StatsError(f"{name}: sufficient statistics must be finite")
    return arr


def _resampled_totals(stats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Column sums of ``stats`` over each row of resample indices ``idx`` (B, n) -> (B, k)."""
    rows, n = idx.shape
    counts = np.bincount((idx + (np.arange(rows) * n)[:, None]).ravel(), minlength=rows * n).reshape(rows, n)
    return counts.astype(float) @ stats


def corpus_bootstrap(stats: Any, aggregate: Aggregate, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Corpus scores of ``n_resamples`` bootstrap resamples of the segments: ``(B,)``.

    Segment indices are ``Generator(PCG64(seed)).choice(n, (B, n))`` (drawn in batches;
    same stream), each resample's statistics summed and scored by ``aggregate`` -- the
    resamples sacrebleu's ``significance._bootstrap_resample`` draws at the same seed.
    ``stats``: (segments, k) sufficient statistics."""
    arr = _stats_matrix(stats, "corpus_bootstrap")
    n = arr.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    step = _batch_rows(n_resamples, n)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        out[start : start + rows] = aggregate(_resampled_totals(arr, rng.integers(0, n, (rows, n))))
    return out


def corpus_interval(
    stats: Any, aggregate: Aggregate, confidence: float = CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval of a corpus score, resampling segments' sufficient
    statistics (:func:`corpus_bootstrap`); undefined for fewer than 2 segments.
    ``method="bootstrap-percentile (corpus)"``. Source: Koehn (2004); sacrebleu's
    ``--confidence`` resampling (sacrebleu reports mean +- half-width of the same
    resamples' 2.5-97.5% range)."""
    _check_confidence(confidence)
    arr = _stats_matrix(stats, "corpus_interval")
    method = "bootstrap-percentile (corpus)"
    if arr.shape[0] < 2:
        return Interval(None, None, method, confidence, note=f"needs at least 2 segments, got {arr.shape[0]}")
    dist = corpus_bootstrap(arr, aggregate, n_resamples, seed)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), method, confidence)


def _aligned(base: Any, cand: Any) -> tuple[np.ndarray, np.ndarray]:
    a = _stats_matrix(base, "baseline statistics")
    b = _stats_matrix(cand, "candidate statistics")
    if a.shape != b.shape:
        raise StatsError(f"paired corpus statistics differ in shape ({a.shape} vs {b.shape}); align them by sample id first")
    return a, b


def paired_bootstrap_corpus(
    base: Any, cand: Any, aggregate: Aggregate, n_resamples: int = 1000, seed: int = 0, confidence: float = CONFIDENCE
) -> TestResult:
    """Paired bootstrap resampling test of a corpus score (Koehn, 2004), as sacrebleu's
    ``significance._paired_bs_test`` (the Moses ``bootstrap-hypothesis-difference-
    significance.pl`` rule).

    Both systems are resampled with the same segment indices (:func:`corpus_bootstrap`'s
    stream); with ``s_i = |cand_i - base_i|`` over resamples, the p-value is
    ``(#{s_i - mean(s) > |cand - base|} + 1) / (B + 1)``. ``extra`` holds the
    percentile interval of the resampled difference ``cand_i - base_i``
    (``delta_low``/``delta_high``) and sacrebleu's per-system mean and half-width.

    Args: ``base``/``cand`` (segments, k) sufficient statistics over the same segments
    in the same order; ``aggregate`` scores summed statistics; ``n_resamples`` (sacrebleu's
    default is 1000); ``seed``.
    Returns a :class:`TestResult` (statistic = cand - base on the full corpus)."""
    a, b = _aligned(base, cand)
    n = a.shape[0]
    score_a = float(aggregate(a.sum(axis=0)[None, :])[0])
    score_b = float(aggregate(b.sum(axis=0)[None, :])[0])
    rng = np.random.default_rng(seed)
    res_a = np.empty(n_resamples)
    res_b = np.empty(n_resamples)
    step = _batch_rows(n_resamples, n)
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        idx = rng.integers(0, n, (rows, n))
        res_a[start : start + rows] = aggregate(_resampled_totals(a, idx))
        res_b[start : start + rows] = aggregate(_resampled_totals(b, idx))
    observed = abs(score_b - score_a)
    sample_diffs = np.abs(res_b - res_a)
    shifted = sample_diffs - sample_diffs.mean()
    p = (int(np.count_nonzero(shifted > observed)) + 1) / (n_resamples + 1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(res_b - res_a, [alpha, 1.0 - alpha])
    lower_idx = n_resamples // 40
    sorted_b = np.sort(res_b)
    return TestResult(
        "paired-bootstrap", score_b - score_a, float(p), n,
        extra={"n_resamples": n_resamples, "delta_low": float(low), "delta_high": float(high),
               "bootstrap_mean": float(sorted_b.mean()),
               "bootstrap_halfwidth": float(0.5 * (sorted_b[n_resamples - lower_idx - 1] - sorted_b[lower_idx]))},
    )


def approximate_randomization(base: Any, cand: Any, aggregate: Aggregate, n_trials: int = 10000, seed: int = 0) -> TestResult:
    """Paired two-sided approximate randomization test of a corpus score (Riezler &
    Maxwell, 2005), as sacrebleu's ``significance._paired_ar_test``.

    Each trial swaps every segment's statistics between the two systems with
    probability 1/2 (``Generator(PCG64(seed)).integers(2, size=(trials, n),
    dtype=bool)``, sacrebleu's draw) and scores both pseudo-systems; the p-value is
    ``(#{|a_t - b_t| > |cand - base|} + 1) / (trials + 1)`` (multeval's rule).

    Args: as :func:`paired_bootstrap_corpus`; ``n_trials`` (sacrebleu's default 10000).
    Returns a :class:`TestResult` (statistic = cand - base)."""
    a, b = _aligned(base, cand)
    n = a.shape[0]
    total_a, total_b = a.sum(axis=0), b.sum(axis=0)
    score_a = float(aggregate(total_a[None, :])[0])
    score_b = float(aggregate(total_b[None, :])[0])
    observed = abs(score_a - score_b)
    diff = a - b  # swapping segment i moves diff_i from one pseudo-system to the other
    rng = np.random.default_rng(seed)
    # one draw of every trial's swaps (sacrebleu's stream) up to 2**27 booleans, else batches
    draw = n_trials if n_trials * n <= (1 << 27) else _batch_rows(n_trials, n)
    step = _batch_rows(n_trials, n)
    hits = 0
    for first in range(0, n_trials, draw):
        swaps = rng.integers(2, size=(min(draw, n_trials - first), n), dtype=bool)  # True: the pseudo-system takes the baseline's segment
        for start in range(0, swaps.shape[0], step):
            moved = swaps[start : start + step].astype(float) @ diff
            shuf_a = total_b + moved  # pos @ base + ~pos @ cand
            shuf_b = total_a - moved  # ~pos @ base + pos @ cand
            hits += int(np.count_nonzero(np.abs(aggregate(shuf_a) - aggregate(shuf_b)) > observed))
    p = (hits + 1) / (n_trials + 1)
    return TestResult("approximate-randomization", score_b - score_a, float(p), n, extra={"n_trials": n_trials})


__all__ = [
    "CONFIDENCE",
    "CORRELATION_METHODS",
    "Correlation",
    "Effect",
    "Interval",
    "StatsError",
    "TestResult",
    "approximate_randomization",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_resampling",
    "clean_differences",
    "cohens_dz",
    "cohens_g",
    "corpus_bootstrap",
    "corpus_interval",
    "correlation",
    "data_scale",
    "effect_dz",
    "holm",
    "is_binary",
    "is_constant",
    "mcnemar_exact",
    "mean_interval",
    "negligible",
    "paired_bootstrap_corpus",
    "paired_effect_size",
    "paired_permutation_test",
    "paired_test",
    "sign_flip_null",
    "wilson_bounds",
    "wilson_interval",
]
