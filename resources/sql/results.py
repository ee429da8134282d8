"""Reading a DuckDB result back: INTERVAL columns as text, Arrow batches with DuckDB's
interrupt raised as an interrupt (used by :mod:`resources.sql.query`)."""

from __future__ import annotations

from typing import Any

import duckdb


def _has_interval(duck_type: Any) -> bool:
    """Whether a DuckDB type is INTERVAL or nests one (list, array, struct, map, union)."""
    if duck_type.id == "interval":
        return True
    try:
        children = duck_type.children
    except Exception:  # noqa: BLE001 - primitive types have no children
        return False
    return any(isinstance(child, type(duck_type)) and _has_interval(child) for _, child in children)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def intervals_as_text(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """``rel`` with every column holding INTERVALs (top-level or nested) cast to DuckDB's
    own text ("3 days", "-1 month", "[3 days]"): polars cannot read Arrow's
    month_day_nano_interval, and a month has no fixed length to make a duration of."""
    types = rel.types
    if not any(_has_interval(t) for t in types):
        return rel
    # positional references (#n) keep duplicate and oddly quoted column names intact
    exprs = [
        f"CAST(#{i} AS VARCHAR) AS {_quote(name)}" if _has_interval(t) else f"#{i} AS {_quote(name)}"
        for i, (name, t) in enumerate(zip(rel.columns, types), start=1)
    ]
    return rel.project(", ".join(exprs))


def batches_of(reader: Any) -> Any:
    """The reader's batches; DuckDB's interrupt while Arrow reads surfaces as an OSError
    ("INTERRUPT Error"), raised here as the interrupt it is."""
    try:
        yield from reader
    except OSError as exc:
        if "INTERRUPT" in str(exc).upper():
            raise duckdb.InterruptException(str(exc)) from None
        raise
