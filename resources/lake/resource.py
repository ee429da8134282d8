"""``LakeStore``: the lake (:class:`resources.lake.tables.LakeTables`) as a Dagster resource, and
``DuckDBReader``: read-only SQL over it (:func:`resources.sql.query`) as a Dagster resource.

Kept apart from resources/lake/tables.py so that reading the lake without Dagster (``facetlake
sql``) does not import Dagster; ``from resources.lake.tables import LakeStore`` still works (the
module loads this one on first use).
"""

import os
from typing import Any

import dagster as dg
import polars as pl
from pydantic import Field

from resources.lake.tables import LakeTables
from resources.sql import query


class LakeStore(dg.ConfigurableResource, LakeTables):
    """Delta tables under ``root`` as a Dagster resource (every method is
    :class:`resources.lake.tables.LakeTables`'s).

    ``root`` defaults to ``$FACETLAKE_LAKE`` or ``./lake``; ``storage_options`` are passed to
    deltalake for ``s3://``/``gs://``/``az://`` roots.
    """

    root: str = Field(default_factory=lambda: os.environ.get("FACETLAKE_LAKE", "lake"))
    storage_options: dict[str, str] = Field(default_factory=dict)


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
