"""lm-eval bridge: the ``lm_eval_summary`` rows, lm-eval's own aggregate beside facetlake's
recomputation of it from the stored per-sample scores.

Part of :mod:`resources.lm_eval` (the package face exports these names).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any
from resources.lm_eval.common import AGREEMENT_TOLERANCE, _RESULT_META, _number, canonical, metric_name


# --------------------------------------------------------------------------- summary
def _float_or_none(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def summary_rows(lake: Any, fingerprint: str, section: Mapping[str, Any], dataset: str) -> list[dict[str, Any]]:
    """``lm_eval_summary`` rows for one fingerprint: per model x lm-eval metric x filter,
    lm-eval's aggregate and stderr (from its results file, kept in the spec's
    ``lm_eval.runs``) next to facetlake's value, standard error and interval for the same
    numbers, read back from the lake.

    - ``mean`` aggregations: facetlake's value is the mean of the stored per-sample
      ``scores``, its standard error ``sd(ddof=1)/sqrt(n)`` (lm-eval's ``mean_stderr``), its
      interval :func:`metric_ops.stats.mean_interval` (Wilson for 0/1 values, percentile
      bootstrap otherwise; the comparisons table's interval);
    - other aggregations (corpus BLEU, perplexity, F1 over the corpus...): facetlake's value
      is lm-eval's own aggregation function (``lm_eval.api.registry.get_aggregation``)
      applied to the per-sample items stored in ``lm_eval_responses``; no interval.

    ``agrees``: both values within :data:`AGREEMENT_TOLERANCE` (1e-12) and, where both have
    one, both standard errors too; null when lm-eval reported no number.
    """
    import numpy as np
    import polars as pl

    from metric_ops import stats

    out: list[dict[str, Any]] = []
    for model, record in sorted((section.get("runs") or {}).items()):
        aggregates = dict(record.get("aggregates") or {})
        scores = lake.read("scores", where={"fingerprint": fingerprint, "model": model},
                           columns=["sample_id", "metric", "value", "status", "direction"])
        responses = lake.read("lm_eval_responses", where={"fingerprint": fingerprint, "model": model},
                              columns=["task", "filter", "metrics", "aggregations"])
        aggregations: dict[str, str] = {}
        for text in responses["aggregations"].unique().to_list() if responses.height else []:
            aggregations.update(json.loads(text or "{}"))
        task = str(section.get("task") or (responses["task"][0] if responses.height else ""))
        for key, raw_value in aggregates.items():
            if key in _RESULT_META or "," not in key or "_stderr," in key:
                continue
            metric, filt = key.split(",", 1)
            name = metric_name(metric, filt)
            rows = scores.filter(pl.col("metric") == name)
            aggregation = aggregations.get(metric, "mean")
            lm_value = _float_or_none(raw_value)
            lm_stderr = _float_or_none(aggregates.get(f"{metric}_stderr,{filt}"))
            values = rows.filter(pl.col("status") == "scored")["value"].to_numpy().astype(float)
            fl_value = fl_stderr = None
            interval = None
            note = None
            if aggregation == "mean" and rows.height and values.size == rows.height:
                fl_value = float(np.mean(values))
                fl_stderr = float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else None
                interval = stats.mean_interval(values)
            else:
                items = [json.loads(m)[metric] for m, f in zip(responses["metrics"].to_list(), responses["filter"].to_list())
                         if f == filt and metric in json.loads(m)]
                try:
                    from lm_eval.api.registry import get_aggregation

                    fn = get_aggregation(aggregation)
                    fl_value = _float_or_none(fn(items)) if fn is not None and items else None
                    note = (f"recomputed with lm-eval's {aggregation!r} aggregation over the {len(items)} stored per-sample items"
                            if fn is not None else f"lm-eval has no aggregation named {aggregation!r}")
                except ImportError:
                    note = "lm-eval is not installed here: the corpus-level aggregate was not recomputed"
            diff = abs(fl_value - lm_value) if fl_value is not None and lm_value is not None else None
            sdiff = abs(fl_stderr - lm_stderr) if fl_stderr is not None and lm_stderr is not None else None
            agrees = None if diff is None else bool(diff <= AGREEMENT_TOLERANCE and (sdiff is None or sdiff <= AGREEMENT_TOLERANCE))
            direction = rows["direction"][0] if rows.height else None
            out.append({
                "fingerprint": fingerprint, "dataset": dataset, "model": model, "task": task, "metric": name,
                "lm_eval_metric": key, "filter": filt, "aggregation": aggregation, "direction": direction,
                "lm_eval_value": lm_value, "lm_eval_stderr": lm_stderr, "facetlake_value": fl_value,
                "facetlake_stderr": fl_stderr, "ci_low": interval.low if interval else None,
                "ci_high": interval.high if interval else None, "ci_method": interval.method if interval else None,
                "n_scored": int(values.size), "n_total": int(rows.height), "abs_diff": diff, "stderr_abs_diff": sdiff,
                "agrees": agrees,
                "detail": canonical({"results_file": record.get("results_file"), "lm_eval_version": record.get("lm_eval_version"),
                                     **({"note": note} if note else {}),
                                     **({"interval_note": interval.note} if interval is not None and interval.note else {})}),
            })
    return out
