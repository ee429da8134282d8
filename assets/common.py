"""Shared wiring for the assets: samples <-> rows, provenance rows, metadata tables."""

from __future__ import annotations

import json
import os
import platform
from typing import Any, Iterable, Mapping

import dagster as dg
import polars as pl

from metric_ops.base import Sample, library_version
from resources.catalog import utcnow
from resources.lake import LakeStore

KEY_PACKAGES = ("facetlake", "dagster", "deltalake", "polars", "duckdb", "sacrebleu", "rouge-score", "nltk",
                "transformers", "sentence-transformers", "torch")


def run_mode() -> str:
    """``offline`` when FACETLAKE_OFFLINE is set to 1/true/yes, else ``online``."""
    return "offline" if os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes") else "online"


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change a number, plus Python's."""
    return {"python": platform.python_version(), **{p: library_version(p) for p in KEY_PACKAGES}}


def sample_rows(samples: Iterable[Sample], fingerprint: str, dataset: str, dataset_hash: str) -> list[dict[str, Any]]:
    """Rows for the ``samples`` table."""
    return [
        {
            "fingerprint": fingerprint,
            "dataset": dataset,
            "dataset_hash": dataset_hash,
            "position": i,
            "sample_id": s.sample_id,
            "input": s.input,
            "references": list(s.references),
            "context": list(s.context),
            "metadata": json.dumps(dict(s.metadata), ensure_ascii=False, default=str),
            "ratings": json.dumps({k: (None if v != v else v) for k, v in s.ratings.items()}),
        }
        for i, s in enumerate(samples)
    ]


def sample_frame(samples: list[Sample], fingerprint: str, dataset: str, dataset_hash: str) -> pl.DataFrame:
    """The rows of :func:`sample_rows` as one polars frame built column by column (what the
    ``samples`` asset writes: no dict per row). Empty metadata / ratings are ``{}``."""
    def meta(m: Any) -> str:
        return json.dumps(dict(m), ensure_ascii=False, default=str) if m else "{}"

    def rate(r: Any) -> str:
        return json.dumps({k: (None if v != v else v) for k, v in r.items()}) if r else "{}"

    n = len(samples)
    return pl.DataFrame({
        "fingerprint": [fingerprint] * n, "dataset": [dataset] * n, "dataset_hash": [dataset_hash] * n,
        "position": list(range(n)), "sample_id": [s.sample_id for s in samples], "input": [s.input for s in samples],
        "references": [list(s.references) for s in samples], "context": [list(s.context) for s in samples],
        "metadata": [meta(s.metadata) for s in samples], "ratings": [rate(s.ratings) for s in samples],
    }, schema_overrides={"position": pl.Int64, "references": pl.List(pl.String), "context": pl.List(pl.String)})


def samples_from_frame(frame: pl.DataFrame) -> list[Sample]:
    """Samples back from ``samples`` table rows (in stored order).

    Built from whole columns (no dict per row); empty ``metadata`` / ``ratings`` JSON
    (``{}``, the usual case) is not parsed."""
    if "position" in frame.columns:
        frame = frame.sort("position")
    columns = {name: frame.get_column(name).to_list() for name in ("sample_id", "input", "references", "context", "metadata", "ratings")}
    out = []
    for sample_id, text, references, context, metadata, ratings in zip(*columns.values()):
        out.append(
            Sample(
                sample_id=sample_id,
                input=text,
                references=tuple(references or ()),
                context=tuple(context or ()),
                metadata=json.loads(metadata) if metadata and metadata != "{}" else {},
                ratings={k: (float("nan") if v is None else float(v)) for k, v in json.loads(ratings).items()}
                if ratings and ratings != "{}" else {},
            )
        )
    return out


_SAMPLES_CACHE: dict[tuple, list[Sample]] = {}


def load_samples(lake: LakeStore, fingerprint: str) -> list[Sample]:
    """The stored samples of ``fingerprint``; raises a clear error when absent.

    Kept in memory per process for the table version read (keyed by the table's
    location, its Delta table id and version, and the fingerprint): one in-process run
    reads and decodes an evaluation's samples once, not once per asset (generations,
    annotations, scores, analysis). Any write to ``samples`` makes a new version, so a
    stale list is never returned. Callers get their own list; the Samples are frozen.
    """
    key = None
    if lake.exists("samples"):
        delta = lake.delta("samples")
        key = (lake.uri("samples"), delta.metadata().id, delta.version(), fingerprint)
        if key in _SAMPLES_CACHE:
            return list(_SAMPLES_CACHE[key])
    frame = lake.read("samples", where={"fingerprint": fingerprint})
    if frame.height == 0:
        raise dg.Failure(f"no samples stored for fingerprint {fingerprint[:12]}; materialise the samples asset for it first")
    samples = samples_from_frame(frame)
    if key is not None:
        _SAMPLES_CACHE.clear()  # one evaluation at a time: bounded memory
        _SAMPLES_CACHE[key] = samples
    return list(samples)


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
