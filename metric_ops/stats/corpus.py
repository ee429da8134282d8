"""Corpus-level statistics: bootstrap and approximate randomization over per-segment
sufficient statistics (as sacrebleu's significance module does).

Part of :mod:`metric_ops.stats` (the package face exports these names).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from metric_ops.stats.core import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    Interval,
    StatsError,
    TestResult,
    _batch_rows,
    _check_confidence,
)


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
    base: Any, cand: Any, aggregate: Aggregate, n_resamples: int = 1000, seed: int = 0, confidence: float = CONFIDENCE,
    count_ties: bool = True,
) -> TestResult:
    """Paired bootstrap resampling test of a corpus score (Koehn, 2004), as sacrebleu's
    ``significance._paired_bs_test`` (the Moses ``bootstrap-hypothesis-difference-
    significance.pl`` rule).

    Both systems are resampled with the same segment indices (:func:`corpus_bootstrap`'s
    stream); with ``s_i = |cand_i - base_i|`` over resamples, the p-value is
    ``(#{s_i - mean(s) >= |cand - base|} + 1) / (B + 1)``: ties count as at least as
    extreme (the permutation-test convention, Phipson & Smyth 2010), so two identical systems
    get p = 1 and no p-value is below ``1 / (B + 1)``. ``count_ties=False`` keeps sacrebleu's
    strict ``>`` (for reproducing its numbers only). ``extra`` holds the
    percentile interval of the resampled difference ``cand_i - base_i``
    (``delta_low``/``delta_high``) and sacrebleu's per-system mean and half-width.

    Args: ``base``/``cand`` (segments, k) sufficient statistics over the same segments
    in the same order; ``aggregate`` scores summed statistics; ``n_resamples`` (sacrebleu's
    default is 1000); ``seed``; ``count_ties`` (default True, see above).
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
    p = (int(np.count_nonzero(_at_least(shifted, observed, count_ties))) + 1) / (n_resamples + 1)
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


def _at_least(null: np.ndarray, observed: float, count_ties: bool) -> np.ndarray:
    """Mask of null statistics at least as extreme as ``observed``: ``>=`` up to a relative
    tolerance of 1e-9 (a tie reached through other float rounding still counts), or sacrebleu's
    strict ``>`` when ``count_ties`` is False."""
    if not count_ties:
        return null > observed
    return null >= observed - 1e-9 * max(1.0, abs(observed))


def approximate_randomization(
    base: Any, cand: Any, aggregate: Aggregate, n_trials: int = 10000, seed: int = 0, count_ties: bool = True
) -> TestResult:
    """Paired two-sided approximate randomization test of a corpus score (Riezler &
    Maxwell, 2005), as sacrebleu's ``significance._paired_ar_test``.

    Each trial swaps every segment's statistics between the two systems with
    probability 1/2 (``Generator(PCG64(seed)).integers(2, size=(trials, n),
    dtype=bool)``, sacrebleu's draw) and scores both pseudo-systems; the p-value is
    ``(#{|a_t - b_t| >= |cand - base|} + 1) / (trials + 1)``. Ties count: the trial that
    swaps nothing (and the one that swaps everything) always reproduces the observed
    difference, so the strict ``>`` of multeval and sacrebleu (jhclark/multeval#3,
    huggingface/evaluate#795) gives two identical systems p = 1/(trials + 1) instead of 1.

    Args: as :func:`paired_bootstrap_corpus`; ``n_trials`` (sacrebleu's default 10000);
    ``count_ties=False`` reproduces sacrebleu's strict rule (for checking against it only).
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
            hits += int(np.count_nonzero(_at_least(np.abs(aggregate(shuf_a) - aggregate(shuf_b)), observed, count_ties)))
    p = (hits + 1) / (n_trials + 1)
    return TestResult("approximate-randomization", score_b - score_a, float(p), n, extra={"n_trials": n_trials})
