"""One way to declare a Delta asset (issue 27): partitions, deps, pool, kinds, the column
schema with the lake's true Arrow types, and the materialisation metadata every Delta asset
records (row count, Delta version, table name and path).

- :func:`delta_asset` wraps ``dg.asset`` for an asset that writes one Delta table;
- :func:`delta_multi_asset` wraps ``dg.multi_asset`` for one step that writes several;
- :func:`delta_spec` is the ``dg.AssetSpec`` of a Delta table that a multi-asset writes or
  that is written outside any asset (the catalog);
- :func:`table_schema` builds the ``dagster/column_schema`` of a table from
  :data:`resources.lake.schemas.SCHEMAS` (the Dagster UI shows these types);
- :func:`table_metadata` is what each materialisation of a Delta table records.

Dagster's ``ConfigurableIOManager`` was considered (as project_fully_featured does for
partitioned Parquet) and not used: the assets write by key (replace a partition's rows,
append keyed idempotent batches while a live backend generates), which an IO manager's
"return a frame, the manager writes it" shape cannot express without holding a whole
partition in memory, and lose the batches already stored when a live run is killed.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import dagster as dg
import pyarrow as pa

from resources.lake.schemas import SCHEMAS


def column_type(arrow_type: pa.DataType) -> str:
    """The type name shown in the Dagster UI for an Arrow type: ``string``, ``int64``,
    ``float64``, ``bool``, ``timestamp[us, UTC]``, ``list<string>`` (Arrow's own name for
    any other type)."""
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return "string"
    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_float64(arrow_type):
        return "float64"
    if pa.types.is_timestamp(arrow_type):
        return f"timestamp[{arrow_type.unit}{', ' + arrow_type.tz if arrow_type.tz else ''}]"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return f"list<{column_type(arrow_type.value_type)}>"
    return str(arrow_type)


def table_schema(table: str, descriptions: Mapping[str, str] | None = None) -> dg.TableSchema:
    """The ``dg.TableSchema`` of Delta table ``table``: every column of its contract in
    :data:`SCHEMAS`, in order, with its true type and the description given for it.

    Raises ``ValueError`` for a table without a contract, or a description naming a column
    the contract lacks (a stale description)."""
    if table not in SCHEMAS:
        raise ValueError(f"Delta table {table!r} has no contract in resources/lake/schemas.py SCHEMAS; add it there first")
    schema = SCHEMAS[table]
    descriptions = dict(descriptions or {})
    stale = sorted(set(descriptions) - set(schema.names))
    if stale:
        raise ValueError(f"column descriptions of {table!r} name columns its contract lacks: {stale}")
    return dg.TableSchema(columns=[dg.TableColumn(field.name, column_type(field.type), description=descriptions.get(field.name))
                                   for field in schema])


def _metadata(table: str, columns: Mapping[str, str] | None) -> dict[str, Any]:
    return {"delta_table": table, "dagster/table_name": table, "dagster/column_schema": table_schema(table, columns)}


def delta_spec(table: str, *, description: str, columns: Mapping[str, str] | None = None,
               partitions_def: dg.PartitionsDefinition | None = None, deps: Iterable[Any] = (), group_name: str = "evaluation",
               kinds: Iterable[str] = ()) -> dg.AssetSpec:
    """The asset spec of Delta table ``table`` (kinds ``delta`` plus ``kinds``, the column
    schema of :func:`table_schema`), for a multi-asset's outputs and the catalog tables."""
    return dg.AssetSpec(table, description=description, deps=list(deps), partitions_def=partitions_def, group_name=group_name,
                        kinds={"delta", *kinds}, metadata=_metadata(table, columns))


def _check_specs(asset: str, partitions_def: dg.PartitionsDefinition, checks: Mapping[str, str]) -> list[dg.AssetCheckSpec]:
    """``{check name: description}`` as check specs on ``asset``, partitioned like it: one
    result per partition, never one evaluation's result hiding another's."""
    return [dg.AssetCheckSpec(name, asset=asset, partitions_def=partitions_def, description=text) for name, text in checks.items()]


def delta_asset(table: str, *, partitions_def: dg.PartitionsDefinition, deps: Iterable[Any] = (), kinds: Iterable[str] = (),
                columns: Mapping[str, str] | None = None, checks: Mapping[str, str] | None = None,
                group_name: str = "evaluation", **kwargs: Any):  # noqa: ANN201 - dagster's asset decorator
    """``@dg.asset`` for the asset that writes Delta table ``table`` (the asset is named
    after it): partitioned by ``partitions_def``, in pool ``delta_<table>`` (one writer of
    a table at a time where the instance sets pool limits), kinds ``delta`` plus ``kinds``
    (the libraries the asset computes with), the true column schema, and its asset
    ``checks`` (``{name: description}``, partitioned like the asset)."""
    return dg.asset(name=table, partitions_def=partitions_def, deps=list(deps), group_name=group_name, kinds={"delta", *kinds},
                    pool=f"delta_{table}", check_specs=_check_specs(table, partitions_def, checks or {}),
                    metadata=_metadata(table, columns), **kwargs)


def delta_multi_asset(name: str, *, partitions_def: dg.PartitionsDefinition, specs: Iterable[dg.AssetSpec],
                      checks: Mapping[str, str] | None = None, **kwargs: Any):  # noqa: ANN201 - dagster's decorator
    """``@dg.multi_asset`` for one step that writes several Delta tables (``specs`` from
    :func:`delta_spec`), in pool ``delta_<name>``, not subsettable: the tables are written
    together, so they are materialised together (a job selecting one selects all).
    ``checks`` (``{name: description}``) are on the asset named ``name``."""
    return dg.multi_asset(name=name, partitions_def=partitions_def, specs=list(specs),
                          check_specs=_check_specs(name, partitions_def, checks or {}), pool=f"delta_{name}", can_subset=False,
                          **kwargs)


def table_metadata(lake: Any, table: str, rows: int, version: int | None = None) -> dict[str, Any]:
    """Materialisation metadata of Delta table ``table``: ``dagster/row_count`` (``rows``:
    the rows the asset's partition holds), ``delta_version`` (``version``, else the table's
    current one), ``dagster/table_name`` and ``dagster/uri`` (where the table lives)."""
    exists = lake.exists(table)
    return {"dagster/row_count": int(rows), "dagster/table_name": table,
            **({"delta_version": int(version if version is not None else lake.version(table))} if exists or version is not None else {}),
            "dagster/uri": dg.MetadataValue.path(lake.uri(table))}


__all__ = ["column_type", "delta_asset", "delta_multi_asset", "delta_spec", "table_metadata", "table_schema"]
