"""lm-eval runs and imports as facetlake evaluations (issue 18): the orchestration.

Every path ends in the same place: an lm-eval output folder (``results_<date>.json`` +
``samples_<task>_<date>.jsonl``) becomes, per task, one evaluation registered and
materialised through :mod:`pipelines.runs.runner` (samples, generations with
``lm_eval_responses``, scores, summary, comparisons, correlations) plus the
``lm_eval_summary`` asset that puts lm-eval's aggregates beside facetlake's.

- :func:`import_output`: ``facetlake import lm-eval PATH`` (a folder lm-eval wrote anywhere);
- :func:`run_and_import`: ``facetlake lm-eval TASKS --model SPEC`` (runs lm-eval, then imports);
- :func:`run_lm_eval_spec`: an evaluation spec with an ``lm_eval:`` section (``facetlake run``
  calls it for such a spec; it registers and materialises through
  :func:`pipelines.runs.runner.run_evaluation`).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import dagster as dg

from pipelines.runs.register import evaluation_partition, register
from pipelines.runs.runner import RunResults, _materialize, materialize_analysis, materialize_model, materialize_samples, run_evaluation
from resources.catalog.spec import EvaluationSpec, ResolvedEvaluation, resolve, slugify_model
from resources.lake.resource import LakeStore
from resources.lm_eval.common import PREFIX, LmEvalError
from resources.lm_eval.results import TaskRun, find_task_runs
from resources.lm_eval.bridge import adapter_block, run_record

OUTPUTS_FOLDER = "_lm_eval_outputs"


@dataclass
class Imported:
    """One task of one model imported into the lake."""

    task: str
    evaluation: str
    fingerprint: str
    model: str
    n_samples: int
    results_file: str


def default_output_path(lake: LakeStore) -> Path:
    """Where ``facetlake lm-eval`` keeps lm-eval's output: ``<lake root>/_lm_eval_outputs`` for a
    local lake (beside the Delta tables, never one of them), ``./lm_eval_outputs`` otherwise.
    The evaluation's dataset and model specs point at these files, so keep them."""
    if "://" in lake.root:
        return Path("lm_eval_outputs").resolve()
    return Path(lake.root).expanduser().resolve() / OUTPUTS_FOLDER


def evaluation_name(task: str, name: str | None = None, several: bool = False) -> str:
    """The evaluation's name: ``name`` (``name-<task>`` when one command imports several tasks),
    else ``lm-eval-<task>``."""
    if name:
        return f"{name}-{task}" if several else name
    return f"lm-eval-{task}"


def model_slug(run: TaskRun, model_name: str | None = None, model_spec: str | None = None) -> str:
    """The model's name in the lake: ``model_name``, else from the facetlake spec that ran it,
    else from lm-eval's recorded model name (its last path part)."""
    if model_name:
        return slugify_model(model_name)
    source = model_spec.split(":", 1)[-1].split("@", 1)[0] if model_spec else str(run.results.get("model_name") or "")
    source = source.rstrip("/").rsplit("/", 1)[-1] or str(run.run_config.get("model") or "lm-eval-model")
    return slugify_model(source)


def spec_for_runs(
    task: str,
    runs: Mapping[str, tuple[TaskRun, str | None]],
    name: str,
    metrics: Sequence[str] = (),
    request: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> EvaluationSpec:
    """The evaluation spec of one task run by one or more models.

    ``runs`` maps a model name to its :class:`TaskRun` and the facetlake spec that ran it
    (None for an imported folder). The dataset is read from the first model's samples
    file; each model's outputs from its own results file (``lm_eval:<file>``). Raises
    :class:`LmEvalError` when the models saw different task configs or prompts (a chat
    template or system instruction makes them model-specific): they cannot share a
    fingerprint, so evaluate them separately.
    """
    first_model, (first, _) = next(iter(runs.items()))
    block = adapter_block(first)
    for model, (run, _) in runs.items():
        other = adapter_block(run)
        if other != block:
            diff = sorted(k for k in set(block) | set(other) if block.get(k) != other.get(k))
            raise LmEvalError(
                f"task {task}: models {first_model!r} and {model!r} ran different settings ({', '.join(diff)}); "
                "they cannot share an evaluation: import or run them as separate evaluations (--name)"
            )
    data = {
        "name": name,
        "dataset": {"kind": "lm_eval", "path": str(first.results_file), "task": task},
        "models": {model: f"{PREFIX}{run.results_file}" for model, (run, _) in runs.items()},
        "metrics": list(metrics),
        "adapter": block,
        "lm_eval": {
            **{k: v for k, v in dict(request or {}).items() if k not in ("runs", "task_config")},
            "task": task,
            "task_config": first.config,
            "runs": {model: run_record(run, model_spec) for model, (run, model_spec) in runs.items()},
        },
        **dict(extra or {}),
    }
    return EvaluationSpec.from_mapping(data, where=f"lm-eval task {task}")


def _check_same_samples(spec: EvaluationSpec) -> ResolvedEvaluation:
    """Resolve ``spec`` and check every model's samples hash the same (same prompts)."""
    resolved = resolve(spec)
    for model, model_spec in spec.models.items():
        path = model_spec[len(PREFIX):]
        if path == spec.dataset.get("path"):
            continue
        other = resolve(EvaluationSpec.from_mapping({**spec.to_mapping(), "dataset": {**spec.dataset, "path": path}}))
        if other.dataset_hash != resolved.dataset_hash:
            raise LmEvalError(
                f"task {spec.dataset.get('task')}: model {model!r} saw other prompts or docs than the first model "
                "(a chat template, system instruction or limit makes them differ); evaluate it as a separate evaluation (--name)"
            )
    return resolved


def _merge_existing(spec: EvaluationSpec, lake: LakeStore, keep_name: bool) -> EvaluationSpec:
    """Keep the models already registered under the same fingerprint (an import adds a model
    to an evaluation, it does not drop the others); keep the evaluation's name unless one was given."""
    from resources.catalog import CatalogError, evaluation_spec, evaluation_row

    fingerprint = resolve(spec).fingerprint
    try:
        row = evaluation_row(lake, fingerprint)
        existing = evaluation_spec(lake, fingerprint)
    except (CatalogError, LookupError):
        return spec
    merged = copy.deepcopy(spec)
    for model, model_spec in existing.models.items():
        merged.models.setdefault(model, model_spec)
    runs = dict((existing.lm_eval or {}).get("runs") or {})
    runs.update(merged.lm_eval.get("runs") or {})
    merged.lm_eval["runs"] = runs
    merged.metrics = list(dict.fromkeys([*existing.metrics, *merged.metrics]))
    if not keep_name:
        merged.name = row["name"]
    return merged


def materialize_lm_eval_summary(fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance) -> RunResults:
    """Materialise the ``lm_eval_summary`` asset (and its agreement check) for one fingerprint."""
    return _materialize(["lm_eval_summary"], evaluation_partition(lake, fingerprint), lake, instance)


def import_task_runs(
    runs: Iterable[tuple[TaskRun, str | None]],
    lake: LakeStore,
    instance: dg.DagsterInstance,
    *,
    name: str | None = None,
    model_name: str | None = None,
    metrics: Sequence[str] = (),
    request: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> list[Imported]:
    """Register and materialise each ``(TaskRun, facetlake spec that ran it or None)`` as its
    task's evaluation with one model (added to the models already there under the same
    fingerprint); returns what was imported."""

    runs = list(runs)
    several = len({run.task for run, _ in runs}) > 1
    done = []
    for run, model_spec in runs:
        slug = model_slug(run, model_name, model_spec)
        spec = spec_for_runs(run.task, {slug: (run, model_spec)}, evaluation_name(run.task, name, several), metrics, request, extra)
        spec = _merge_existing(spec, lake, keep_name=bool(name))
        resolved = register(spec, lake, instance)
        fingerprint = resolved.fingerprint
        _raise_on_failure(materialize_samples(fingerprint, lake, instance), "samples")
        _raise_on_failure(materialize_model(slug, fingerprint, lake, instance), f"generations/scores of {slug}")
        _raise_on_failure(materialize_analysis(fingerprint, lake, instance, with_summary=True), "summary")
        _raise_on_failure(materialize_lm_eval_summary(fingerprint, lake, instance), "lm_eval_summary")
        done.append(Imported(run.task, spec.name, fingerprint, slug, len(resolved.samples), str(run.results_file)))
    return done


def _raise_on_failure(result: RunResults, what: str) -> None:
    if not result.success:  # materialize raises by default; this covers raise_on_error=False callers
        raise LmEvalError(f"materialising {what} failed; see the Dagster run {result.run_id}")


def import_output(
    path: str | Path,
    lake: LakeStore,
    instance: dg.DagsterInstance,
    *,
    tasks: Sequence[str] | None = None,
    name: str | None = None,
    model_name: str | None = None,
    metrics: Sequence[str] = (),
) -> list[Imported]:
    """Import an lm-eval output folder (or one results file) written by any lm-eval that
    writes ``results_*.json`` + ``samples_*.jsonl``: one evaluation per task (and per model
    folder inside an ``--output_path``). Raises :class:`LmEvalError` for a folder without
    per-sample logs or an unknown task."""
    runs = find_task_runs(path, tasks)
    if model_name and len({r.results_file.parent for r in runs}) > 1:
        raise LmEvalError(f"{path} holds results of several models; --model-name names one: point PATH at one model's folder")
    return import_task_runs([(run, None) for run in runs], lake, instance, name=name, model_name=model_name, metrics=metrics)


def run_and_import(
    tasks: Sequence[str],
    model_spec: str,
    lake: LakeStore,
    instance: dg.DagsterInstance,
    *,
    settings: Any = None,
    name: str | None = None,
    model_name: str | None = None,
    metrics: Sequence[str] = (),
    output_path: str | Path | None = None,
    api_mode: str = "completions",
    api_key_env: str | None = None,
    model_args: Mapping[str, Any] | None = None,
    privacy: Mapping[str, Any] | None = None,
) -> list[Imported]:
    """Run ``tasks`` on ``model_spec`` with lm-eval (its own model class; see
    resources/lm_eval/models.py), save its output, and import it (:func:`import_task_runs`).

    The outbound rules are checked before lm-eval is called: an ``api:`` model is refused
    in offline mode, and while anonymisation is on; its requests are recorded in the
    outbound ledger.
    """
    from resources.lm_eval.models import RunSettings, check_outbound, lm_eval_model, outbound_ledger, run_tasks

    settings = settings or RunSettings()
    model = lm_eval_model(model_spec, model_args=model_args, api_mode=api_mode, api_key_env=api_key_env)
    check_outbound(model, privacy)
    slug = slugify_model(model_name) if model_name else model.slug
    out = Path(output_path).expanduser().resolve() if output_path else default_output_path(lake)
    out.mkdir(parents=True, exist_ok=True)
    run_id = f"lm-eval-{uuid.uuid4().hex[:12]}"
    with outbound_ledger(lake, run_id, slug):
        results_file = run_tasks(list(tasks), model, out, settings)
    runs = find_task_runs(results_file)
    request = {
        "num_fewshot": settings.num_fewshot, "limit": settings.limit, "batch_size": settings.batch_size,
        "gen_kwargs": settings.gen_kwargs, "apply_chat_template": settings.apply_chat_template,
        "system_instruction": settings.system_instruction, "include_path": [str(p) for p in settings.include_path] or None,
        "api_mode": api_mode if model.locality == "external" else None, "api_key_env": api_key_env,
        "output_path": str(out), "bootstrap_iters": settings.bootstrap_iters, "fewshot_seed": settings.fewshot_seed,
    }
    request = {k: v for k, v in request.items() if v is not None}
    return import_task_runs([(run, model_spec) for run in runs], lake, instance, name=name, model_name=slug,
                            metrics=metrics, request=request, extra={"privacy": dict(privacy)} if privacy else None)


def settings_from_section(section: Mapping[str, Any]) -> Any:
    """:class:`resources.lm_eval.models.RunSettings` from a spec's ``lm_eval:`` section."""
    from resources.lm_eval.models import RunSettings

    include = section.get("include_path") or ()
    return RunSettings(
        limit=section.get("limit"),
        num_fewshot=section.get("num_fewshot"),
        batch_size=section.get("batch_size", 1),
        device=section.get("device"),
        gen_kwargs=section.get("gen_kwargs"),
        apply_chat_template=bool(section.get("apply_chat_template", False)),
        fewshot_as_multiturn=section.get("fewshot_as_multiturn"),
        system_instruction=section.get("system_instruction"),
        include_path=[include] if isinstance(include, str) else list(include),
        bootstrap_iters=int(section.get("bootstrap_iters", 100000)),
        fewshot_seed=int(section.get("fewshot_seed", 1234)),
        metadata=dict(section.get("metadata") or {}),
    )


def run_lm_eval_spec(spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance) -> ResolvedEvaluation:
    """Run an evaluation spec's ``lm_eval:`` task on every model of the spec with lm-eval,
    then register and materialise it as one evaluation (all models under one fingerprint)
    with the lm-eval summary. Called by ``facetlake run`` (pipelines/cli/run.py) for such a spec."""
    from resources.lm_eval.models import check_outbound, lm_eval_model, outbound_ledger, parse_model_args, run_tasks

    section = dict(spec.lm_eval)
    task = section["task"]
    settings = settings_from_section(section)
    model_args = parse_model_args(section.get("model_args"))
    models = {slug: lm_eval_model(s, model_args=model_args, api_mode=section.get("api_mode", "completions"),
                                  api_key_env=section.get("api_key_env") or spec.runtime.get("api_key_env"))
              for slug, s in spec.models.items()}
    for model in models.values():  # every refusal before the first model runs
        check_outbound(model, spec.privacy)
    out = Path(section["output_path"]).expanduser().resolve() if section.get("output_path") else default_output_path(lake)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, tuple[TaskRun, str | None]] = {}
    for slug, model in models.items():
        with outbound_ledger(lake, f"lm-eval-{uuid.uuid4().hex[:12]}", slug):
            results_file = run_tasks([task], model, out, settings)
        found = find_task_runs(results_file)
        if len(found) != 1:
            raise LmEvalError(f"lm_eval.task {task!r} ran {len(found)} tasks ({', '.join(r.task for r in found)}): it is a group; "
                              "an evaluation spec names one task, so list a subtask, or run the group with `facetlake lm-eval`")
        runs[slug] = (found[0], spec.models[slug])
    base = {k: v for k, v in spec.to_mapping().items() if k not in ("name", "dataset", "models", "metrics", "adapter", "lm_eval")}
    resolved_spec = spec_for_runs(found[0].task, runs, spec.name, spec.metrics, section, base)
    _check_same_samples(resolved_spec)
    resolved = run_evaluation(resolved_spec, lake, instance)
    materialize_lm_eval_summary(resolved.fingerprint, lake, instance)
    return resolved


def lm_eval_summary_table(lake: LakeStore, fingerprints: Iterable[str]) -> Any:
    """The ``lm_eval_summary`` rows of ``fingerprints`` for printing: model, metric, lm-eval's
    value and stderr, facetlake's value, stderr and interval, agreement."""
    import polars as pl

    frame = lake.read("lm_eval_summary").filter(pl.col("fingerprint").is_in(list(fingerprints)))
    return frame.select("task", "model", "metric", "lm_eval_value", "lm_eval_stderr", "facetlake_value", "facetlake_stderr",
                        "ci_low", "ci_high", "agrees").sort(["task", "model", "metric"])
