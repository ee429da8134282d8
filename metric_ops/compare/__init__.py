"""N-model comparison under one fingerprint: per-metric statistics, winners by declared
direction, pairwise paired tests with Holm correction, sample-level changes, trade-off.

Pure (polars + :mod:`metric_ops.stats`): the ``comparisons`` asset reads the scores
table and writes what :func:`compare_models` returns.

Input frame (the ``scores`` table of one fingerprint): columns ``model, sample_id,
metric, value, direction, dimension, status`` (and ``detail`` for corpus-level rows).
Only ``status == "scored"`` rows count; ``n_total`` counts every row, so unscored and
errored samples stay visible and never become zeros. ``human:*`` rows are excluded: they
rate the dataset's own output, not each model's, so they are the same for every model
and say nothing about which is better (the correlations asset uses them).

Two kinds of score are compared, each by the method its definition calls for:

- **per-sample scores** (one value per sample): the mean over samples, paired tests
  over the samples both models scored;
- **corpus-level scores** (``corpus_bleu``, ``corpus_chrf``, ``corpus_chrf_pp``, idf
  BERTScore; one row with a null ``sample_id`` per model, see :mod:`metric_ops.scoring.corpus`):
  the stored corpus value, an interval by bootstrap resampling of the segments'
  sufficient statistics, and paired approximate randomisation (the verdict's test) and
  paired bootstrap resampling over the segments both models scored, as sacrebleu's
  ``--paired-ar`` / ``--paired-bs`` do. Never a per-sample test over a corpus value.

Whether a score is 0/1 comes from its metric's declaration (``Metric.binary`` /
``binary_scores``, looked up in the registry unless ``binary`` is given), never from
the values: it picks the Wilson interval, McNemar's test and Cohen's g.

Output rows (one list of dicts, the ``comparisons`` table's columns), by ``kind``:

- ``model_metric``: one per model x score name: mean (the corpus value for a
  corpus-level score), median, n scored / n total (segments for a corpus score), the
  95% interval (Wilson for declared 0/1 scores, percentile bootstrap otherwise,
  bootstrap over segments for corpus scores) and ``is_winner`` (best mean by the
  score's declared direction; None with one model).
- ``pairwise``: one per (baseline, candidate) x score name over the samples (segments)
  both scored: delta = candidate - baseline, relative change = delta / |baseline|,
  retention = candidate / baseline (maximize) or baseline / candidate (minimize), a
  paired test (exact McNemar for declared 0/1 scores, sign-flip permutation otherwise,
  approximate randomisation for corpus scores), the Holm-adjusted p over the pairwise
  tests of the same score name (every model pair), the effect size (Cohen's g or d_z,
  signed so that > 0 means the candidate is better; none for corpus scores) and a
  verdict (improved / regressed / no significant difference / untested).
- ``sample_change``: the samples that regressed or improved most, and those still wrong
  under both models (declared 0/1 scores at their worst value, or scores at the worst
  end of the metric's declared range), at most ``max_samples`` of each per pair x score
  (per-sample scores only).
- ``tradeoff``: one per model x score name: the mean beside the resource figures given
  (latency, tokens, cost, size) and the resource axes on which the model is
  Pareto-optimal for that score.

Holm's family is one score name: a rescore of one metric recomputes that metric's rows
and leaves every other metric's verdicts as they were (``metrics=`` restricts the work).

Split for size: the shared helpers and the score-frame splitting live in
:mod:`metric_ops.compare.frames`, the pairwise tests in :mod:`metric_ops.compare.pairwise`;
this module keeps the per-model statistics, trade-offs and :func:`compare_models`, and
is the family's face: it also exports those modules' names and the meta-evaluation's
(:mod:`metric_ops.compare.meta_eval`).
"""

from __future__ import annotations

import json
import math
from itertools import combinations
from typing import Any, Collection, Mapping, Sequence

import numpy as np
import polars as pl

from metric_ops import stats
from metric_ops.base import CORPUS_LEVEL
from metric_ops.scoring.corpus import CorpusStatistics
from metric_ops.compare.frames import (
    ALPHA,
    HUMAN_PREFIX,
    LEGACY_CORPUS_NOTE,
    VERDICTS,
    _corpus_statistics,
    _not_human,
    _sign,
    corpus_frame,
    corpus_metrics,
    declared_binary,
    legacy_corpus_metrics,
    scored_frame,
)
from metric_ops.compare.meta_eval import DIVERGENCE_THRESHOLD, correlation_rows, pair_kind, paired_scores
from metric_ops.compare.pairwise import pairwise_comparisons


# --------------------------------------------------------------------------- per model
def metric_statistics(
    scores: pl.DataFrame,
    confidence: float = stats.CONFIDENCE,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = 0,
    binary: Collection[str] | None = None,
    metrics: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """``model_metric`` rows (see the module docstring), winners marked per score name.

    ``binary``: score names declared 0/1 (default: from the metric registry);
    ``metrics``: only these score names (default: every one in ``scores``)."""
    frame = _not_human(scores)
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(sorted(metrics)))
    binary = declared_binary(set(frame["metric"].to_list())) if binary is None else set(binary)
    corpus = _corpus_statistics(frame)
    corpus_names = {m for _, m in corpus}
    legacy = legacy_corpus_metrics(frame) - corpus_names
    totals = (
        frame.filter(pl.col("sample_id").is_not_null())
        .group_by(["model", "metric"])
        .agg(pl.len().alias("n_total"), pl.col("direction").first(), pl.col("dimension").first())
    )
    scored = scored_frame(frame)
    values_by = {k: v["value"].to_numpy() for k, v in scored.partition_by(["model", "metric"], as_dict=True).items()} if scored.height else {}
    keys = {(r["model"], r["metric"]): r for r in totals.iter_rows(named=True)}
    for (model, metric), (row, _, _) in corpus.items():
        keys.setdefault((model, metric), {"model": model, "metric": metric, "n_total": 0, "direction": row["direction"],
                                          "dimension": row["dimension"]})
    # one bootstrap flavour per score name, chosen from its largest sample, so every model's
    # interval for a score is computed the same way
    largest: dict[str, int] = {}
    for (_, metric), values in values_by.items():
        largest[metric] = max(largest.get(metric, 0), int(values.size))
    rows: list[dict[str, Any]] = []
    for (model, metric) in sorted(keys, key=lambda k: (k[1], k[0])):
        total = keys[(model, metric)]
        base = {"kind": "model_metric", "model": model, "metric": metric, "direction": total["direction"],
                "dimension": total["dimension"]}
        if metric in corpus_names:
            rows.append({**base, **_corpus_model_row(corpus.get((model, metric)), int(total["n_total"]), confidence, n_resamples, seed)})
            continue
        if metric in legacy:
            rows.append({**base, "n_scored": 0, "n_total": int(total["n_total"]), "mean": None, "median": None,
                         "ci_low": None, "ci_high": None, "ci_method": None,
                         "detail": {"confidence": confidence, "note": LEGACY_CORPUS_NOTE.format(metric=metric)}})
            continue
        values = values_by.get((model, metric), np.empty(0))
        resampling = stats.bootstrap_resampling(largest.get(metric, 0), n_resamples)
        interval = (stats.mean_interval(values, confidence, n_resamples, seed, binary=metric in binary, resampling=resampling)
                    if values.size else None)
        detail: dict[str, Any] = {"confidence": confidence, "declared_binary": metric in binary}
        if interval and interval.note:
            detail["note"] = interval.note
        rows.append({**base, "n_scored": int(values.size), "n_total": int(total["n_total"]),
                     "mean": float(values.mean()) if values.size else None,
                     "median": float(np.median(values)) if values.size else None,
                     "ci_low": interval.low if interval else None, "ci_high": interval.high if interval else None,
                     "ci_method": interval.method if interval else None, "detail": detail})
    _mark_winners(rows)
    return rows


def _corpus_model_row(
    entry: tuple[dict[str, Any], CorpusStatistics | None, str | None] | None, n_segment_rows: int, confidence: float,
    n_resamples: int, seed: int,
) -> dict[str, Any]:
    detail: dict[str, Any] = {"confidence": confidence, "level": CORPUS_LEVEL}
    if entry is None:  # only segment rows (all unscored/error) and no corpus row
        return {"n_scored": 0, "n_total": n_segment_rows, "mean": None, "median": None, "ci_low": None, "ci_high": None,
                "ci_method": None, "detail": {**detail, "note": "no corpus row stored"}}
    row, stat, why = entry
    n_segments = len(stat) if stat is not None else 0
    out = {"n_scored": n_segments, "n_total": n_segments + n_segment_rows, "mean": row["value"] if row["status"] == "scored" else None,
           "median": None, "ci_low": None, "ci_high": None, "ci_method": None}
    if stat is None:
        detail["note"] = why
    else:
        interval = stats.corpus_interval(stat.values, stat.aggregate, confidence, n_resamples, seed)
        out.update(ci_low=interval.low, ci_high=interval.high, ci_method=interval.method)
        detail.update(aggregate=stat.kind, n_resamples=n_resamples)
        if interval.note:
            detail["note"] = interval.note
    out["detail"] = detail
    return out


def _mark_winners(rows: list[dict[str, Any]]) -> None:
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


def model_pairs(models: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """(baseline, candidate) pairs: the configured baseline against every other model,
    else every unordered pair (alphabetical first as baseline)."""
    models = sorted(set(models))
    if baseline is not None:
        if baseline not in models:
            raise ValueError(f"baseline model {baseline!r} has no scores under this fingerprint; models: {', '.join(models)}")
        return [(baseline, m) for m in models if m != baseline]
    return list(combinations(models, 2))


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
    binary: Collection[str] | None = None,
    metrics: Collection[str] | None = None,
    clusters: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every comparisons row for one fingerprint's scores (see the module docstring).

    ``clusters``: sample id -> cluster label (the spec's ``cluster:`` field), or None for
    independent items; see :func:`pairwise_comparisons`. Each ``model_metric`` row's
    ``detail.tie_group`` (1 = best) groups the models statistically indistinguishable
    from the best remaining model by Holm-adjusted paired tests over every model pair of
    that score (:func:`metric_ops.stats.tie_groups`).

    ``baseline``: the configured baseline model (pairs are baseline vs each other model),
    or None for every pair. Raises ``ValueError`` when the baseline has no scores.
    ``binary``: score names declared 0/1 (default: the metric registry's declarations).
    ``metrics``: compute only these score names' rows (a rescore of one metric); the
    model pairs are still those of every model with scores. ``detail`` values are dicts
    (the asset serialises them to JSON).
    """
    all_models = sorted(set(_not_human(scores)["model"].to_list()))
    binary = declared_binary(set(scores["metric"].to_list())) if binary is None else set(binary)
    metric_rows = metric_statistics(scores, n_resamples=n_resamples, seed=seed, binary=binary, metrics=metrics)
    pairs = model_pairs(all_models, baseline) if len(all_models) >= 2 else []
    rows = list(metric_rows)
    pair_rows = pairwise_comparisons(scores, pairs, alpha, value_ranges, max_samples, n_permutations, seed, binary=binary,
                                     metrics=metrics, n_resamples=n_resamples, clusters=clusters)
    rows += pair_rows
    _mark_tie_groups(metric_rows, scores, pairs, pair_rows, alpha, n_permutations, n_resamples, seed, binary, metrics, clusters)
    rows += tradeoff_rows(metric_rows, resources or {})
    return rows


def _mark_tie_groups(
    metric_rows: list[dict[str, Any]], scores: pl.DataFrame, pairs: Sequence[tuple[str, str]],
    pair_rows: Sequence[Mapping[str, Any]], alpha: float, n_permutations: int, n_resamples: int, seed: int,
    binary: Collection[str], metrics: Collection[str] | None, clusters: Mapping[str, str] | None,
) -> None:
    """``detail.tie_group`` on every model_metric row with a mean: the tests of the pairs the
    comparison did not run (a baseline compares only against itself) are run here, and
    Holm's adjustment covers every pair of the score."""
    means: dict[str, dict[str, float]] = {}
    direction: dict[str, str] = {}
    for row in metric_rows:
        if row["mean"] is not None:
            means.setdefault(row["metric"], {})[row["model"]] = row["mean"]
            direction[row["metric"]] = row["direction"]
    if not any(len(m) >= 2 for m in means.values()):
        return
    done = {frozenset(p) for p in pairs}
    extra = [p for p in model_pairs(sorted({m for ms in means.values() for m in ms})) if frozenset(p) not in done]
    tested = [r for r in pair_rows if r["kind"] == "pairwise"]
    if extra:
        tested += [r for r in pairwise_comparisons(scores, extra, alpha, None, 0, n_permutations, seed, binary=binary,
                                                   metrics=metrics, n_resamples=n_resamples, clusters=clusters)
                   if r["kind"] == "pairwise"]
    raw: dict[str, dict[frozenset[str], float | None]] = {}
    for r in tested:
        raw.setdefault(r["metric"], {})[frozenset((r["model"], r["baseline"]))] = r["p_value"]
    groups: dict[tuple[str, str], int] = {}
    for metric, model_means in means.items():
        keys = list(raw.get(metric, {}))
        adjusted = dict(zip(keys, stats.holm([raw[metric][k] for k in keys])))
        for model, group in stats.tie_groups(model_means, adjusted, direction[metric], alpha).items():
            groups[(metric, model)] = group
    for row in metric_rows:
        group = groups.get((row["metric"], row["model"]))
        if group is not None:
            row["detail"]["tie_group"] = group
            row["detail"]["tie_group_rule"] = (f"1 = best; models whose Holm-adjusted paired p against the group's leader "
                                               f"is >= {alpha:g} share its group")


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


__all__ = [
    "ALPHA",
    "HUMAN_PREFIX",
    "LEGACY_CORPUS_NOTE",
    "VERDICTS",
    "corpus_frame",
    "corpus_metrics",
    "declared_binary",
    "legacy_corpus_metrics",
    "scored_frame",
    "DIVERGENCE_THRESHOLD",
    "correlation_rows",
    "pair_kind",
    "paired_scores",
    "pairwise_comparisons",
    "metric_statistics",
    "model_pairs",
    "RESOURCE_AXES",
    "tradeoff_rows",
    "compare_models",
    "detail_json",
]
