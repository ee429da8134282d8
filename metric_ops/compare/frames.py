"""Model comparison: constants, direction helpers, and splitting a scores frame into
per-sample, corpus-level and legacy rows.

Part of :mod:`metric_ops.compare` (the package face exports these names).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import polars as pl

from metric_ops.scoring.corpus import CorpusStatistics, CorpusStatisticsError


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
