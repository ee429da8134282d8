"""The evaluation catalog: who owns which fingerprint, which model sources belong to
which evaluation, and which (fingerprint, model) pairs exist. Stored as Delta tables.

Identity (DESIGN.md, "Identity"):

- ``evaluations``: one row per (evaluation name, fingerprint). A name has exactly one
  ``current`` fingerprint; earlier ones are ``history`` (their rows stay queryable). A
  fingerprint belongs to one evaluation: another name reaching the same fingerprint is a
  collision, refused unless the user passes ``--take-over``. A name re-registered over
  another dataset source is refused unless ``--replace``.
- ``evaluation_models``: one row per (evaluation, model, version): the model's source
  (spec string) and identity (file content hash, weights files, API model and base URL).
  A model's source belongs to the pair (evaluation, model), never to the bare name;
  changing it adds a version (recorded, with a notice), never a silent re-point.
- ``pairs``: one row per (evaluation, fingerprint, model) with its Dagster partition key
  and status (``current``, ``history``, ``retired``, ``archived``). Only ``current``
  pairs are Dagster partitions (assets/partitions.py).
- ``evaluation_metrics``: metrics added to an evaluation with ``facetlake score`` (with
  their parameters): part of the evaluation from then on, so re-runs keep them.

Every lookup accepts an evaluation name, a unique prefix of a name or fingerprint, or a
partition key (``name@fp12``); hex is for machines.

The code lives in :mod:`resources.catalog.reads` (keys, sources, reads) and
:mod:`resources.catalog.writes` (registration, models, metrics, archiving); this module
re-exports both, so its public API is unchanged.
"""

from __future__ import annotations

from resources.catalog.reads import (  # noqa: F401  (re-exported: the public API of resources.catalog)
    CatalogCollisionError,
    CatalogError,
    FP_PREFIX,
    HistoryPartitionError,
    _evaluations,
    _listing,
    _models,
    _read,
    added_metrics,
    current_keys,
    current_models,
    dataset_source,
    evaluation_key,
    evaluation_row,
    evaluation_spec,
    find_evaluation,
    identity_sha256,
    list_evaluations,
    model_spec,
    pair_key,
    pair_row,
    pairs_of,
    retired_keys,
    source_identity,
    utcnow,
)
from resources.catalog.writes import (  # noqa: F401  (re-exported: the public API of resources.catalog)
    Registration,
    _describe_source,
    _model_row,
    _pair_rows,
    _release_fingerprint,
    _short_source,
    add_metrics,
    register_evaluation,
    register_model,
    set_archived,
)
