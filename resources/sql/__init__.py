"""Read-only SQL over the lake with DuckDB, in process, with bounded cost (``facetlake sql``,
``facetlake query``).

- :mod:`~resources.sql.query`: the hardened connection, the read-only statement check, the
  limits (:class:`SQLLimits`) and :func:`query`;
- :mod:`~resources.sql.views`: each Delta table as a view, without DuckDB's ``delta`` extension;
- :mod:`~resources.sql.timetravel`: the table versions an earlier point of the lake names
  (``facetlake sql --as-of`` / ``--run``, issue 31);

The SQL code imports no Dagster: ``facetlake sql`` starts without it. No asset reads through
SQL, so no Dagster resource wraps it (issue 27: no resource that no asset uses).
"""

from resources.sql.query import (
    MEMORY_ENV,
    RAW_TABLES,
    THREADS_ENV,
    TIMEOUT_ENV,
    Connection,
    SQLLimitError,
    SQLLimits,
    SQLRefusedError,
    check_read_only,
    connect,
    main_verb,
    parse_size,
    query,
)
from resources.sql.timetravel import AsOf, AsOfError, resolve_as_of
from resources.sql.views import create_view, native_delta

__all__ = [
    "AsOf",
    "AsOfError",
    "MEMORY_ENV",
    "RAW_TABLES",
    "THREADS_ENV",
    "TIMEOUT_ENV",
    "Connection",
    "SQLLimitError",
    "SQLLimits",
    "SQLRefusedError",
    "check_read_only",
    "connect",
    "create_view",
    "main_verb",
    "native_delta",
    "parse_size",
    "query",
    "resolve_as_of",
]
