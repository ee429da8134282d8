"""Today's verdict beside an earlier one (issue 31, ``facetlake compare --against``).

The earlier verdict is read by Delta time travel (:mod:`resources.sql.timetravel`): the
``evaluations`` table as it was names the evaluation's fingerprint then, and the
``comparisons`` and ``scores`` tables at their versions of that moment hold its verdict and
its per-sample scores. Nothing is recomputed: the earlier means are the stored ones.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from resources.catalog import CatalogError, evaluation_row
from resources.lake.resource import LakeStore
from resources.sql.timetravel import AsOf, AsOfError, parse_moment, resolve_as_of


def point_of(lake: LakeStore, against: str) -> AsOf:
    """The lake's state ``against`` names: ``TABLE=VERSION``, a timestamp, or a run id (a
    unique prefix). Raises :class:`AsOfError` naming the fix."""
    tables = lake.tables()
    text = against.strip()
    if "=" in text:
        return resolve_as_of(lake, tables, [text])
    try:
        parse_moment(text)
    except AsOfError:
        return resolve_as_of(lake, tables, run=text)
    return resolve_as_of(lake, tables, [text])


_SCORE_SCHEMA = {"model": pl.String, "metric": pl.String, "sample_id": pl.String, "value": pl.Float64}


def _scores(lake: LakeStore, fingerprint: str, version: int | None) -> pl.DataFrame:
    frame = lake.read("scores", where={"fingerprint": fingerprint}, version=version)
    return frame.filter((pl.col("status") == "scored") & pl.col("value").is_not_null()).select("model", "metric", "sample_id", "value")


def verdict_against(lake: LakeStore, evaluation: str, point: AsOf) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Per (score name, model): the earlier mean (as stored then), today's mean, the
    difference, and how many samples' scores changed, appeared or disappeared; plus
    ``{"then": name@fp12, "now": name@fp12}``. Raises :class:`CatalogError` when the
    evaluation had no verdict at that point."""
    now_row = evaluation_row(lake, evaluation)
    name = now_row["name"]
    versions = point.versions
    if "comparisons" not in versions or "evaluations" not in versions:
        raise CatalogError(f"{name!r} had no verdict yet at that point ({point.described}); pick a later run or moment")
    evals = lake.read("evaluations", where={"name": name}, version=versions["evaluations"])
    current = evals.filter(pl.col("status") == "current") if evals.height else evals
    if current.height == 0:
        raise CatalogError(f"{name!r} was not registered at that point ({point.described})")
    then_fp = current["fingerprint"][0]
    then = lake.read("comparisons", where={"fingerprint": then_fp, "kind": "model_metric"}, version=versions["comparisons"])
    if then.height == 0:
        raise CatalogError(f"{name}@{then_fp[:12]} had no comparisons at that point ({point.described}); pick a later run or moment")
    now = lake.read("comparisons", where={"fingerprint": now_row["fingerprint"], "kind": "model_metric"})
    key = ["metric", "model"]
    means = (then.select(*key, pl.col("mean").alias("then"))
             .join(now.select(*key, pl.col("mean").alias("now")), on=key, how="full", coalesce=True))
    # per-sample scores then and now, joined once: a sample's score changed, appeared or disappeared
    old = (_scores(lake, then_fp, versions["scores"]) if "scores" in versions else pl.DataFrame(schema=_SCORE_SCHEMA)).rename({"value": "old"})
    new = _scores(lake, now_row["fingerprint"], None).rename({"value": "new"})
    counts = (old.join(new, on=[*key, "sample_id"], how="full", coalesce=True)
              .group_by(key).agg(
                  (pl.col("old").is_not_null() & pl.col("new").is_not_null() & ((pl.col("old") - pl.col("new")).abs() > 1e-12))
                  .sum().alias("samples changed"),
                  (pl.col("old").is_null() & pl.col("new").is_not_null()).sum().alias("samples added"),
                  (pl.col("new").is_null() & pl.col("old").is_not_null()).sum().alias("samples removed")))
    if old.height == 0 or new.height == 0:  # one side without stored scores: nothing to count per sample
        counts = counts.with_columns(pl.lit(0).alias(c) for c in ("samples changed", "samples added", "samples removed"))
    frame = (means.join(counts, on=key, how="left")
             .with_columns((pl.col("now") - pl.col("then")).alias("difference"),
                           *(pl.col(c).fill_null(0).cast(pl.Int64) for c in ("samples changed", "samples added", "samples removed")))
             .select(*key, "then", "now", "difference", "samples changed", "samples added", "samples removed")
             .sort(key))
    return frame, {"then": f"{name}@{then_fp[:12]}", "now": f"{name}@{now_row['fingerprint'][:12]}"}


__all__ = ["point_of", "verdict_against"]
