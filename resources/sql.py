"""Read-only SQL over the lake with DuckDB, in process.

Every Delta table under the lake root is registered as a view of the same name from
``DeltaTable(...).to_pyarrow_dataset()`` (no DuckDB ``delta`` extension, which would be
downloaded at first use; projections and filters push down into the Arrow dataset).
For a local lake the dataset reads through pyarrow's native local filesystem rather than
deltalake's default Python-implemented one: with the latter, Arrow's IO threads still
reading ahead when DuckDB stops early (``limit 1``) call into Python while the
interpreter shuts down, and the process segfaults, aborts or hangs after printing.
Extension auto-install/auto-load is disabled, external file access is switched off and
the configuration locked, and any statement other than a query is refused.
"""


import re
from typing import Any

import dagster as dg
import duckdb
import polars as pl

from resources.lake import LakeStore

# MULTI: DuckDB's expansion of a PIVOT without an IN list (a query over the distinct
# values, then the pivot); it cannot be typed directly (statements split on ';')
_READ_ONLY_TYPES = {"SELECT", "EXPLAIN", "MULTI"}
# leading whitespace and SQL comments, then the statement's first keyword
_FIRST_KEYWORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*([A-Za-z]+)", re.S)


class SQLRefusedError(ValueError):
    """The statement would write or is not a query."""


def _local_filesystem(uri: str) -> Any:
    """pyarrow's native filesystem rooted at the table folder ``uri``, or None when the
    table is not on the local filesystem (deltalake's own filesystem is used then)."""
    import pyarrow.fs as pa_fs

    if "://" not in uri:
        filesystem, path = pa_fs.LocalFileSystem(), uri
    elif uri.startswith("file://"):
        filesystem, path = pa_fs.FileSystem.from_uri(uri)
    else:
        return None
    # deltalake names each data file relative to the table root, percent-decoded
    return pa_fs.SubTreeFileSystem(path, filesystem)


def _dataset(lake: LakeStore, table: str) -> Any:
    """Arrow dataset over the current version of ``table`` (see the module docstring)."""
    delta = lake.delta(table)
    filesystem = _local_filesystem(lake.uri(table))
    return delta.to_pyarrow_dataset(filesystem=filesystem) if filesystem is not None else delta.to_pyarrow_dataset()


def connect(lake: LakeStore) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per Delta table under ``lake``.

    Datasets are frozen at the version current now: open a new connection after writes.
    Raises ``deltalake`` errors for a table that cannot be read.
    """
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for table in lake.tables():
        con.register(table, _dataset(lake, table))
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`SQLRefusedError` unless every statement in ``sql`` is a query
    (or when ``sql`` does not parse or is empty)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SQLRefusedError(f"could not parse SQL: {exc}") from None
    if not statements:
        raise SQLRefusedError("no SQL statement given")
    for stmt in statements:
        kind = stmt.type.name
        if kind not in _READ_ONLY_TYPES:
            raise SQLRefusedError(
                f"refused this {_statement_label(stmt.query, kind)} statement: `facetlake sql` is read-only "
                "(SELECT / WITH / EXPLAIN / PIVOT); tables change only through the pipeline "
                "(`facetlake run`, `facetlake score`)"
            )


def _statement_label(text: str, kind: str) -> str:
    """The statement's own first keyword (INSTALL, BEGIN, USE), or DuckDB's statement
    type where that says more (a WITH ... INSERT is an INSERT)."""
    match = _FIRST_KEYWORD.match(text or "")
    word = match.group(1).upper() if match else ""
    return kind if word in ("", "WITH", kind) else word


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


def _intervals_as_text(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
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


def query(lake: LakeStore, sql: str) -> pl.DataFrame:
    """Run a read-only query over the lake and return the result as polars.

    Raises :class:`SQLRefusedError` for anything but a query, ``duckdb.Error`` for a
    query DuckDB rejects. INTERVAL values (also inside lists and structs) come back as
    DuckDB's text, e.g. "3 days", "-1 month"."""
    con = connect(lake)
    try:
        check_read_only(con, sql)
        rel = con.sql(sql)
        if rel is None:  # defensive: every read-only statement type yields a relation
            return pl.DataFrame()
        return pl.from_arrow(_intervals_as_text(rel).to_arrow_table())
    finally:
        con.close()


class DuckDBReader(dg.ConfigurableResource):
    """Dagster resource: read-only DuckDB over the lake's Delta tables."""

    lake: dg.ResourceDependency[LakeStore]

    def query(self, sql: str) -> pl.DataFrame:
        """Result of a read-only query (see :func:`query`)."""
        return query(self.lake, sql)

    def scalar(self, sql: str) -> Any:
        """First column of the first row."""
        frame = self.query(sql)
        return frame.item(0, 0) if frame.height else None
