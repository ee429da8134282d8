"""The ``scores.params`` column for rows that lack it.

``params`` (JSON ``{"metric": registry name, "version", "params": {key: text}}``,
:mod:`metric_ops.identity`) was added to the scores contract after lakes had been
written without it. A stored table lacking the column gets it on its next write
(``resources.lake.schemas.ADDED_COLUMNS``, ``resources.lake.commit.ensure_table``), with
null in the rows already there; a writer that supplies no ``params`` (an older caller)
gets it filled from the row's signature before the write. Reading fills every null (or
absent) ``params`` from the signature through the one parser,
:func:`metric_ops.identity.parse_signature`, so every reader sees the column filled.

Each distinct signature is parsed once per call, never once per row.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import polars as pl
import pyarrow as pa

from metric_ops.identity import signature_params_json

__all__ = ["fill_params", "fill_params_arrow", "fill_params_rows"]


def _lookup(signatures: Sequence[Any]) -> dict[str, str]:
    """``{signature: params JSON}`` for the distinct non-empty signatures given."""
    return {s: signature_params_json(s) for s in set(signatures) if isinstance(s, str) and s.strip()}


def fill_params(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its ``params`` column present and every null in it filled from the
    row's ``signature`` (null stays null where the signature is null or empty). A frame
    without a ``signature`` column is returned unchanged."""
    if "signature" not in frame.columns:
        return frame
    if "params" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.String).alias("params"))
    todo = frame.filter(pl.col("params").is_null())["signature"].unique().to_list()
    if not todo:
        return frame
    lookup = _lookup(todo)
    parsed = pl.col("signature").replace_strict(list(lookup), list(lookup.values()), default=None, return_dtype=pl.String)
    return frame.with_columns(pl.coalesce(pl.col("params"), parsed).alias("params"))


def fill_params_arrow(data: pa.Table) -> pa.Table:
    """:func:`fill_params` for an Arrow table (column order kept; ``params`` appended when absent)."""
    if "signature" not in data.column_names:
        return data
    if "params" in data.column_names and data.column("params").null_count == 0:
        return data
    filled = fill_params(pl.from_arrow(data))  # type: ignore[arg-type]
    column = filled["params"].to_arrow().cast(pa.string())
    if "params" in data.column_names:
        return data.set_column(data.column_names.index("params"), "params", column)
    return data.append_column("params", column)


def fill_params_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Score rows (dicts) with ``params`` set from the signature where absent or None."""
    lookup = _lookup([r.get("signature") for r in rows if r.get("params") is None])
    return [r if r.get("params") is not None else {**r, "params": lookup.get(r.get("signature"))}  # type: ignore[arg-type]
            for r in rows]
