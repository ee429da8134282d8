"""N-model comparison under one fingerprint: per-metric statistics, winners by declared
direction, pairwise paired tests with Holm correction, sample-level changes, trade-off.

Pure (polars + :mod:`metric_ops.stats`): the ``comparisons`` asset reads the scores
table and writes what :func:`compare_models` returns.

Input frame (the ``scores`` table of one fingerprint): columns ``model, sample_id,
metric, value, direction, dimension, status``. Only ``status == "scored"`` rows count;
``n_total`` counts every row, so unscored and errored samples stay visible and never
become zeros. ``human:*`` rows are excluded: they rate the dataset's own output, not
each model's, so they are the same for every model and say nothing about which is
better (the correlations asset uses them).

Output rows (one list of dicts, the ``comparisons`` table's columns), by ``kind``:

- ``model_metric``: one per model x score name: mean, median, n scored / n total, the
  95% interval of the mean (Wilson for 0/1 scores, percentile bootstrap otherwise) and
  ``is_winner`` (best mean by the score's declared direction; None with one model).
- ``pairwise``: one per (baseline, candidate) x score name over the samples both scored:
  delta = mean(candidate) - mean(baseline), relative change = delta / |mean(baseline)|,
  retention = candidate / baseline (maximize) or baseline / candidate (minimize), a
  paired test (exact McNemar for 0/1 scores, sign-flip permutation otherwise), the
  Holm-adjusted p over every pairwise test of the fingerprint, the effect size
  (Cohen's g or d_z, signed so that > 0 means the candidate is better) and a verdict
  (improved / regressed / no significant difference / untested).
- ``sample_change``: the samples that regressed or improved most, and those still wrong
  under both models (0/1 scores at their worst value, or scores at the worst end of the
  metric's declared range), at most ``max_samples`` of each per pair x score.
- ``tradeoff``: one per model x score name: the mean beside the resource figures given
  (latency, tokens, cost, size) and the resource axes on which the model is
  Pareto-optimal for that score.
"""

from __future__ import annotations

import json
import math
from itertools import combinations
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from metric_ops import stats

ALPHA = 0.05
HUMAN_PREFIX = "human:"
VERDICTS = ("improved", "regressed", "no significant difference", "untested")


def _sign(direction: str) -> float:
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"score direction must be maximize or minimize, got {direction!r}")
    return 1.0 if direction == "maximize" else -1.0


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def scored_frame(scores: pl.DataFrame) -> pl.DataFrame:
    """Scored, non-human rows with a finite value (``model, sample_id, metric, value, direction, dimension``)."""
    return scores.filter(
        (pl.col("status") == "scored") & pl.col("value").is_not_null() & pl.col("value").is_finite()
        & ~pl.col("metric").str.starts_with(HUMAN_PREFIX)
    )


def metric_statistics(
    scores: pl.DataFrame, confidence: float = stats.CONFIDENCE, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """``model_metric`` rows (see the module docstring), winners marked per score name."""
    totals = (
        scores.filter(~pl.col("metric").str.starts_with(HUMAN_PREFIX))
        .group_by(["model", "metric"])
        .agg(pl.len().alias("n_total"), pl.col("direction").first(), pl.col("dimension").first())
    )
    scored = scored_frame(scores)
    rows: list[dict[str, Any]] = []
    for total in totals.sort(["metric", "model"]).iter_rows(named=True):
        values = scored.filter((pl.col("model") == total["model"]) & (pl.col("metric") == total["metric"]))["value"].to_numpy()
        interval = stats.mean_interval(values, confidence, n_resamples, seed) if values.size else None
        rows.append(
            {
                "kind": "model_metric",
                "model": total["model"],
                "metric": total["metric"],
                "direction": total["direction"],
                "dimension": total["dimension"],
                "n_scored": int(values.size),
                "n_total": int(total["n_total"]),
                "mean": float(values.mean()) if values.size else None,
                "median": float(np.median(values)) if values.size else None,
                "ci_low": interval.low if interval else None,
                "ci_high": interval.high if interval else None,
                "ci_method": interval.method if interval else None,
                "detail": {"confidence": confidence, **({"note": interval.note} if interval and interval.note else {})},
            }
        )
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_metric.setdefault(row["metric"], []).append(row)
    for metric_rows in by_metric.values():
        ranked = [r for r in metric_rows if r["mean"] is not None]
        if len(ranked) < 2:
            for r in metric_rows:
                r["is_winner"] = None
            continue
        sign = _sign(ranked[0]["direction"])
        best = max(sign * r["mean"] for r in ranked)
        for r in metric_rows:
            r["is_winner"] = r["mean"] is not None and math.isclose(sign * r["mean"], best, rel_tol=1e-12, abs_tol=1e-12)
    return rows


def model_pairs(models: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """(baseline, candidate) pairs: the configured baseline against every other model,
    else every unordered pair (alphabetical first as baseline)."""
    models = sorted(set(models))
    if baseline is not None:
        if baseline not in models:
            raise ValueError(f"baseline model {baseline!r} has no scores under this fingerprint; models: {', '.join(models)}")
        return [(baseline, m) for m in models if m != baseline]
    return list(combinations(models, 2))


def _paired_vectors(scored: pl.DataFrame, metric: str, base: str, cand: str) -> pl.DataFrame:
    a = scored.filter((pl.col("metric") == metric) & (pl.col("model") == base)).select("sample_id", pl.col("value").alias("x"))
    b = scored.filter((pl.col("metric") == metric) & (pl.col("model") == cand)).select("sample_id", pl.col("value").alias("y"))
    return a.join(b, on="sample_id", how="inner").sort("sample_id")


def pairwise_comparisons(
    scores: pl.DataFrame,
    pairs: Iterable[tuple[str, str]],
    alpha: float = ALPHA,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    max_samples: int = 10,
    n_permutations: int = stats.DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """``pairwise`` and ``sample_change`` rows for each (baseline, candidate) pair.

    Holm's adjustment runs over every pairwise test returned (all pairs x score names),
    so ``significant`` controls the family-wise error at ``alpha``.
    """
    scored = scored_frame(scores)
    directions = dict(scored.group_by("metric").agg(pl.col("direction").first()).iter_rows())
    dimensions = dict(scored.group_by("metric").agg(pl.col("dimension").first()).iter_rows())
    value_ranges = dict(value_ranges or {})
    pair_rows: list[dict[str, Any]] = []
    change_rows: list[dict[str, Any]] = []
    for base, cand in pairs:
        for metric in sorted(directions):
            paired = _paired_vectors(scored, metric, base, cand)
            if paired.height == 0:
                continue
            x, y = paired["x"].to_numpy(), paired["y"].to_numpy()
            sign = _sign(directions[metric])
            test = stats.paired_test(x, y, n_resamples=n_permutations, seed=seed)
            effect, effect_name = stats.paired_effect_size(x, y)
            mean_b, mean_c = float(x.mean()), float(y.mean())
            delta = mean_c - mean_b
            if sign > 0:
                retention = mean_c / mean_b if mean_b != 0 else None
            else:
                retention = mean_b / mean_c if mean_c != 0 else None
            diff = sign * (y - x)  # > 0: candidate better on this sample
            binary = stats.is_binary(x) and stats.is_binary(y)
            worst = _worst_value(directions[metric], binary, value_ranges.get(metric))
            still_wrong = np.zeros_like(diff, dtype=bool) if worst is None else (x == worst) & (y == worst)
            pair_rows.append(
                {
                    "kind": "pairwise",
                    "model": cand,
                    "baseline": base,
                    "metric": metric,
                    "direction": directions[metric],
                    "dimension": dimensions[metric],
                    "n_pairs": paired.height,
                    "mean": mean_c,
                    "baseline_mean": mean_b,
                    "delta": delta,
                    "relative_change": delta / abs(mean_b) if mean_b != 0 else None,
                    "retention": _finite(retention),
                    "test": test.test,
                    "statistic": test.statistic,
                    "p_value": test.p_value,
                    "effect_size": None if effect is None else sign * effect,
                    "effect_size_name": effect_name,
                    "detail": {
                        "n_improved": int((diff > 0).sum()),
                        "n_regressed": int((diff < 0).sum()),
                        "n_unchanged": int((diff == 0).sum()),
                        "n_still_wrong": int(still_wrong.sum()) if worst is not None else None,
                        "still_wrong_rule": None if worst is None else f"both values == {worst:g}",
                        "test_exact": test.exact,
                        **({"test_note": test.note} if test.note else {}),
                        **test.extra,
                    },
                }
            )
            ids = paired["sample_id"].to_list()
            order = np.argsort(diff, kind="stable")
            for label, picks in (
                ("regressed", [i for i in order if diff[i] < 0][:max_samples]),
                ("improved", [i for i in order[::-1] if diff[i] > 0][:max_samples]),
                ("still_wrong", [i for i in range(len(ids)) if still_wrong[i]][:max_samples]),
            ):
                for rank, i in enumerate(picks):
                    change_rows.append(
                        {
                            "kind": "sample_change",
                            "model": cand,
                            "baseline": base,
                            "metric": metric,
                            "direction": directions[metric],
                            "dimension": dimensions[metric],
                            "sample_id": ids[i],
                            "verdict": label,
                            "mean": float(y[i]),
                            "baseline_mean": float(x[i]),
                            "delta": float(y[i] - x[i]),
                            "detail": {"rank": rank + 1},
                        }
                    )
    adjusted = stats.holm([r["p_value"] for r in pair_rows])
    for row, p_adj in zip(pair_rows, adjusted):
        row["p_holm"] = p_adj
        row["significant"] = None if p_adj is None else bool(p_adj < alpha)
        row["detail"]["alpha"] = alpha
        row["detail"]["holm_family_size"] = sum(p is not None for p in adjusted)
        better = _sign(row["direction"]) * row["delta"]
        if p_adj is None:
            row["verdict"] = "untested"
        elif p_adj < alpha and better > 0:
            row["verdict"] = "improved"
        elif p_adj < alpha and better < 0:
            row["verdict"] = "regressed"
        else:
            row["verdict"] = "no significant difference"
    return pair_rows + change_rows


def _worst_value(direction: str, binary: bool, value_range: tuple[float, float] | None) -> float | None:
    if binary:
        return 0.0 if direction == "maximize" else 1.0
    if value_range is not None and all(v is not None and math.isfinite(v) for v in value_range):
        return float(value_range[0] if direction == "maximize" else value_range[1])
    return None


RESOURCE_AXES = ("latency_s", "tokens_in", "tokens_out", "cost", "size")


def tradeoff_rows(metric_rows: Sequence[Mapping[str, Any]], resources: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``tradeoff`` rows: each model's mean per score beside its resource figures.

    ``resources``: model -> {axis: number or None}, axes among :data:`RESOURCE_AXES`
    (lower is better for every axis). A model is Pareto-optimal on an axis for a score
    when no other model is at least as good on both and strictly better on one.
    """
    out = []
    by_metric: dict[str, list[Mapping[str, Any]]] = {}
    for row in metric_rows:
        if row["mean"] is not None:
            by_metric.setdefault(row["metric"], []).append(row)
    for metric, rows in sorted(by_metric.items()):
        for row in rows:
            res = dict(resources.get(row["model"], {}))
            sign = _sign(row["direction"])
            pareto = []
            for axis in RESOURCE_AXES:
                mine = res.get(axis)
                if mine is None:
                    continue
                dominated = False
                for other in rows:
                    if other is row:
                        continue
                    theirs = resources.get(other["model"], {}).get(axis)
                    if theirs is None:
                        continue
                    q_ge = sign * other["mean"] >= sign * row["mean"]
                    r_le = theirs <= mine
                    strictly = sign * other["mean"] > sign * row["mean"] or theirs < mine
                    if q_ge and r_le and strictly:
                        dominated = True
                        break
                if not dominated:
                    pareto.append(axis)
            out.append(
                {
                    "kind": "tradeoff",
                    "model": row["model"],
                    "metric": metric,
                    "direction": row["direction"],
                    "dimension": row["dimension"],
                    "mean": row["mean"],
                    "detail": {"resources": res, "pareto_optimal_on": pareto},
                }
            )
    return out


def compare_models(
    scores: pl.DataFrame,
    baseline: str | None = None,
    resources: Mapping[str, Mapping[str, Any]] | None = None,
    alpha: float = ALPHA,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    max_samples: int = 10,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    n_permutations: int = stats.DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Every comparisons row for one fingerprint's scores (see the module docstring).

    ``baseline``: the configured baseline model (pairs are baseline vs each other model),
    or None for every pair. Raises ``ValueError`` when the baseline has no scores.
    ``detail`` values are dicts (the asset serialises them to JSON).
    """
    metric_rows = metric_statistics(scores, n_resamples=n_resamples, seed=seed)
    models = sorted({r["model"] for r in metric_rows})
    pairs = model_pairs(models, baseline) if len(models) >= 2 else []
    rows = list(metric_rows)
    rows += pairwise_comparisons(scores, pairs, alpha, value_ranges, max_samples, n_permutations, seed)
    rows += tradeoff_rows(metric_rows, resources or {})
    return rows


def detail_json(detail: Any) -> str:
    """``detail`` as compact JSON (non-finite floats become null)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, np.generic):
            return clean(v.item())
        return v

    return json.dumps(clean(detail), sort_keys=True, ensure_ascii=False)
