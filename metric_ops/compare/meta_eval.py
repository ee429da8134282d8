"""Meta-evaluation: how metrics agree with each other and with human ratings.

Pure (polars + :mod:`metric_ops.stats`). For one model's scores under one fingerprint,
:func:`correlation_rows` computes Pearson r, Spearman rho and Kendall tau-b
(``scipy.stats``) between every pair of score names over the samples both scored:
metric-metric pairs, metric-human pairs (``human:*``, the standard meta-evaluation of
e.g. UniEval, Zhong et al. 2022) and human-human pairs.

A metric-metric pair in the same transparency dimension whose direction-oriented
Pearson r is below ``divergence_threshold`` (0.5) is flagged ``divergent``: two metrics
that claim to measure the same thing disagree. Oriented means multiplied by -1 once for
each minimised score, so ``faithfulness`` (maximise) and ``hallucination`` (minimise) at
r = -1 agree perfectly and are not flagged. Every row lists the samples that disagree most: the
largest gaps between the two scores' percentile ranks (ties averaged), which is where
to look to see why.

Undefined correlations (fewer than 3 shared samples, a constant vector) are None with
a note, never 0.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Collection, Mapping

import numpy as np
import polars as pl

from metric_ops import stats
from metric_ops.compare.frames import HUMAN_PREFIX

DIVERGENCE_THRESHOLD = 0.5


def pair_kind(a: str, b: str) -> str:
    """``metric-metric``, ``metric-human`` or ``human-human``."""
    ha, hb = a.startswith(HUMAN_PREFIX), b.startswith(HUMAN_PREFIX)
    return "human-human" if ha and hb else ("metric-human" if ha or hb else "metric-metric")


def _percentile_ranks(values: np.ndarray) -> np.ndarray:
    from metric_ops.stats.corr import rank_average  # scipy's rankdata(method="average") without importing scipy.stats

    if values.size <= 1:
        return np.zeros_like(values, dtype=float)
    return (rank_average(values) - 1) / (values.size - 1)


def _scored_by_metric(scores: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """score name -> ``sample_id, value`` of its scored, finite rows (one pass over ``scores``)."""
    ok = scores.filter((pl.col("status") == "scored") & pl.col("value").is_not_null() & pl.col("value").is_finite())
    return {str(name): frame.select("sample_id", "value")
            for (name,), frame in ok.select("metric", "sample_id", "value").partition_by("metric", as_dict=True).items()}


def _joined(by_metric: Mapping[str, pl.DataFrame], a: str, b: str) -> pl.DataFrame:
    empty = pl.DataFrame(schema={"sample_id": pl.Utf8, "value": pl.Float64})
    left = by_metric.get(a, empty).rename({"value": "a"})
    right = by_metric.get(b, empty).rename({"value": "b"})
    return left.join(right, on="sample_id", how="inner").sort("sample_id")


def paired_scores(scores: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
    """``sample_id, a, b`` for the samples where both score names are scored (sorted by id)."""
    return _joined(_scored_by_metric(scores.filter(pl.col("metric").is_in([a, b]))), a, b)


def correlation_rows(
    scores: pl.DataFrame,
    include_human: bool = True,
    divergence_threshold: float = DIVERGENCE_THRESHOLD,
    n_disagreeing: int = 5,
    only: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per unordered pair of score names in ``scores`` (one model's rows).

    ``scores`` columns: ``sample_id, metric, value, status, dimension`` (and ``direction``,
    used to orient the divergence test; maximise assumed without it).
    ``include_human=False`` drops pairs with a ``human:*`` score (ratings that are not
    about this model's outputs). Row keys: ``metric_a, metric_b, kind, dimension_a,
    dimension_b, same_dimension, n, pearson, pearson_p, spearman, spearman_p, kendall,
    kendall_p, divergent, detail`` (dict: notes, the samples that disagree most).
    ``only``: compute just the pairs with at least one of these score names (a rescore
    of one metric recomputes its pairs, not every pair).
    """
    names = sorted(scores["metric"].unique().to_list())
    if not include_human:
        names = [n for n in names if not n.startswith(HUMAN_PREFIX)]
    dims = dict(scores.group_by("metric").agg(pl.col("dimension").first()).iter_rows())
    signs = {m: (-1.0 if d == "minimize" else 1.0)
             for m, d in scores.group_by("metric").agg(pl.col("direction").first()).iter_rows()} if "direction" in scores.columns else {}
    rows = []
    by_metric = _scored_by_metric(scores)  # split once: a pair is one join, not three filters over every row
    for a, b in combinations(names, 2):
        if only is not None and a not in only and b not in only:
            continue
        paired = _joined(by_metric, a, b)
        x, y = paired["a"].to_numpy(), paired["b"].to_numpy()
        kind = pair_kind(a, b)
        row: dict[str, Any] = {
            "metric_a": a,
            "metric_b": b,
            "kind": kind,
            "dimension_a": dims.get(a),
            "dimension_b": dims.get(b),
            "same_dimension": dims.get(a) == dims.get(b),
            "n": int(paired.height),
        }
        notes = {}
        for method in stats.CORRELATION_METHODS:
            corr = stats.correlation(x, y, method)
            row[method] = corr.r
            row[f"{method}_p"] = corr.p_value
            if corr.note:
                notes[method] = corr.note
        oriented = None if row["pearson"] is None else row["pearson"] * signs.get(a, 1.0) * signs.get(b, 1.0)
        row["divergent"] = bool(
            kind == "metric-metric" and row["same_dimension"] and oriented is not None and oriented < divergence_threshold
        )
        detail: dict[str, Any] = {
            "divergence_rule": f"same dimension and direction-oriented pearson < {divergence_threshold}",
            "pearson_oriented": oriented,
        }
        if notes:
            detail["notes"] = notes
        if paired.height >= 2:
            gap = _percentile_ranks(x) - _percentile_ranks(y)
            worst = np.argsort(-np.abs(gap), kind="stable")[:n_disagreeing]
            ids = paired["sample_id"].to_list()
            detail["most_disagreeing"] = [
                {"sample_id": ids[i], a: float(x[i]), b: float(y[i]), "rank_gap": float(gap[i])} for i in worst if gap[i] != 0
            ]
        row["detail"] = detail
        rows.append(row)
    return rows
