"""Score a metric over a batch: the dispatchers the scores asset, the CLI and the tests call.

- :func:`score_rows`: rows for the scores table (dicts), per sample or, for a corpus-level
  metric, one corpus row per score name (:func:`metric_ops.scoring.corpus.corpus_score_rows`);
- :func:`score_columns`: the per-sample columns, in this process or in worker processes
  when the metric is parallel-safe and the work pays for them (:mod:`metric_ops.scoring.parallel`);
- :func:`score_frame`: the rows of :func:`score_rows` as one polars frame, built column by column.

The per-sample rules (missing fields, blank references, error isolation, declared ranges)
are :func:`metric_ops.scoring.rows.score_metric`'s; this module only dispatches, so the
modules it dispatches to (corpus rows, worker processes) import what they share from
:mod:`metric_ops.scoring.rows`, below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from metric_ops.base import Metric, Sample, Score, check_lengths
from metric_ops.identity import metric_params_json
from metric_ops.scoring.corpus import corpus_score_rows
from metric_ops.scoring import parallel  # called through the module: tests count the calls sent to workers
from metric_ops.scoring.rows import SCORE_FRAME_SCHEMA, detail_json, frame_of_rows, local_columns, score_metric

if TYPE_CHECKING:
    import polars as pl


def score_rows(
    metric: Metric,
    samples: Sequence[Sample],
    outputs: Sequence[str | None],
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Rows for the scores table: one per sample x emitted score name.

    Each row has ``sample_id, metric, value, direction, dimension, locality, status,
    detail (JSON string), signature, params`` (the metric's identity as JSON,
    :func:`metric_ops.identity.metric_params_json`); the caller adds model, fingerprint
    and dataset.
    A corpus-level metric gives one corpus row per score name (``sample_id`` None) and
    rows only for its unscored/errored segments (:func:`metric_ops.scoring.corpus.corpus_score_rows`).
    """
    results = score_metric(metric, samples, outputs, **kwargs)
    if getattr(metric, "corpus_level", False):
        return corpus_score_rows(metric, samples, results)
    directions = metric.emitted()
    signature, params = metric.signature(), metric_params_json(metric)
    rows = []
    for sample, scores in zip(samples, results):
        for score_name, direction in directions.items():
            score = scores.get(score_name) or Score.error(f"{metric.name} produced no {score_name} score")
            rows.append(
                {
                    "sample_id": sample.sample_id,
                    "metric": score_name,
                    "value": score.value,
                    "direction": direction.value,
                    "dimension": metric.dimension,
                    "locality": metric.locality,
                    "status": score.status,
                    "detail": detail_json(score.detail),
                    "signature": signature,
                    "params": params,
                }
            )
    return rows


def score_columns(
    metric: Metric,
    samples: Sequence[Sample],
    outputs: Sequence[str | None],
    batch_size: int = 256,
    progress: Callable[[int], Any] | None = None,
    workers: int | None = None,
) -> dict[str, tuple[list, list, list]]:
    """The columns of :func:`local_columns`, scored by worker processes when the metric is
    parallel-safe and the work pays for them (:func:`metric_ops.scoring.parallel.planned_workers`;
    ``workers=1`` keeps it in process). Values, statuses and details are the same either
    way. Raises ``ValueError`` when the lengths differ."""
    check_lengths(samples, outputs)
    n = parallel.planned_workers(metric, len(samples), workers)
    if n > 1:
        return parallel.parallel_columns(metric, samples, outputs, batch_size, n, progress)
    return local_columns(metric, samples, outputs, batch_size, progress)


def score_frame(
    metric: Metric,
    samples: Sequence[Sample],
    outputs: Sequence[str | None],
    batch_size: int = 256,
    progress: Callable[[int], Any] | None = None,
    workers: int | None = None,
) -> "pl.DataFrame":
    """The rows of :func:`score_rows` as one polars frame, built column by column.

    Same columns, values and order as :func:`score_rows` (one row per sample x emitted
    score name, in sample order then score-name order), without a Python dict per row:
    what the scores asset writes at 100k+ samples. Constant columns (direction,
    dimension, locality, signature) are built once per score name, not per row. A
    parallel-safe metric over many samples is scored by worker processes
    (:func:`score_columns`; ``workers`` as there). Raises what :func:`score_metric`
    raises (length mismatch).
    """
    import polars as pl

    if getattr(metric, "corpus_level", False):
        return frame_of_rows(score_rows(metric, samples, outputs, batch_size=batch_size, progress=progress))
    columns = score_columns(metric, samples, outputs, batch_size=batch_size, progress=progress, workers=workers)
    signature, params = metric.signature(), metric_params_json(metric)
    sample_ids = [s.sample_id for s in samples]
    parts = []
    for score_name, direction in metric.emitted().items():
        values, statuses, details = columns[score_name]
        parts.append(pl.DataFrame({
            "sample_id": sample_ids,
            "value": values,
            "status": statuses,
            "detail": details,
            "_order": range(len(values)),
        }, schema_overrides={"value": pl.Float64, "sample_id": pl.String, "_order": pl.Int64}).with_columns(
            metric=pl.lit(score_name), direction=pl.lit(direction.value), dimension=pl.lit(metric.dimension),
            locality=pl.lit(metric.locality), signature=pl.lit(signature), params=pl.lit(params), _name=pl.lit(len(parts)),
        ))
    if not parts:
        return frame_of_rows([])
    frame = pl.concat(parts, how="vertical").sort(["_order", "_name"]) if len(parts) > 1 else parts[0]
    return frame.select(list(SCORE_FRAME_SCHEMA))
