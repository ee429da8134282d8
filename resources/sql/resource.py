"""``DuckDBReader``: read-only SQL over the lake (:func:`resources.sql.query`) as a Dagster
resource, beside the SQL code it wraps (the SQL code itself imports no Dagster, so
``facetlake sql`` starts without it)."""

from typing import Any

import dagster as dg
import polars as pl

from resources.lake.resource import LakeStore
from resources.sql import query


class DuckDBReader(dg.ConfigurableResource):
    """Dagster resource: read-only DuckDB over the lake's Delta tables (raw-text tables
    not exposed), with the limits of :meth:`SQLLimits.resolve`."""

    lake: dg.ResourceDependency[LakeStore]

    def query(self, sql: str) -> pl.DataFrame:
        """Result of a read-only query (see :func:`query`)."""
        return query(self.lake, sql)

    def scalar(self, sql: str) -> Any:
        """First column of the first row."""
        frame = self.query(sql)
        return frame.item(0, 0) if frame.height else None
