"""Statistics core: constants, result types, tolerance, the bootstrap, Wilson and mean intervals.

Part of :mod:`metric_ops.stats` (the package face exports these names; its docstring lists
the methods and their sources).
"""

from __future__ import annotations

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
        out[start : start + rows] = (_flipped_sums_blocked if groups >= _BLOCKED_FROM_GROUPS else _flipped_sums)(table, raw)
    return out


#: from this many groups of 8 differences (65,536 values) the lookups run in blocks of groups
_BLOCKED_FROM_GROUPS = 8192


def _flipped_sums(table: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """``sum_g table[g, raw[g, r]]`` for each resample r, adding group after group."""
    acc = np.zeros(raw.shape[1])
    looked_up = np.empty(raw.shape[1])
    for g in range(raw.shape[0]):
        np.take(table[g], raw[g], out=looked_up, mode="clip")  # bytes index 0..255: no bounds check needed
        acc += looked_up
    return acc


def _flipped_sums_blocked(table: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """What :func:`_flipped_sums` returns, bit for bit, with one lookup call per block of
    groups instead of one per group (1.3-1.5x faster past 100k values). A block's rows sit
    under the running sum and ``np.add.reduce`` over axis 0 adds them in row order, so
    every float addition happens in the same order as group after group."""
    groups, rows = raw.shape
    flat = table.ravel()
    per_block = max(1, (1 << 18) // rows)  # about 256k lookups per call
    block = np.empty((min(per_block, groups) + 1, rows))
    acc = np.zeros(rows)
    offsets = (np.arange(groups, dtype=np.intp) * table.shape[1])[:, None]
    for g0 in range(0, groups, per_block):
        g1 = min(groups, g0 + per_block)
        index = raw[g0:g1].astype(np.intp)
        index += offsets[g0:g1]
        block[0] = acc
        np.take(flat, index, out=block[1 : g1 - g0 + 1])
        acc = np.add.reduce(block[: g1 - g0 + 1], axis=0)
    return acc
