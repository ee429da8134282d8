"""Statistics for comparing models and meta-evaluating metrics (pure: numpy + scipy).

What each function computes and where it comes from:

- :func:`bootstrap_ci`: percentile bootstrap interval of a statistic (Efron & Tibshirani,
  1993, ch. 13), via ``scipy.stats.bootstrap(method="percentile")``.
- :func:`wilson_interval`: Wilson score interval of a binomial proportion (Wilson, 1927),
  via ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``.
- :func:`mean_interval`: the 95% interval the comparisons table reports: Wilson for 0/1
  scores, percentile bootstrap of the mean otherwise.
- :func:`paired_permutation_test`: the paired (sign-flip) permutation test of the mean
  difference (Fisher, 1935; Good, 2005), via ``scipy.stats.permutation_test`` with
  ``permutation_type="samples"``; exact when every sign pattern fits in the resamples.
- :func:`mcnemar_exact`: exact McNemar test for paired 0/1 outcomes (McNemar, 1947): a
  two-sided binomial test on the discordant pairs, via ``scipy.stats.binomtest``.
- :func:`holm`: Holm's step-down adjustment of p-values (Holm, 1979).
- :func:`cohens_dz` / :func:`cohens_g`: paired effect sizes (Cohen, 1988): mean
  difference over the standard deviation of the differences; discordant proportion
  minus one half (signed).
- :func:`correlation`: Pearson r, Spearman rho and Kendall tau-b with their p-values,
  via ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau``.

Conventions: inputs are 1-D sequences of finite floats (NaN/None are the caller's to
drop: every function raises :class:`StatsError` on a non-finite value rather than
silently skipping it). A statistic that is undefined for the data (fewer than two
values, a constant vector for a correlation, zero variance of differences) is ``None``
with the reason in ``note``, never a zero.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_PERMUTATIONS = 9999


class StatsError(ValueError):
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
    the number of ``x=1, y=0`` pairs for McNemar); ``p_value`` in [0, 1] (None when the
    test is undefined, see ``note``); ``exact``: whether the null distribution was
    enumerated rather than sampled; ``extra``: test-specific counts.
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


def is_binary(values: Sequence[float]) -> bool:
    """True when every value is exactly 0 or 1 (and there is at least one)."""
    arr = _array(values)
    return bool(arr.size) and bool(np.all((arr == 0.0) | (arr == 1.0)))


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., Any] = np.mean,
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of ``statistic`` over ``values``.

    Args:
        values: 1-D finite floats (any units; the interval is in the same units).
        statistic: a vectorised statistic taking ``(sample, axis=...)`` (default mean).
        confidence: two-sided level in (0, 1).
        n_resamples: bootstrap resamples (the percentiles' Monte-Carlo error shrinks
            as 1/sqrt(n_resamples)).
        seed: seed of the resampling generator (the interval is reproducible).

    Returns an :class:`Interval` with ``method="bootstrap-percentile"``; undefined
    (None bounds) for fewer than two values. A constant vector gives ``[c, c]``.
    Source: Efron & Tibshirani (1993); ``scipy.stats.bootstrap``.
    """
    from scipy import stats

    _check_confidence(confidence)
    arr = _array(values)
    method = "bootstrap-percentile"
    if arr.size < 2:
        return Interval(None, None, method, confidence, note=f"needs at least 2 values, got {arr.size}")
    if np.all(arr == arr[0]):
        c = float(statistic(arr))
        return Interval(c, c, method, confidence, note="constant values")
    res = stats.bootstrap(
        (arr,), statistic, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
        vectorized=True, rng=np.random.default_rng(seed),
    )
    return Interval(float(res.confidence_interval.low), float(res.confidence_interval.high), method, confidence)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a binomial proportion ``successes / n``.

    Args: ``successes`` in [0, n]; ``n`` trials (0 gives an undefined interval);
    ``confidence`` in (0, 1). Bounds lie in [0, 1]. Source: Wilson (1927);
    ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``.
    """
    from scipy import stats

    _check_confidence(confidence)
    if n < 0 or successes < 0 or successes > n:
        raise StatsError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(None, None, "wilson", confidence, note="no trials")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(float(ci.low), float(ci.high), "wilson", confidence)


def mean_interval(
    values: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Interval:
    """Interval of the mean: Wilson for 0/1 values, percentile bootstrap otherwise."""
    arr = _array(values)
    if is_binary(arr):
        return wilson_interval(int(arr.sum()), int(arr.size), confidence)
    return bootstrap_ci(arr, np.mean, confidence, n_resamples, seed)


def paired_permutation_test(
    x: Sequence[float],
    y: Sequence[float],
    n_resamples: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    alternative: str = "two-sided",
) -> TestResult:
    """Paired sign-flip permutation test of the mean difference ``mean(y - x)``.

    Under the null the two values of each pair are exchangeable, so each difference's
    sign is flipped at random. With ``2**n <= n_resamples`` every sign pattern is
    enumerated (exact p-value); otherwise ``n_resamples`` random patterns are drawn
    (p-value counts the observed statistic, so it is never 0).

    Args:
        x, y: paired 1-D finite floats of equal length (x = baseline, y = candidate).
        n_resamples: random sign patterns when the test is not exact.
        seed: generator seed (reproducible p-values).
        alternative: ``two-sided``, ``greater`` (y > x) or ``less``.

    Returns a :class:`TestResult` whose statistic is ``mean(y - x)``; p is None for
    fewer than 2 pairs. If every difference is 0 the p-value is 1.
    Source: Fisher (1935), Good (2005); ``scipy.stats.permutation_test``.
    """
    from scipy import stats

    a, b = _paired(x, y)
    n = int(a.size)
    if alternative not in ("two-sided", "greater", "less"):
        raise StatsError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    if n < 2:
        return TestResult("paired-permutation", None, None, n, note=f"needs at least 2 pairs, got {n}")
    diff = b - a
    observed = float(diff.mean())
    if np.all(diff == 0):
        return TestResult("paired-permutation", 0.0, 1.0, n, exact=True, note="all differences are zero")

    def mean_diff(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(v - u, axis=axis)

    res = stats.permutation_test(
        (a, b), mean_diff, permutation_type="samples", vectorized=True, n_resamples=n_resamples,
        alternative=alternative, rng=np.random.default_rng(seed), batch=max(1, min(n_resamples, 2_000_000 // max(n, 1))),
    )
    exact = 2**n <= n_resamples
    return TestResult("paired-permutation", observed, float(min(1.0, res.pvalue)), n, exact=exact,
                      extra={"n_resamples": None if exact else n_resamples})


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


def paired_test(x: Sequence[float], y: Sequence[float], **kwargs: Any) -> TestResult:
    """Exact McNemar when both vectors are 0/1, else the paired permutation test."""
    if len(x) and is_binary(x) and is_binary(y):
        return mcnemar_exact(x, y)
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


def cohens_dz(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Cohen's d_z for paired data: ``mean(y - x) / sd(y - x)`` (sd with ddof=1).

    Unitless; None for fewer than 2 pairs or when the differences have zero variance.
    Source: Cohen (1988), Lakens (2013) eq. 6.
    """
    a, b = _paired(x, y)
    if a.size < 2:
        return None
    d = b - a
    sd = float(np.std(d, ddof=1))
    if sd == 0.0 or not math.isfinite(sd):
        return None
    return float(d.mean() / sd)


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


def paired_effect_size(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, str]:
    """(value, name): Cohen's g for 0/1 vectors, Cohen's d_z otherwise."""
    if len(x) and is_binary(x) and is_binary(y):
        return cohens_g(x, y), "cohens_g"
    return cohens_dz(x, y), "cohens_dz"


CORRELATION_METHODS = ("pearson", "spearman", "kendall")


def correlation(x: Sequence[float], y: Sequence[float], method: str) -> Correlation:
    """Pearson r, Spearman rho or Kendall tau-b between paired vectors, with p-value.

    Undefined (None, with a note) for fewer than 3 pairs or a constant vector; never 0
    in that case. Source: ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau``
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
        if np.all(v == v[0]):
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


__all__ = [
    "CONFIDENCE",
    "CORRELATION_METHODS",
    "Correlation",
    "Interval",
    "StatsError",
    "TestResult",
    "bootstrap_ci",
    "cohens_dz",
    "cohens_g",
    "correlation",
    "holm",
    "is_binary",
    "mcnemar_exact",
    "mean_interval",
    "paired_effect_size",
    "paired_permutation_test",
    "paired_test",
    "wilson_interval",
]
