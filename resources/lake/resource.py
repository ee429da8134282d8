"""``LakeStore``: the lake (:class:`resources.lake.tables.LakeTables`) as a Dagster resource.

Kept apart from resources/lake/tables.py so that reading the lake without Dagster (``facetlake
sql``) does not import Dagster.
"""

import os

import dagster as dg
from pydantic import Field

from resources.lake.tables import LakeTables


class LakeStore(dg.ConfigurableResource, LakeTables):
    """Delta tables under ``root`` as a Dagster resource (every method is
    :class:`resources.lake.tables.LakeTables`'s).

    ``root`` defaults to ``$FACETLAKE_LAKE`` or ``./lake``; ``storage_options`` are passed to
    deltalake for ``s3://``/``gs://``/``az://`` roots.
    """

    root: str = Field(default_factory=lambda: os.environ.get("FACETLAKE_LAKE", "lake"))
    storage_options: dict[str, str] = Field(default_factory=dict)
