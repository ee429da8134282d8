"""Shared wiring for the assets: samples <-> rows, provenance rows, metadata tables."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import dagster as dg
import polars as pl

from metric_ops.base import Sample
from resources.catalog import utcnow
from resources.lake.resource import LakeStore
from resources.lake.sample_codec import SamplesMissingError, load_stored_samples, package_versions

def run_mode() -> str:
    """``offline`` when FACETLAKE_OFFLINE is set to 1/true/yes, else ``online``."""
    return "offline" if os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes") else "online"


def load_samples(lake: LakeStore, fingerprint: str) -> list[Sample]:
    """The stored samples of ``fingerprint`` (resources/lake/sample_codec.py), cached per table
    version; a missing partition is a ``dg.Failure`` naming the step to run first."""
    try:
        return load_stored_samples(lake, fingerprint)
    except SamplesMissingError as exc:
        raise dg.Failure(str(exc)) from None


def record_run(
    lake: LakeStore,
    context: dg.AssetExecutionContext,
    *,
    asset: str,
    table: str,
    version: int | None,
    rows: int,
    started_at,
    model: str | None = None,
    fingerprint: str | None = None,
    dataset: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """Append the provenance row of one asset materialisation to ``runs``."""
    lake.append(
        "runs",
        [
            {
                "run_id": context.run_id,
                "asset": asset,
                "model": model,
                "fingerprint": fingerprint,
                "dataset": dataset,
                "table_name": table,
                "table_version": version,
                "rows": rows,
                "started_at": started_at,
                "finished_at": utcnow(),
                "mode": run_mode(),
                "provenance": json.dumps({"packages": package_versions(), **(provenance or {})}, default=str, sort_keys=True),
            }
        ],
    )


def markdown_table(frame: pl.DataFrame, float_digits: int = 4) -> str:
    """A Markdown table of ``frame`` for materialisation metadata."""
    if frame.height == 0:
        return "_no rows_"
    header = "| " + " | ".join(frame.columns) + " |"
    sep = "| " + " | ".join("---" for _ in frame.columns) + " |"
    lines = [header, sep]
    for row in frame.iter_rows():
        cells = [f"{v:.{float_digits}f}" if isinstance(v, float) else ("" if v is None else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def partition_parts(context: dg.AssetExecutionContext, writing: bool = True) -> tuple[str, str]:
    """(model, fingerprint) of the current pair partition (``name@fp12:model``), looked up in
    the catalog. Raises ``dg.Failure`` when the key is not a registered pair, or (when
    ``writing``) when it is history or archived: those rows are read-only."""
    from resources.catalog import CatalogError, pair_row

    lake = context.resources.lake
    try:
        row = pair_row(lake, str(context.partition_key))
    except CatalogError as exc:
        raise dg.Failure(str(exc)) from None
    if writing and row["status"] != "current":
        raise dg.Failure(
            f"partition {context.partition_key} is {row['status']} (evaluation {row['evaluation']} has moved on or is archived); "
            "its stored rows are kept read-only. Materialise the evaluation's current partitions instead (`facetlake evaluations`)"
        )
    return row["model"], row["fingerprint"]


def evaluation_fingerprint(context: dg.AssetExecutionContext) -> str:
    """The 64-hex fingerprint of the current evaluation partition (``name@fp12``)."""
    from resources.catalog import CatalogError, evaluation_row

    try:
        return evaluation_row(context.resources.lake, str(context.partition_key))["fingerprint"]
    except CatalogError as exc:
        raise dg.Failure(str(exc)) from None
