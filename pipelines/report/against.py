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
    old_scores = _scores(lake, then_fp, versions.get("scores")) if "scores" in versions else pl.DataFrame()
    new_scores = _scores(lake, now_row["fingerprint"], None)
    rows = []
    keys = sorted({(r["metric"], r["model"]) for r in then.iter_rows(named=True)} | {(r["metric"], r["model"]) for r in now.iter_rows(named=True)})
    old_mean = {(r["metric"], r["model"]): r["mean"] for r in then.iter_rows(named=True)}
    new_mean = {(r["metric"], r["model"]): r["mean"] for r in now.iter_rows(named=True)}
    for metric, model in keys:
        a, b = old_mean.get((metric, model)), new_mean.get((metric, model))
        changed = added = removed = 0
        if old_scores.height and new_scores.height:
            o = old_scores.filter((pl.col("metric") == metric) & (pl.col("model") == model)).select("sample_id", pl.col("value").alias("old"))
            n = new_scores.filter((pl.col("metric") == metric) & (pl.col("model") == model)).select("sample_id", pl.col("value").alias("new"))
            both = o.join(n, on="sample_id", how="full", coalesce=True)
            added = both.filter(pl.col("old").is_null() & pl.col("new").is_not_null()).height
            removed = both.filter(pl.col("new").is_null() & pl.col("old").is_not_null()).height
            changed = both.filter(pl.col("old").is_not_null() & pl.col("new").is_not_null() & ((pl.col("old") - pl.col("new")).abs() > 1e-12)).height
        rows.append({"metric": metric, "model": model, "then": a, "now": b,
                     "difference": None if a is None or b is None else b - a,
                     "samples changed": changed, "samples added": added, "samples removed": removed})
    frame = pl.DataFrame(rows, schema={"metric": pl.String, "model": pl.String, "then": pl.Float64, "now": pl.Float64,
                                       "difference": pl.Float64, "samples changed": pl.Int64, "samples added": pl.Int64,
                                       "samples removed": pl.Int64})
    return frame, {"then": f"{name}@{then_fp[:12]}", "now": f"{name}@{now_row['fingerprint'][:12]}"}


__all__ = ["point_of", "verdict_against"]
