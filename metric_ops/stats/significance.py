"""Paired significance tests, Holm's adjustment, paired effect sizes and correlations.

Part of :mod:`metric_ops.stats` (the package face exports these names; its docstring lists
the methods and their sources).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np
from metric_ops.stats.core import (
    Correlation,
    DEFAULT_PERMUTATIONS,
    EXACT_MAX_PAIRS,
    Effect,
    StatsError,
    TestResult,
    _flip_counts_exact,
    _paired,
    clean_differences,
    data_scale,
    is_binary,
    is_constant,
    negligible,
    sign_flip_null,
)


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
    discordant pairs split 50/50, so p = two-sided ``binomtest(b, b + c, 0.5)``, which for
    the symmetric Binomial(n, 1/2) is ``min(1, 2 * P(X <= min(b, c)))``: computed with
    ``scipy.special.bdtr`` (the binomial CDF), as statsmodels does, so a run does not import
    ``scipy.stats`` (0.5 s) for it. With no discordant pairs p = 1. Raises
    :class:`StatsError` for values other than 0/1.
    Source: McNemar (1947); the exact form as in statsmodels' ``mcnemar(exact=True)``.
    """
    from scipy.special import bdtr

    a, b_ = _paired(x, y)
    if a.size and not (is_binary(a) and is_binary(b_)):
        raise StatsError("McNemar's test needs 0/1 values; use paired_permutation_test for continuous scores")
    b = int(np.sum((a == 1) & (b_ == 0)))
    c = int(np.sum((a == 0) & (b_ == 1)))
    n = int(a.size)
    if b + c == 0:
        return TestResult("mcnemar-exact", float(b), 1.0, n, exact=True, note="no discordant pairs", extra={"b": b, "c": c})
    p = 2.0 * float(bdtr(min(b, c), b + c, 0.5))
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
    (tau-b, ties corrected), computed by :mod:`metric_ops.stats.corr` without importing
    ``scipy.stats`` (same values: tested against scipy).
    """
    from metric_ops.stats.corr import kendall_tau_b, pearson, spearman

    if method not in CORRELATION_METHODS:
        raise StatsError(f"unknown correlation method {method!r}; use one of {', '.join(CORRELATION_METHODS)}")
    a, b = _paired(x, y)
    n = int(a.size)
    if n < 3:
        return Correlation(method, None, None, n, note=f"needs at least 3 pairs, got {n}")
    for name, v in (("x", a), ("y", b)):
        if is_constant(v):
            return Correlation(method, None, None, n, note=f"{name} is constant ({v[0]:g}); correlation undefined")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        r, p = {"pearson": pearson, "spearman": spearman, "kendall": kendall_tau_b}[method](a, b)
    if not math.isfinite(r):
        return Correlation(method, None, None, n, note="undefined for these data")
    return Correlation(method, r, p if math.isfinite(p) else None, n)
