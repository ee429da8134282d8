"""Model comparison: pairwise tests (paired permutation / McNemar per sample, paired
bootstrap / approximate randomization for corpus metrics) with Holm's adjustment.

Part of :mod:`metric_ops.compare` (the package face exports these names).
"""

from __future__ import annotations

import math
from typing import Any, Collection, Iterable, Mapping

import numpy as np
import polars as pl

from metric_ops import stats
from metric_ops.base import CORPUS_LEVEL
from metric_ops.scoring.corpus import CorpusStatistics
from metric_ops.compare.frames import (
    ALPHA,
    _corpus_statistics,
    _finite,
    _not_human,
    _sign,
    declared_binary,
    scored_frame,
)


# --------------------------------------------------------------------------- pairwise
def _paired_vectors(by_model: Mapping[str, pl.DataFrame], base: str, cand: str) -> pl.DataFrame:
    a = by_model.get(base)
    b = by_model.get(cand)
    if a is None or b is None:
        return pl.DataFrame({"sample_id": [], "x": [], "y": []}, schema={"sample_id": pl.String, "x": pl.Float64, "y": pl.Float64})
    return (a.select("sample_id", pl.col("value").alias("x"))
            .join(b.select("sample_id", pl.col("value").alias("y")), on="sample_id", how="inner").sort("sample_id"))


def pairwise_comparisons(
    scores: pl.DataFrame,
    pairs: Iterable[tuple[str, str]],
    alpha: float = ALPHA,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    max_samples: int = 10,
    n_permutations: int = stats.DEFAULT_PERMUTATIONS,
    seed: int = 0,
    binary: Collection[str] | None = None,
    metrics: Collection[str] | None = None,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    clusters: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """``pairwise`` and ``sample_change`` rows for each (baseline, candidate) pair.

    Every per-sample pairwise row's ``detail`` carries the difference in the metric's units
    with its 95% interval (``delta_ci_low``/``delta_ci_high``, percentile bootstrap of the
    paired differences, or of whole clusters) and ``mde``, the minimum detectable
    difference at 80% power for this n, the observed spread of the differences and the
    design effect (:func:`metric_ops.stats.min_detectable_effect`). ``clusters`` maps
    sample id -> cluster label (a declared ``cluster:`` field): the test is then the
    clustered paired permutation test and ``detail`` adds ``n_clusters``, ``icc``,
    ``design_effect``, ``se_naive`` and ``se_cluster`` (CR1) of the differences; a sample
    without a label is its own cluster.

    Holm's adjustment runs over the pairwise tests of each score name (every model
    pair), so ``significant`` controls the family-wise error at ``alpha`` per score.
    Corpus-level scores are tested by approximate randomisation (``n_permutations``
    trials) and paired bootstrap resampling (``n_resamples``) of their segments'
    statistics. ``binary``/``metrics`` as in :func:`metric_statistics`.
    """
    frame = _not_human(scores)
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(sorted(metrics)))
    binary = declared_binary(set(frame["metric"].to_list())) if binary is None else set(binary)
    scored = scored_frame(frame)
    corpus = _corpus_statistics(frame)
    info = frame.group_by("metric").agg(pl.col("direction").first(), pl.col("dimension").first())
    directions = dict(info.select("metric", "direction").iter_rows())
    dimensions = dict(info.select("metric", "dimension").iter_rows())
    corpus_names = {m for _, m in corpus}
    sample_metrics = set(scored["metric"].to_list())
    by_metric = {k[0]: {m[0]: f for m, f in v.partition_by("model", as_dict=True).items()}
                 for k, v in scored.partition_by("metric", as_dict=True).items()} if scored.height else {}
    value_ranges = dict(value_ranges or {})
    pair_rows: list[dict[str, Any]] = []
    change_rows: list[dict[str, Any]] = []
    for base, cand in pairs:
        for metric in sorted(sample_metrics | corpus_names):
            head = {"kind": "pairwise", "model": cand, "baseline": base, "metric": metric, "direction": directions[metric],
                    "dimension": dimensions[metric]}
            if metric in corpus_names:
                row = _corpus_pair(corpus.get((base, metric)), corpus.get((cand, metric)), directions[metric], n_permutations,
                                   n_resamples, seed)
                if row is not None:
                    pair_rows.append({**head, **row})
                continue
            paired = _paired_vectors(by_metric.get(metric, {}), base, cand)
            if paired.height == 0:
                continue
            row, changes = _sample_pair(paired, metric, directions[metric], metric in binary, value_ranges.get(metric),
                                        n_permutations, seed, max_samples, n_resamples, clusters)
            pair_rows.append({**head, **row})
            change_rows += [{**head, **c, "kind": "sample_change"} for c in changes]
    _holm_per_metric(pair_rows, alpha)
    return pair_rows + change_rows


def _sample_pair(
    paired: pl.DataFrame, metric: str, direction: str, binary: bool, value_range: tuple[float, float] | None,
    n_permutations: int, seed: int, max_samples: int, n_resamples: int = stats.DEFAULT_RESAMPLES,
    clusters: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    x, y = paired["x"].to_numpy(), paired["y"].to_numpy()
    sign = _sign(direction)
    labels = None if clusters is None else [clusters.get(i) or f"sample:{i}" for i in paired["sample_id"].to_list()]
    if labels is None:
        test = stats.paired_test(x, y, binary=binary, n_resamples=n_permutations, seed=seed)
    else:
        test = stats.clustered_paired_test(x, y, labels, n_resamples=n_permutations, seed=seed)
    precision = _difference_precision(x, y, labels, n_resamples, seed)
    effect = stats.paired_effect_size(x, y, binary=binary)
    mean_b, mean_c = float(x.mean()), float(y.mean())
    delta = mean_c - mean_b
    if sign > 0:
        retention = mean_c / mean_b if mean_b != 0 else None
    else:
        retention = mean_b / mean_c if mean_c != 0 else None
    diff = sign * stats.clean_differences(x, y)  # > 0: candidate better on this sample (float residue is 0)
    worst = _worst_value(direction, binary, value_range)
    still_wrong = np.zeros_like(diff, dtype=bool) if worst is None else (x == worst) & (y == worst)
    detail = {
        "n_improved": int((diff > 0).sum()),
        "n_regressed": int((diff < 0).sum()),
        "n_unchanged": int((diff == 0).sum()),
        "n_still_wrong": int(still_wrong.sum()) if worst is not None else None,
        "still_wrong_rule": None if worst is None else f"both values == {worst:g}",
        "test_exact": test.exact,
        "declared_binary": binary,
        **({"test_note": test.note} if test.note else {}),
        **({"effect_note": effect.note} if effect.note else {}),
        **test.extra,
        **precision,
    }
    row = {
        "n_pairs": paired.height, "mean": mean_c, "baseline_mean": mean_b, "delta": delta,
        "relative_change": delta / abs(mean_b) if mean_b != 0 else None, "retention": _finite(retention),
        "test": test.test, "statistic": test.statistic, "p_value": test.p_value,
        "effect_size": None if effect.value is None else sign * effect.value, "effect_size_name": effect.name, "detail": detail,
    }
    ids = paired["sample_id"].to_list()
    order = np.argsort(diff, kind="stable")
    changes = []
    for label, picks in (
        ("regressed", [i for i in order if diff[i] < 0][:max_samples]),
        ("improved", [i for i in order[::-1] if diff[i] > 0][:max_samples]),
        ("still_wrong", [i for i in range(len(ids)) if still_wrong[i]][:max_samples]),
    ):
        for rank, i in enumerate(picks):
            changes.append({"sample_id": ids[i], "verdict": label, "mean": float(y[i]), "baseline_mean": float(x[i]),
                            "delta": float(y[i] - x[i]), "detail": {"rank": rank + 1}})
    return row, changes


def _difference_precision(
    x: np.ndarray, y: np.ndarray, labels: list[str] | None, n_resamples: int, seed: int
) -> dict[str, Any]:
    """The paired difference's interval (metric units) and minimum detectable effect."""
    d = y - x
    out: dict[str, Any] = {"delta_ci_low": None, "delta_ci_high": None, "delta_ci_method": None, "mde": None,
                           "mde_power": stats.POWER}
    if d.size < 2:
        return out
    deff = 1.0
    if labels is None:
        ci = stats.bootstrap_ci(d, np.mean, stats.CONFIDENCE, n_resamples, seed)
    else:
        ci = stats.cluster_bootstrap_ci(d, labels, stats.CONFIDENCE, n_resamples, seed)
        summary = stats.cluster_summary(d, labels)
        out.update(n_clusters=summary.n_clusters, icc=summary.icc, design_effect=summary.design_effect,
                   se_naive=summary.se_naive, se_cluster=summary.se_cluster)
        deff = summary.design_effect if summary.design_effect is not None else 1.0
    out.update(delta_ci_low=ci.low, delta_ci_high=ci.high, delta_ci_method=ci.method,
               mde=stats.min_detectable_effect(float(d.std(ddof=1)), int(d.size), design_effect=deff))
    return out


def _corpus_pair(
    base: tuple[dict[str, Any], CorpusStatistics | None, str | None] | None,
    cand: tuple[dict[str, Any], CorpusStatistics | None, str | None] | None,
    direction: str, n_trials: int, n_resamples: int, seed: int,
) -> dict[str, Any] | None:
    """The pairwise row of a corpus-level score (None when a model has no corpus row)."""
    if base is None or cand is None:
        return None
    (_, sb, why_b), (_, sc, why_c) = base, cand
    detail: dict[str, Any] = {"level": CORPUS_LEVEL}
    untested = {"n_pairs": 0, "mean": None, "baseline_mean": None, "delta": None, "relative_change": None, "retention": None,
                "test": "approximate-randomization", "statistic": None, "p_value": None, "effect_size": None,
                "effect_size_name": None}
    if sb is None or sc is None:
        return {**untested, "detail": {**detail, "test_note": f"untested: {why_b or why_c}"}}
    if (sb.kind, sb.params, sb.fields) != (sc.kind, sc.params, sc.fields):
        return {**untested, "detail": {**detail, "test_note": (
            f"untested: the two corpus scores were computed with different settings ({sb.kind} {sb.params} vs "
            f"{sc.kind} {sc.params}); rescore both with the same parameters")}}
    common = sorted(set(sb.sample_ids) & set(sc.sample_ids))
    if len(common) < 2:
        return {**untested, "n_pairs": len(common),
                "detail": {**detail, "test_note": f"needs at least 2 segments scored under both models, got {len(common)}"}}
    a, b = sb.aligned(common), sc.aligned(common)
    aggregate = sc.aggregate
    ar = stats.approximate_randomization(a, b, aggregate, n_trials, seed)
    bs = stats.paired_bootstrap_corpus(a, b, aggregate, n_resamples, seed)
    mean_b = float(aggregate(a.sum(axis=0))[0])
    mean_c = float(aggregate(b.sum(axis=0))[0])
    delta = mean_c - mean_b
    sign = _sign(direction)
    retention = (mean_c / mean_b if mean_b != 0 else None) if sign > 0 else (mean_b / mean_c if mean_c != 0 else None)
    detail.update(
        aggregate=sc.kind, n_trials=n_trials, n_resamples=n_resamples,
        paired_bootstrap_p=bs.p_value, delta_ci_low=bs.extra["delta_low"], delta_ci_high=bs.extra["delta_high"],
        segments_baseline=len(sb), segments_candidate=len(sc), test_exact=False,
        effect_note="no per-sample effect size for a corpus-level score (the corpus value is not a mean of per-sample values)",
    )
    if len(common) < max(len(sb), len(sc)):
        detail["subset_note"] = (f"compared over the {len(common)} segments both models scored; the stored corpus values "
                                 f"cover {len(sb)} and {len(sc)}")
    return {"n_pairs": len(common), "mean": mean_c, "baseline_mean": mean_b, "delta": delta,
            "relative_change": delta / abs(mean_b) if mean_b != 0 else None, "retention": _finite(retention),
            "test": ar.test, "statistic": ar.statistic, "p_value": ar.p_value, "effect_size": None, "effect_size_name": None,
            "detail": detail}


def _holm_per_metric(pair_rows: list[dict[str, Any]], alpha: float) -> None:
    families: dict[str, list[dict[str, Any]]] = {}
    for row in pair_rows:
        families.setdefault(row["metric"], []).append(row)
    for metric_rows in families.values():
        adjusted = stats.holm([r["p_value"] for r in metric_rows])
        size = sum(p is not None for p in adjusted)
        for row, p_adj in zip(metric_rows, adjusted):
            row["p_holm"] = p_adj
            row["significant"] = None if p_adj is None else bool(p_adj < alpha)
            row["detail"]["alpha"] = alpha
            row["detail"]["holm_family"] = f"pairwise tests of {row['metric']}"
            row["detail"]["holm_family_size"] = size
            better = None if row["delta"] is None else _sign(row["direction"]) * row["delta"]
            if p_adj is None:
                row["verdict"] = "untested"
            elif p_adj < alpha and better is not None and better > 0:
                row["verdict"] = "improved"
            elif p_adj < alpha and better is not None and better < 0:
                row["verdict"] = "regressed"
            else:
                row["verdict"] = "no significant difference"


def _worst_value(direction: str, binary: bool, value_range: tuple[float, float] | None) -> float | None:
    if binary:
        return 0.0 if direction == "maximize" else 1.0
    if value_range is not None and all(v is not None and math.isfinite(v) for v in value_range):
        return float(value_range[0] if direction == "maximize" else value_range[1])
    return None
