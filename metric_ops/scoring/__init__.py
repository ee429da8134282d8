"""Applying metrics: the per-sample rules, corpus-level storage and worker processes.
No metric is defined here.

- :mod:`~metric_ops.scoring.frame`: the dispatchers the scores asset and the CLI call
  (:func:`score_frame`, :func:`score_rows`, :func:`score_columns`);
- :mod:`~metric_ops.scoring.rows`: missing fields, blank references, error isolation,
  declared ranges and the row encoding every path shares;
- :mod:`~metric_ops.scoring.corpus`: corpus-level scores stored with their segments'
  sufficient statistics (:class:`CorpusStatistics`);
- :mod:`~metric_ops.scoring.parallel`: the worker pool for parallel-safe metrics;
- :mod:`~metric_ops.scoring.suite`: many metrics over one set of samples.
"""

from metric_ops.scoring.frame import score_rows, score_columns, score_frame
from metric_ops.scoring.rows import (
    drop_blank_references,
    missing_fields,
    score_metric,
    detail_json,
    SCORE_FRAME_SCHEMA,
    local_columns,
    frame_of_rows,
    human_rating_rows,
)
from metric_ops.scoring.corpus import (
    mean_from_totals,
    AGGREGATES,
    CorpusStatisticsError,
    CorpusStatistics,
    is_corpus_level,
    corpus_score_rows,
)
from metric_ops.scoring.parallel import (
    LOG,
    WORKERS_ENV,
    MAX_CHUNK,
    MIN_CHUNK,
    Columns,
    ParallelConfigError,
    usable_cpus,
    requested_workers,
    configured_workers,
    rebuildable,
    planned_workers,
    shutdown_pool,
    chunk_bounds,
    map_chunks,
    parallel_columns,
)
from metric_ops.scoring.suite import NEURAL, PARALLEL_MIN_SCORES, plan_workers, score_suite

__all__ = [
    "score_rows",
    "score_columns",
    "score_frame",
    "drop_blank_references",
    "missing_fields",
    "score_metric",
    "detail_json",
    "SCORE_FRAME_SCHEMA",
    "local_columns",
    "frame_of_rows",
    "human_rating_rows",
    "mean_from_totals",
    "AGGREGATES",
    "CorpusStatisticsError",
    "CorpusStatistics",
    "is_corpus_level",
    "corpus_score_rows",
    "LOG",
    "WORKERS_ENV",
    "MAX_CHUNK",
    "MIN_CHUNK",
    "Columns",
    "ParallelConfigError",
    "usable_cpus",
    "requested_workers",
    "configured_workers",
    "rebuildable",
    "planned_workers",
    "shutdown_pool",
    "chunk_bounds",
    "map_chunks",
    "parallel_columns",
    "NEURAL",
    "PARALLEL_MIN_SCORES",
    "plan_workers",
    "score_suite",
]
