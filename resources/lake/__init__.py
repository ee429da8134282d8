"""The lake: Delta tables under one root, written partition by partition.

- :mod:`~resources.lake.tables`: :class:`LakeTables` (plain Python, no Dagster);
- :mod:`~resources.lake.schemas`, :mod:`~resources.lake.types`: every table's Arrow schema
  and the checks of what is written;
- :mod:`~resources.lake.commit`: conflict-safe commits and their retries;
- :mod:`~resources.lake.lease`, :mod:`~resources.lake.score_params`,
  :mod:`~resources.lake.sample_codec`: generation leases, the scores' ``params`` column,
  the samples table's codec;
- :mod:`~resources.lake.resource`: ``LakeStore``, the Dagster resource. Not imported by this
  face: reading the lake (``facetlake sql``) never imports Dagster; import it from
  ``resources.lake.resource``.
"""

from resources.lake.tables import predicate_for, local_table_files, rows_to_arrow, to_arrow, LakeTables
from resources.lake.schemas import SCHEMAS, PARTITION_COLUMNS, ADDED_COLUMNS
from resources.lake.types import check_rows, check_table, string_list_column
from resources.lake.commit import (
    KEYS,
    LakeConflictError,
    LakeError,
    add_missing_columns,
    dedupe,
    ensure_table,
    keyed_append,
    merge_predicate,
    overwrite,
    retry_bounds,
    table_keys,
    with_retries,
)
from resources.lake.lease import LEASES, Lease, LeaseTimeout, generation_lease, pid_alive, ttl_s
from resources.lake.score_params import fill_params, fill_params_arrow, fill_params_rows
from resources.lake.sample_codec import (
    SamplesMissingError,
    KEY_PACKAGES,
    package_versions,
    sample_rows,
    sample_frame,
    samples_from_frame,
    load_stored_samples,
)

__all__ = [
    "predicate_for",
    "local_table_files",
    "rows_to_arrow",
    "to_arrow",
    "LakeTables",
    "SCHEMAS",
    "PARTITION_COLUMNS",
    "ADDED_COLUMNS",
    "check_rows",
    "check_table",
    "string_list_column",
    "KEYS",
    "LakeConflictError",
    "LakeError",
    "add_missing_columns",
    "dedupe",
    "ensure_table",
    "keyed_append",
    "merge_predicate",
    "overwrite",
    "retry_bounds",
    "table_keys",
    "with_retries",
    "LEASES",
    "Lease",
    "LeaseTimeout",
    "generation_lease",
    "pid_alive",
    "ttl_s",
    "fill_params",
    "fill_params_arrow",
    "fill_params_rows",
    "SamplesMissingError",
    "KEY_PACKAGES",
    "package_versions",
    "sample_rows",
    "sample_frame",
    "samples_from_frame",
    "load_stored_samples",
]
