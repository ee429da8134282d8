"""The ``summary`` asset: per model x metric mean and counts, one partition per fingerprint."""


import dagster as dg
import polars as pl

from assets.analysis_common import reads_record
from assets.common import evaluation_fingerprint, markdown_table, record_run
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from resources.catalog import evaluation_row, utcnow
from resources.lake import LakeStore


def summarize(scores: pl.DataFrame) -> pl.DataFrame:
    """Per (dataset, model, metric): mean of scored values, n scored / unscored / error / total."""
    return (
        scores.group_by(["fingerprint", "dataset", "model", "metric"])
        .agg(
            pl.col("direction").first(),
            pl.col("value").filter(pl.col("status") == "scored").mean().alias("mean"),
            (pl.col("status") == "scored").sum().cast(pl.Int64).alias("n_scored"),
            (pl.col("status") == "unscored").sum().cast(pl.Int64).alias("n_unscored"),
            (pl.col("status") == "error").sum().cast(pl.Int64).alias("n_error"),
            pl.len().cast(pl.Int64).alias("n_total"),
        )
        .sort(["dataset", "model", "metric"])
    )


@dg.asset(
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE)],
    group_name="evaluation",
    kinds={"delta", "duckdb"},
    pool="delta_summary",
    metadata={"delta_table": "summary"},
)
def summary(context: dg.AssetExecutionContext, lake: LakeStore) -> dg.MaterializeResult:
    """Per model x metric mean, n scored and n total for one fingerprint, across every model evaluated under it."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    row = evaluation_row(lake, fingerprint)
    scores_version = lake.version("scores")
    scores = lake.read("scores", where={"fingerprint": fingerprint})
    frame = summarize(scores)
    frame = frame.with_columns(pl.lit(context.run_id).alias("run_id"))
    version = lake.replace("summary", frame, {"fingerprint": fingerprint})
    record_run(
        lake, context, asset="summary", table="summary", version=version, rows=frame.height, started_at=started,
        fingerprint=fingerprint, dataset=row["dataset"],
        provenance={"read": {"scores": scores_version}, "reads": reads_record(fingerprint, {"scores": scores_version}, scores)},
    )
    return dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint,
            "dataset": row["dataset"],
            "dagster/row_count": frame.height,
            "models": ", ".join(sorted(set(frame["model"].to_list()))) if frame.height else "",
            "summary": dg.MetadataValue.md(markdown_table(frame.select("model", "metric", "mean", "n_scored", "n_total"))),
            "delta_version": version,
        }
    )
