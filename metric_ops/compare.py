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
  BERTScore; one row with a null ``sample_id`` per model, see :mod:`metric_ops.corpus`):
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
"""

from __future__ import annotations

import json
import math
from itertools import combinations
from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from metric_ops import stats
from metric_ops.corpus import CORPUS_LEVEL, CorpusStatistics, CorpusStatisticsError

ALPHA = 0.05
HUMAN_PREFIX = "human:"
VERDICTS = ("improved", "regressed", "no significant difference", "untested")
LEGACY_CORPUS_NOTE = (
    "stored in the old format (the corpus value copied onto every sample row), which per-sample statistics cannot use; "
    "rescore it (facetlake score --metric {metric} --force) to store one corpus row with its sufficient statistics"
)


def _sign(direction: str) -> float:
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"score direction must be maximize or minimize, got {direction!r}")
    return 1.0 if direction == "maximize" else -1.0


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def declared_binary(metrics: Iterable[str]) -> set[str]:
    """The score names among ``metrics`` whose metric declares them 0/1 (registry lookup;
    unknown names, e.g. ``human:*`` ratings, are not 0/1)."""
    from metric_ops.registry import REGISTRY

    out = set()
    for name in metrics:
        try:
            cls = REGISTRY.get_class(name)
        except Exception:  # noqa: BLE001 - human ratings and retired metrics have no class
            continue
        if name in cls.emitted_binary():
            out.add(name)
    return out


# --------------------------------------------------------------------------- splitting the scores
def _not_human(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(~pl.col("metric").str.starts_with(HUMAN_PREFIX))


def corpus_frame(scores: pl.DataFrame) -> pl.DataFrame:
    """The corpus rows (``sample_id`` null) of corpus-level scores."""
    return _not_human(scores).filter(pl.col("sample_id").is_null())


def corpus_metrics(scores: pl.DataFrame) -> set[str]:
    """Score names stored as corpus rows (one per model, ``sample_id`` null)."""
    return set(corpus_frame(scores)["metric"].to_list())


def legacy_corpus_metrics(scores: pl.DataFrame) -> set[str]:
    """Score names stored in the old corpus format: the corpus value on every sample row
    (``detail.level == "corpus"`` with a sample id). Their rows are not per-sample values."""
    if "detail" not in scores.columns or scores.height == 0:
        return set()
    old = scores.filter(
        pl.col("sample_id").is_not_null() & (pl.col("status") == "scored")
        & pl.col("detail").str.contains('"level": "corpus"', literal=True)
    )
    return set(old["metric"].to_list())


def scored_frame(scores: pl.DataFrame) -> pl.DataFrame:
    """Scored, non-human, per-sample rows with a finite value (``model, sample_id, metric,
    value, direction, dimension``); corpus-level scores (new and old format) left out."""
    skip = corpus_metrics(scores) | legacy_corpus_metrics(scores)
    return _not_human(scores).filter(
        (pl.col("status") == "scored") & pl.col("value").is_not_null() & pl.col("value").is_finite()
        & pl.col("sample_id").is_not_null() & ~pl.col("metric").is_in(sorted(skip))
    )


def _corpus_statistics(scores: pl.DataFrame) -> dict[tuple[str, str], tuple[dict[str, Any], CorpusStatistics | None, str | None]]:
    """(model, metric) -> (corpus row, its statistics or None, why none)."""
    out = {}
    for row in corpus_frame(scores).iter_rows(named=True):
        stat, why = None, None
        if row["status"] != "scored":
            why = f"corpus score is {row['status']}"
        else:
            try:
                stat = CorpusStatistics.from_detail(row.get("detail"))
                if stat is None:
                    why = "the corpus row carries no sufficient statistics"
            except (CorpusStatisticsError, ValueError) as exc:
                why = f"unreadable corpus statistics: {exc}"
        out[(row["model"], row["metric"])] = (row, stat, why)
    return out


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
) -> list[dict[str, Any]]:
    """``pairwise`` and ``sample_change`` rows for each (baseline, candidate) pair.

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
                                        n_permutations, seed, max_samples)
            pair_rows.append({**head, **row})
            change_rows += [{**head, **c, "kind": "sample_change"} for c in changes]
    _holm_per_metric(pair_rows, alpha)
    return pair_rows + change_rows


def _sample_pair(
    paired: pl.DataFrame, metric: str, direction: str, binary: bool, value_range: tuple[float, float] | None,
    n_permutations: int, seed: int, max_samples: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    x, y = paired["x"].to_numpy(), paired["y"].to_numpy()
    sign = _sign(direction)
    test = stats.paired_test(x, y, binary=binary, n_resamples=n_permutations, seed=seed)
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
) -> list[dict[str, Any]]:
    """Every comparisons row for one fingerprint's scores (see the module docstring).

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
    rows += pairwise_comparisons(scores, pairs, alpha, value_ranges, max_samples, n_permutations, seed, binary=binary,
                                 metrics=metrics, n_resamples=n_resamples)
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
