"""Run evaluations through Dagster from Python or the CLI.

Every materialisation goes through ``dagster.materialize`` against the same asset
definitions ``dagster dev`` shows, on the persistent instance (``$DAGSTER_HOME``, or the
project folder holding dagster.yaml), so runs started from the CLI appear in the UI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import dagster as dg
import polars as pl

from pipelines.definitions import ALL_ASSETS, ALL_CHECKS, build_resources
from pipelines.partitions import partition_key
from resources.catalog import evaluation_row, evaluation_spec, register_evaluation
from resources.evaluation import EvaluationSpec, ResolvedEvaluation, resolve
from resources.lake import LakeStore

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else the project folder (it holds dagster.yaml)."""
    home = os.environ.get("DAGSTER_HOME")
    return Path(home) if home else PROJECT_ROOT


def get_instance(ephemeral: bool = False) -> dg.DagsterInstance:
    """The persistent Dagster instance under :func:`dagster_home` (or an ephemeral one)."""
    if ephemeral:
        return dg.DagsterInstance.ephemeral()
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DAGSTER_HOME", str(home))
    return dg.DagsterInstance.get()


def register(spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance) -> ResolvedEvaluation:
    """Load and hash the dataset, record the evaluation and add its dynamic partitions.

    Unknown metric names, malformed model specs and duplicate sample ids are refused here,
    before anything is generated or written.
    """
    from collections import Counter

    from metric_ops.registry import REGISTRY
    from resources.backends import parse_model_spec
    from resources.datasets import DatasetError

    for name in spec.metrics:
        REGISTRY.resolve(name)  # UnknownMetricError with "did you mean"
    for model_spec_string in spec.models.values():
        parse_model_spec(model_spec_string)  # ModelSpecError with an example
    resolved = resolve(spec)
    duplicates = sorted(k for k, n in Counter(s.sample_id for s in resolved.samples).items() if n > 1)
    if duplicates:
        raise DatasetError(
            f"dataset {resolved.dataset_name!r} has {len(duplicates)} duplicate sample id(s): {duplicates[:10]}; "
            "outputs and scores are keyed by sample id, so make them unique (map another column as sample_id)"
        )
    register_evaluation(lake, resolved)
    instance.add_dynamic_partitions("fingerprint", [resolved.fingerprint])
    instance.add_dynamic_partitions("model", sorted(spec.models))
    return resolved


def _materialize(
    selection: list[str],
    partition: str | dg.MultiPartitionKey,
    lake: LakeStore,
    instance: dg.DagsterInstance,
    run_config: dict[str, Any] | None = None,
) -> dg.ExecuteInProcessResult:
    resources = build_resources(lake.root)
    resources["lake"] = lake
    run_config = {**(run_config or {}), "loggers": {"console": {"config": {"log_level": os.environ.get("FACETLAKE_LOG_LEVEL", "WARNING")}}}}
    return dg.materialize(
        [*ALL_ASSETS, *ALL_CHECKS],
        selection=selection,
        partition_key=str(partition),
        instance=instance,
        resources=resources,
        run_config=run_config,
        tags={"facetlake/source": "cli"},
    )


def materialize_samples(fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """Materialise ``samples`` (and its checks) for one fingerprint."""
    return _materialize(["samples"], fingerprint, lake, instance)


def materialize_model(
    model: str, fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance, metrics: list[str] | None = None,
    generate: bool = True, params: list[str] | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialise ``generations`` (unless ``generate=False``) and ``scores`` for one partition."""
    selection = ["generations", "annotations", "scores"] if generate else ["scores"]
    run_config = {"ops": {"scores": {"config": {"metrics": list(metrics or []), "params": list(params or [])}}}}
    return _materialize(selection, partition_key(model, fingerprint), lake, instance, run_config)


def materialize_summary(fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """Materialise ``summary`` for one fingerprint."""
    return _materialize(["summary"], fingerprint, lake, instance)


def materialize_analysis(
    fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance, with_summary: bool = False
) -> dg.ExecuteInProcessResult:
    """Materialise ``comparisons`` (with its regression check) and ``correlations`` for one
    fingerprint (and ``summary`` first in the same run when ``with_summary``)."""
    return _materialize([*(["summary"] if with_summary else []), "comparisons", "correlations"], fingerprint, lake, instance)


def run_evaluation(spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance) -> ResolvedEvaluation:
    """Register ``spec`` and materialise samples, every model's generations and scores, and the summary."""
    resolved = register(spec, lake, instance)
    materialize_samples(resolved.fingerprint, lake, instance)
    for model in sorted(spec.models):
        materialize_model(model, resolved.fingerprint, lake, instance)
    materialize_analysis(resolved.fingerprint, lake, instance, with_summary=True)  # summary, comparisons, correlations
    return resolved


def stored_partitions(lake: LakeStore, fingerprint: str | None = None) -> list[tuple[str, str]]:
    """(model, fingerprint) pairs with stored generations."""
    if not lake.exists("generations"):
        return []
    frame = lake.read("generations", columns=["model", "fingerprint"]).unique().sort(["fingerprint", "model"])
    if fingerprint:
        frame = frame.filter(pl.col("fingerprint").str.starts_with(fingerprint))
    return [(r["model"], r["fingerprint"]) for r in frame.iter_rows(named=True)]


def rescore(
    metrics: Iterable[str], lake: LakeStore, instance: dg.DagsterInstance, fingerprint: str | None = None, force: bool = False,
    params: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Score stored generations under ``metrics`` without regenerating.

    A partition that already has rows with the metric's current signature is skipped
    unless ``force``. Returns one record per partition: model, fingerprint, metrics run
    or skipped.
    """
    from metric_ops.registry import REGISTRY
    from resources.metric_inputs import build_metric
    from resources.judges import merged_params, parse_param_overrides

    names = [REGISTRY.resolve(m) for m in metrics]
    stray = sorted(set(parse_param_overrides(list(params or []))) - {"*", *names})
    if stray:
        raise ValueError(
            f"--param names {', '.join(stray)}, which is not among the metrics being scored ({', '.join(names)}); "
            f"add --metric {stray[0]} or drop the METRIC. prefix"
        )
    done: list[dict[str, Any]] = []
    existing = lake.read("scores", columns=["model", "fingerprint", "signature"]).unique() if lake.exists("scores") else None
    for model, fp in stored_partitions(lake, fingerprint):
        spec = evaluation_spec(lake, fp)
        todo = []
        for name in names:
            signature = build_metric(name, merged_params(spec.metric_params, name, params))[0].signature()  # use_annotation aware
            have = existing is not None and existing.filter(
                (pl.col("model") == model) & (pl.col("fingerprint") == fp) & (pl.col("signature") == signature)
            ).height > 0
            if force or not have:
                todo.append(name)
        if todo:
            instance.add_dynamic_partitions("fingerprint", [fp])
            instance.add_dynamic_partitions("model", [model])
            materialize_model(model, fp, lake, instance, metrics=todo, generate=False, params=params)
        done.append({"model": model, "fingerprint": fp, "scored": todo, "skipped": [n for n in names if n not in todo]})
    touched = {d["fingerprint"] for d in done if d["scored"]}
    for fp in sorted(touched):
        materialize_summary(fp, lake, instance)
        materialize_analysis(fp, lake, instance)
    return done


def scoring_outcome(lake: LakeStore, done: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """What a :func:`rescore` call stored, per model x fingerprint x metric it scored:
    rows ``scored``, ``error`` and ``unscored``, and the first error message
    (``first_error``, "" when none). Rows are found by the metric name that starts their
    signature. Empty frame when nothing was scored."""
    wanted = [(d["model"], d["fingerprint"], name) for d in done for name in d["scored"]]
    columns = {"model": pl.String, "fingerprint": pl.String, "metric": pl.String, "scored": pl.Int64,
               "error": pl.Int64, "unscored": pl.Int64, "first_error": pl.String}
    if not wanted or not lake.exists("scores"):
        return pl.DataFrame(schema=columns)
    frame = lake.read("scores", columns=["model", "fingerprint", "sample_id", "status", "detail", "signature"]).with_columns(
        pl.col("signature").str.split("|").list.first().alias("name")
    )
    rows = []
    for model, fp, name in wanted:
        part = frame.filter((pl.col("model") == model) & (pl.col("fingerprint") == fp) & (pl.col("name") == name))
        # a corpus-level metric's corpus rows (sample_id null) stand for the segments they cover
        corpus = part.filter(pl.col("sample_id").is_null() & (pl.col("status") == "scored"))
        segments = corpus["detail"].str.json_path_match("$.n_segments").cast(pl.Int64).max() if corpus.height else None
        part = part.filter(pl.col("sample_id").is_not_null() | (pl.col("status") != "scored"))
        counts = dict(part.group_by("status").len().iter_rows())
        if segments is not None:
            counts["scored"] = counts.get("scored", 0) + int(segments)
        errors = part.filter(pl.col("status") == "error")["detail"]
        first = ""
        if errors.len():
            try:
                first = str(json.loads(errors[0]).get("error", ""))
            except (TypeError, ValueError):
                first = str(errors[0])
        rows.append({"model": model, "fingerprint": fp, "metric": name, "scored": counts.get("scored", 0),
                     "error": counts.get("error", 0), "unscored": counts.get("unscored", 0), "first_error": first})
    return pl.DataFrame(rows, schema=columns)


def summary_table(lake: LakeStore, fingerprints: Iterable[str] | None = None) -> pl.DataFrame:
    """dataset x model x metric: mean, n scored, n total (from the summary table)."""
    frame = lake.read("summary")
    if fingerprints is not None:
        frame = frame.filter(pl.col("fingerprint").is_in(list(fingerprints)))
    return frame.select("dataset", "model", "metric", "mean", "n_scored", "n_total").sort(["dataset", "model", "metric"])


__all__ = [
    "evaluation_row",
    "get_instance",
    "register",
    "rescore",
    "run_evaluation",
    "scoring_outcome",
    "stored_partitions",
    "summary_table",
]
