"""Read-only SQL over the lake with DuckDB, in process.

Every Delta table under the lake root is registered as a view of the same name from
``DeltaTable(...).to_pyarrow_dataset()`` (no DuckDB ``delta`` extension, which would be
downloaded at first use; projections and filters push down into the Arrow dataset).
Extension auto-install/auto-load is disabled, external file access is switched off and
the configuration locked, and any statement other than a query is refused.
"""


from typing import Any

import dagster as dg
import duckdb
import polars as pl

from resources.lake import LakeStore

# MULTI: DuckDB's expansion of a PIVOT without an IN list (a query over the distinct
# values, then the pivot); it cannot be typed directly (statements split on ';')
_READ_ONLY_TYPES = {"SELECT", "EXPLAIN", "MULTI"}


class SQLRefusedError(ValueError):
    """The statement would write or is not a query."""


def connect(lake: LakeStore) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per Delta table under ``lake``.

    Datasets are frozen at the version current now: open a new connection after writes.
    """
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for table in lake.tables():
        con.register(table, lake.delta(table).to_pyarrow_dataset())
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`SQLRefusedError` unless every statement in ``sql`` is a query."""
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
                f"refused this {kind} statement: `facetlake sql` is read-only (SELECT / WITH / EXPLAIN / PIVOT); "
                "tables change only through the pipeline (`facetlake run`, `facetlake score`)"
            )


def _polars_compatible(table: Any) -> Any:
    """Arrow table with DuckDB INTERVAL columns (Arrow month_day_nano_interval, which
    polars cannot read) made readable: a duration when no value has a month part (a month
    has no fixed length), otherwise DuckDB's own text ("1 month 3 days 01:00:00")."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if field.type != pa.month_day_nano_interval():
            continue
        values = table.column(i).to_pylist()
        if all(v is None or v.months == 0 for v in values):
            column = pa.array([None if v is None else v.days * 86_400_000_000 + v.nanoseconds // 1000 for v in values], pa.int64())
            column = column.cast(pa.duration("us"))
        else:
            column = pa.array([None if v is None else _interval_text(v.months, v.days, v.nanoseconds) for v in values], pa.string())
        table = table.set_column(i, field.name, column)
    return table


def _interval_text(months: int, days: int, nanoseconds: int) -> str:
    years, months = divmod(months, 12)
    parts = [f"{n} {unit}{'s' if abs(n) != 1 else ''}" for n, unit in ((years, "year"), (months, "month"), (days, "day")) if n]
    if nanoseconds or not parts:
        sign = "-" if nanoseconds < 0 else ""
        seconds, nanos = divmod(abs(nanoseconds), 1_000_000_000)
        hours, seconds = divmod(seconds, 3600)
        minutes, seconds = divmod(seconds, 60)
        clock = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{nanos // 1000:06d}" if nanos else "")
        parts.append(clock)
    return " ".join(parts)


def query(lake: LakeStore, sql: str) -> pl.DataFrame:
    """Run a read-only query over the lake and return the result as polars.

    Raises :class:`SQLRefusedError` for anything but a query, ``duckdb.Error`` for a
    query DuckDB rejects. INTERVAL results come back as durations (or as text when they
    hold months)."""
    con = connect(lake)
    try:
        check_read_only(con, sql)
        return pl.from_arrow(_polars_compatible(con.sql(sql).to_arrow_table()))
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
