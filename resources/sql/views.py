"""Views of local Delta tables read by DuckDB's own Parquet reader (``facetlake sql``).

A local lake's table is registered as a view over the Parquet files of its current Delta
version: ``read_parquet([...], hive_partitioning = true, union_by_name = true)`` with the
columns in the Delta schema's order, a column no file holds yet (added to the schema
later) as a typed NULL, and partition values decoded from the Hive paths as text.

Why not the Arrow dataset (the remote-lake path, :func:`resources.sql.register_tables`):

- files written by different facetlake versions store text as Arrow ``string`` or
  ``string_view``; a filter pushed into an Arrow dataset that mixes them fails
  ("Function 'equal' has no kernel matching input types (string, string_view)"), while
  DuckDB reads both as VARCHAR;
- DuckDB plans with the files' statistics (an Arrow dataset gives it none), and the
  command loads neither ``pyarrow.dataset`` nor pandas (which it imports), which matters
  for ``facetlake sql``'s start-up.

Delta features this reading relies on being absent: deletion vectors and column mapping
(delta-rs writes neither; :func:`native_delta` checks the table's protocol and falls
back to the Arrow dataset otherwise). Remote (``s3://``...) lakes use the Arrow dataset:
DuckDB would need its ``httpfs`` extension, a download.
"""

from __future__ import annotations

from typing import Any

from resources.lake.tables import local_table_files


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duck_type(arrow_type: Any) -> str | None:
    """DuckDB's name for a plain Arrow type (None for one without a plain mapping here)."""
    import pyarrow as pa

    simple = {pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.string_view(): "VARCHAR", pa.int64(): "BIGINT",
              pa.int32(): "INTEGER", pa.float64(): "DOUBLE", pa.float32(): "FLOAT", pa.bool_(): "BOOLEAN",
              pa.binary(): "BLOB", pa.date32(): "DATE"}
    if arrow_type in simple:
        return simple[arrow_type]
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP WITH TIME ZONE" if arrow_type.tz else "TIMESTAMP"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        inner = duck_type(arrow_type.value_type)
        return f"{inner}[]" if inner else None
    return None


def _null_columns(con: Any, schema: Any, names: list[str]) -> dict[str, str]:
    """``name -> CAST(NULL AS type) AS name`` for columns no file holds."""
    types = {name: duck_type(schema.field(name).type) for name in names}
    if None in types.values():  # an unusual type: ask DuckDB (it imports pandas for an Arrow object: only then)
        empty = con.from_arrow(schema.empty_table())
        types.update({n: str(t) for n, t in zip(empty.columns, empty.types) if types.get(n) is None and n in types})
    return {name: f"CAST(NULL AS {t}) AS {_ident(name)}" for name, t in types.items()}


def native_delta(lake: Any, table: str, version: int | None = None) -> Any | None:
    """The ``DeltaTable`` of ``table`` (current, or at ``version``) when it can be read from
    its Parquet files directly (a local table whose protocol needs no reader feature: reader
    version 1; deletion vectors and column mapping need a higher one), else None."""
    uri = lake.uri(table)
    if "://" in uri and not uri.startswith("file://"):
        return None
    delta = lake._read_delta(table, version)
    return delta if int(delta.protocol().min_reader_version) <= 1 else None


def create_view(con: Any, delta: Any, table: str) -> list[str]:
    """Create the view ``table`` on ``con`` over the version ``delta`` is at (from
    :func:`native_delta`); returns the file paths it reads (the connection's allowed paths
    must include them)."""
    import pyarrow as pa

    schema = pa.schema(delta.schema().to_arrow())
    files = local_table_files(delta)  # as on disk: a lake folder named "my lake" is not "my%20lake"
    if not files:  # created empty (resources/lake/commit.py): the columns, no rows
        nulls = _null_columns(con, schema, schema.names)
        con.execute(f"CREATE VIEW {_ident(table)} AS SELECT {', '.join(nulls[n] for n in schema.names)} WHERE false")
        return []
    source = (f"read_parquet([{', '.join(_sql_string(f) for f in files)}], hive_partitioning = true, "
              "hive_types_autocast = false, union_by_name = true)")
    present = set(con.sql(f"SELECT * FROM {source} LIMIT 0").columns)
    nulls = _null_columns(con, schema, [name for name in schema.names if name not in present])
    columns = [nulls.get(name, _ident(name)) for name in schema.names]
    con.execute(f"CREATE VIEW {_ident(table)} AS SELECT {', '.join(columns)} FROM {source}")
    return files
