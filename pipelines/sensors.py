"""Recurring evaluation: the inbox sensor and the evaluation schedule.

Inbox layout: ``<inbox>/<evaluation name>/<model>.(jsonl|json|csv|parquet)``, each file
holding ``sample_id`` and ``output`` columns (the precomputed backend's format). A new or
changed file registers the model partition (``precomputed:<file>``) and requests the
``evaluation_job`` run for model x the evaluation's current fingerprint. The inbox path
comes from the ``inbox`` resource (``$FACETLAKE_INBOX`` or ``./inbox``).
"""


import json
import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from pipelines.jobs import evaluation_job
from pipelines.partitions import partition_key
from resources.backends import BackendError, PrecomputedBackend
from resources.catalog import evaluation_spec, find_evaluation, register_model
from resources.evaluation import MODEL_SLUG, slugify_model
from resources.lake import LakeStore

OUTPUT_SUFFIXES = {".jsonl", ".json", ".csv", ".parquet"}


class InboxConfig(dg.ConfigurableResource):
    """Where precomputed-output files are dropped (``$FACETLAKE_INBOX`` or ``./inbox``)."""

    path: str = Field(default_factory=lambda: os.environ.get("FACETLAKE_INBOX", "inbox"))


class ScheduleConfig(dg.ConfigurableResource):
    """Which registered evaluation the schedule re-runs (``$FACETLAKE_SCHEDULED_EVALUATION``)."""

    evaluation: str = Field(default_factory=lambda: os.environ.get("FACETLAKE_SCHEDULED_EVALUATION", ""))


@dg.sensor(job=evaluation_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.STOPPED)
def inbox_sensor(context: dg.SensorEvaluationContext, lake: LakeStore, inbox: InboxConfig) -> dg.SensorResult | dg.SkipReason:
    """New precomputed-output files in the inbox become model partitions and evaluation runs."""
    root = Path(inbox.path).expanduser()
    if not root.is_dir():
        return dg.SkipReason(f"inbox {root} does not exist; create it or set FACETLAKE_INBOX")
    seen: dict[str, float] = json.loads(context.cursor) if context.cursor else {}
    run_requests, new_models, waiting, bad = [], [], [], []
    for file in sorted(root.glob("*/*")):
        if file.suffix.lower() not in OUTPUT_SUFFIXES or not file.is_file():
            continue
        mtime = file.stat().st_mtime
        if seen.get(str(file)) == mtime:
            continue
        evaluation = find_evaluation(lake, file.parent.name)
        if evaluation is None:
            waiting.append(file.parent.name)
            continue
        model = slugify_model(file.stem)
        if not MODEL_SLUG.match(model):
            context.log.warning(f"skipping {file}: cannot make a model key from its name")
            continue
        try:  # a bad file (encoding, rows, columns) is reported once, not run; a fixed file is seen again
            PrecomputedBackend(f"precomputed:{file.resolve()}").check_file()
        except BackendError as exc:
            context.log.warning(f"skipping {file}: {exc}")
            seen[str(file)] = mtime
            bad.append(file.name)
            continue
        register_model(lake, model, f"precomputed:{file.resolve()}")
        fingerprint = evaluation["fingerprint"]
        new_models.append(model)
        run_requests.append(
            dg.RunRequest(
                run_key=f"{file}:{mtime}",
                partition_key=partition_key(model, fingerprint),
                tags={"facetlake/source": str(file), "facetlake/evaluation": evaluation["name"]},
            )
        )
        seen[str(file)] = mtime
    if waiting:
        context.log.info(f"files for unregistered evaluations {sorted(set(waiting))} wait until those are registered")
    if not run_requests:
        if bad:
            context.update_cursor(json.dumps(seen, sort_keys=True))
        return dg.SkipReason("no new output files" + (f" (waiting on evaluations {sorted(set(waiting))})" if waiting else "")
                             + (f" (unreadable, see the log: {', '.join(bad)})" if bad else ""))
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest("model", sorted(set(new_models)))],
        cursor=json.dumps(seen, sort_keys=True),
    )


@dg.schedule(
    job=evaluation_job,
    cron_schedule=os.environ.get("FACETLAKE_SCHEDULE_CRON", "0 6 * * *"),
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def evaluation_schedule(context: dg.ScheduleEvaluationContext, lake: LakeStore, schedule_config: ScheduleConfig):
    """Re-runs the configured evaluation (every model under its latest fingerprint)."""
    name = schedule_config.evaluation
    if not name:
        return dg.SkipReason("no evaluation configured: set FACETLAKE_SCHEDULED_EVALUATION to a registered evaluation name")
    evaluation = find_evaluation(lake, name)
    if evaluation is None:
        return dg.SkipReason(f"evaluation {name!r} is not registered; run `facetlake run CONFIG` once first")
    spec = evaluation_spec(lake, evaluation["fingerprint"])
    try:
        stamp = context.scheduled_execution_time.isoformat()
    except Exception:  # noqa: BLE001 - dagster raises a CheckError when the tick carries no time
        stamp = "manual"
    return [
        dg.RunRequest(
            run_key=f"{name}:{model}:{stamp}",
            partition_key=partition_key(model, evaluation["fingerprint"]),
            tags={"facetlake/evaluation": name, "facetlake/scheduled": "true"},
        )
        for model in sorted(spec.models)
    ]
