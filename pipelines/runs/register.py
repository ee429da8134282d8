"""Registration: an evaluation spec into the catalog and Dagster's partitions, and the
partition keys of what is registered.

The sensors (pipelines/sensors.py) and the runner (pipelines/runs/runner.py) both register;
this module imports neither them nor the code location's definitions, so the sensors that
the definitions load need no runner.
"""

from __future__ import annotations

from collections import Counter

import dagster as dg

from assets.catalog import report_catalog
from assets.partitions import sync_partitions
from metric_ops.registry import REGISTRY
from resources.backends import check_output_ids, parse_model_spec
from resources.catalog import CatalogError, evaluation_row, pairs_of, register_evaluation
from resources.catalog.spec import EvaluationSpec, ResolvedEvaluation, resolve
from resources.datasets import DatasetError
from resources.lake.resource import LakeStore


def register(
    spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance | None, *, take_over: bool = False, replace: bool = False,
    in_process: bool = False,
) -> ResolvedEvaluation:
    """Load and hash the dataset, record the evaluation in the catalog (its name owns the
    fingerprint; a changed dataset makes a new current fingerprint and keeps the old one
    as history; a changed model source is a new model version) and make Dagster's
    partitions equal the catalog's (when ``instance`` is given).

    Unknown metric names, malformed model specs, duplicate sample ids and a precomputed
    outputs file none of whose ids is in the dataset (:class:`~resources.backends.BackendError`;
    a partial match is an :class:`~resources.backends.OutputIdsWarning`) are refused here,
    before anything is generated or written; so are collisions with another evaluation's
    name or fingerprint (:class:`~resources.catalog.CatalogCollisionError`) unless
    ``take_over`` / ``replace``. The returned object's ``registration`` says what changed.
    ``in_process``: this process materialises the samples next (the loaded dataset is
    handed to it, :func:`resources.catalog.spec.load_dataset`).
    """
    for name in spec.metrics:
        REGISTRY.resolve(name)  # UnknownMetricError with "did you mean"
    for model_spec_string in spec.models.values():
        parse_model_spec(model_spec_string)  # ModelSpecError with an example
    resolved = resolve(spec, keep=in_process)
    duplicates = sorted(k for k, n in Counter(s.sample_id for s in resolved.samples).items() if n > 1)
    if duplicates:
        raise DatasetError(
            f"dataset {resolved.dataset_name!r} has {len(duplicates)} duplicate sample id(s): {duplicates[:10]}; "
            "outputs and scores are keyed by sample id, so make them unique (map another column as sample_id)"
        )
    if spec.dataset.get("kind") != "episodes":  # an agent evaluation's files are episodes, keyed by task (issue 17)
        # outputs files whose ids miss the dataset: refused when none matches, a warning when some do (issue 26, fault 8)
        check_output_ids(spec.models, (s.sample_id for s in resolved.samples), keep=in_process)
    resolved.registration = register_evaluation(lake, resolved, take_over=take_over, replace=replace)
    if instance is not None:
        sync_partitions(lake, instance)
        report_catalog(instance, lake)
    return resolved


def evaluation_partition(lake: LakeStore, ref: str) -> str:
    """The evaluation partition key (``name@fp12``) of an evaluation name, fingerprint or key."""
    return evaluation_row(lake, ref)["partition_key"]


def model_partition(lake: LakeStore, model: str, ref: str) -> str:
    """The pair partition key of ``model`` in the evaluation fingerprint ``ref`` names; raises
    :class:`~resources.catalog.CatalogError` when the pair is not registered."""
    row = evaluation_row(lake, ref)
    for pair in pairs_of(lake, row["fingerprint"], ("current", "history", "archived", "retired")):
        if pair["model"] == model:
            return pair["partition_key"]
    raise CatalogError(f"model {model!r} is not registered in evaluation {row['name']!r}; add it under models: in its spec")


def pair_selection(spec: EvaluationSpec) -> list[str]:
    """The assets a pair run materialises: an agent evaluation (dataset kind ``episodes``)
    reads or runs episodes instead of generations (issue 17)."""
    if spec.dataset.get("kind") == "episodes":
        return ["episodes", "scores"]
    return ["generations", "annotations", "scores"]


def pair_job(spec: EvaluationSpec) -> str:
    """The job of a pair run (``agent_job`` for agent evaluations, which stores episodes only:
    their ``scores_job`` run follows it; else ``evaluation_job``)."""
    return "agent_job" if spec.dataset.get("kind") == "episodes" else "evaluation_job"
