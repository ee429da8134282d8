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

The code lives in :mod:`resources.catalog.spec` (the evaluation spec and its fingerprint),
:mod:`resources.catalog.reads` (keys, sources, reads), :mod:`resources.catalog.writes`
(registration, models, metrics, archiving), :mod:`resources.catalog.profiles` (practitioner
profiles), :mod:`resources.catalog.migrations` (explicit migrations of older lakes) and
:mod:`resources.catalog.diff` (samples changed between two fingerprints) and
:mod:`resources.catalog.versions` (what each fingerprint rests on); this face exports their
public names.
"""

from __future__ import annotations

from resources.catalog.reads import (
    CatalogCollisionError,
    CatalogError,
    FP_PREFIX,
    HistoryPartitionError,
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
from resources.catalog.writes import Registration, add_metrics, register_evaluation, register_model, set_archived
from resources.catalog.spec import (
    MODEL_SLUG,
    EVALUATION_NAME,
    FINGERPRINT,
    DEFAULT_ADAPTER,
    DEFAULT_GENERATION,
    SpecError,
    slugify_model,
    model_key_for,
    model_keys,
    canonical_json,
    fingerprint_of,
    EvaluationSpec,
    ResolvedEvaluation,
    load_dataset,
    resolve,
)
from resources.catalog.profiles import (
    SHIPPED,
    OUTPUT_FORMS,
    PROFILES_ENV,
    ProfileError,
    CrossCheckWarning,
    Profile,
    profile_dirs,
    parse_profile,
    list_profiles,
    load_profile,
    dimension_counts,
    profile_metrics,
    profile_view,
)
from resources.catalog.diff import SampleDiff, fingerprint_history, sample_diff
from resources.catalog.versions import evaluation_versions, rests_on
from resources.catalog.migrations import (
    MigrationError,
    migrate_catalog_identity,
    migrate_ledger_calls,
    pending,
)


__all__ = [
    "SampleDiff",
    "fingerprint_history",
    "sample_diff",
    "evaluation_versions",
    "rests_on",
    "CatalogCollisionError",
    "CatalogError",
    "FP_PREFIX",
    "HistoryPartitionError",
    "added_metrics",
    "current_keys",
    "current_models",
    "dataset_source",
    "evaluation_key",
    "evaluation_row",
    "evaluation_spec",
    "find_evaluation",
    "identity_sha256",
    "list_evaluations",
    "model_spec",
    "pair_key",
    "pair_row",
    "pairs_of",
    "retired_keys",
    "source_identity",
    "utcnow",
    "Registration",
    "add_metrics",
    "register_evaluation",
    "register_model",
    "set_archived",
    "MODEL_SLUG",
    "EVALUATION_NAME",
    "FINGERPRINT",
    "DEFAULT_ADAPTER",
    "DEFAULT_GENERATION",
    "SpecError",
    "slugify_model",
    "model_key_for",
    "model_keys",
    "canonical_json",
    "fingerprint_of",
    "EvaluationSpec",
    "ResolvedEvaluation",
    "load_dataset",
    "resolve",
    "SHIPPED",
    "OUTPUT_FORMS",
    "PROFILES_ENV",
    "ProfileError",
    "CrossCheckWarning",
    "Profile",
    "profile_dirs",
    "parse_profile",
    "list_profiles",
    "load_profile",
    "dimension_counts",
    "profile_metrics",
    "profile_view",
    "MigrationError",
    "migrate_catalog_identity",
    "migrate_ledger_calls",
    "pending",
]
