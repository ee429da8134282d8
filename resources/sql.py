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

_READ_ONLY_TYPES = {"SELECT", "EXPLAIN"}


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
                f"refused a {kind} statement: `facetlake sql` is read-only (SELECT / WITH / EXPLAIN); "
                "tables change only through the pipeline (`facetlake run`, `facetlake score`)"
            )


def query(lake: LakeStore, sql: str) -> pl.DataFrame:
    """Run a read-only query over the lake and return the result as polars."""
    con = connect(lake)
    try:
        check_read_only(con, sql)
        return pl.from_arrow(con.sql(sql).to_arrow_table())
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
