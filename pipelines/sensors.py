"""Recurring evaluations: the evaluation scheduler, the inbox sensor, the episodes sensor and the analysis sensor.

All start RUNNING (``facetlake ui`` / ``dagster-daemon`` run them with no hand step):

- ``evaluation_scheduler`` runs every scheduled evaluation on its own cron (the spec's
  ``schedule: "0 6 * * *"``, UTC), with every model of the evaluation, the inbox's
  included. At a due tick the spec is resolved again: a changed dataset registers the new
  fingerprint (the old one becomes history) and the tick first materialises the new
  ``samples`` partition, then the pairs. Evaluations are data in the lake, not code, so
  one sensor serves any number of them without reloading the code location; cron ticks
  come from Dagster's own cron iterator.
- ``inbox_sensor``: ``<inbox>/<evaluation name>/<model>.(jsonl|json|csv|parquet)`` (columns
  ``sample_id``, ``output``) adds or re-points that model in that evaluation only (a new
  version when the file's content changed) and runs its pair.
- ``episodes_sensor``: an agent's episodes stored by a run the CLI did not start (the
  scheduler's ``agent_job``, the UI) get their ``scores_job`` run: the two assets have
  different partition sets (assets/partitions.py), so one Dagster run cannot hold both.
- ``analysis_sensor``: an evaluation whose verdicts (summary, comparisons with the
  regression alert, correlations; pass^k, lm-eval's summary) are older than its scores,
  whatever changed them (CLI, UI, schedule, inbox) or was killed when, gets them
  recomputed (``analysis_job`` ...); fresh verdicts ask for nothing (assets/freshness.py).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from pydantic import Field

from assets.partitions import partition_requests
from pipelines.jobs import agent_analysis_job, agent_job, analysis_job, evaluation_job, lm_eval_analysis_job, samples_job, scores_job
from pipelines.runs.register import pair_job, register
from resources.catalog import evaluation_row, find_evaluation, pairs_of, register_model
from resources.backends import BackendError, PrecomputedBackend
from resources.catalog.spec import MODEL_SLUG, slugify_model
from resources.lake.resource import LakeStore

OUTPUT_SUFFIXES = {".jsonl", ".json", ".csv", ".parquet"}


class InboxConfig(dg.ConfigurableResource):
    """Where precomputed-output files are dropped (``$FACETLAKE_INBOX`` or ``./inbox``)."""

    path: str = Field(default_factory=lambda: os.environ.get("FACETLAKE_INBOX", "inbox"))


# ----------------------------------------------------------------------------- inbox
@dg.sensor(job=evaluation_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext, lake: LakeStore, inbox: InboxConfig) -> dg.SensorResult | dg.SkipReason:
    """New or changed output files in the inbox become model versions of their evaluation and runs of that pair."""
    root = Path(inbox.path).expanduser()
    if not root.is_dir():
        return dg.SkipReason(f"inbox {root} does not exist; create it or set FACETLAKE_INBOX")
    seen: dict[str, float] = json.loads(context.cursor) if context.cursor else {}
    run_requests, waiting, bad, unsampled = [], [], [], []
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
        if not _samples_stored(lake, evaluation["fingerprint"]):
            # its samples are not written yet (the evaluation's first run may be writing them now):
            # a pair run started now would fail, so the file waits, unseen, for a later tick
            unsampled.append(evaluation["name"])
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
        key, version, changed = register_model(lake, evaluation["name"], model, f"precomputed:{file.resolve()}", source="inbox")
        seen[str(file)] = mtime
        if not changed:
            continue  # touched but identical content: nothing to re-run
        context.log.info(f"{file}: model {model} of {evaluation['name']} (version {version})")
        run_requests.append(
            dg.RunRequest(
                run_key=f"{file}:{mtime}",
                partition_key=key,
                tags={"facetlake/source": str(file), "facetlake/evaluation": evaluation["name"], "facetlake/model_version": str(version)},
            )
        )
    hint = _did_you_mean(lake, sorted(set(waiting))) if waiting else ""
    if waiting:
        context.log.info(f"files for unregistered evaluations {sorted(set(waiting))} wait until those are registered{hint}")
    if unsampled:
        context.log.info(f"files for evaluations {sorted(set(unsampled))} wait until their samples are stored "
                         "(`facetlake run SPEC` or the scheduler writes them)")
    if not run_requests:
        return dg.SensorResult(
            skip_reason="no new output files" + (f" (waiting on evaluations {sorted(set(waiting))}{hint})" if waiting else "")
            + (f" (waiting for the samples of {sorted(set(unsampled))})" if unsampled else "")
            + (f" (unreadable, see the log: {', '.join(bad)})" if bad else ""),
            cursor=json.dumps(seen, sort_keys=True),
        )
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=partition_requests(lake, context.instance),
        cursor=json.dumps(seen, sort_keys=True),
    )


def _did_you_mean(lake: LakeStore, folders: list[str]) -> str:
    """``; did you mean X for folder Y?`` for inbox folders close to a registered evaluation name."""
    import difflib

    names = lake.read("evaluations", columns=["name"])["name"].unique().to_list() if lake.exists("evaluations") else []
    hints = [f"{close[0]!r} for folder {folder!r}" for folder in folders
             if (close := difflib.get_close_matches(folder, names, n=1, cutoff=0.75))]
    return f"; did you mean {', '.join(hints)}?" if hints else ""


# ----------------------------------------------------------------------------- schedules
def latest_tick(cron: str, now: dt.datetime) -> dt.datetime:
    """The latest tick of ``cron`` (UTC) at or before ``now`` (Dagster's cron iterator)."""
    from dagster._utils.schedules import get_latest_completed_cron_tick

    return get_latest_completed_cron_tick(cron, now, "UTC")


def _samples_stored(lake: LakeStore, fingerprint: str) -> bool:
    return lake.exists("samples") and lake.read("samples", where={"fingerprint": fingerprint}, columns=["sample_id"]).height > 0


def scheduler_tick(lake: LakeStore, cursor: dict[str, Any], now: dt.datetime) -> tuple[list[dg.RunRequest], dict[str, Any], list[str]]:
    """One evaluation of the scheduler: (run requests, new cursor, log lines).

    ``cursor`` maps an evaluation name to ``{"last_tick": ISO, "pending": {...}}``. An
    evaluation seen for the first time starts from its latest tick (like a Dagster
    schedule, no catch-up). A due evaluation is resolved again; when its dataset changed
    the new fingerprint is registered and its ``samples`` partition is requested first
    (``pending``), its pairs on a later tick once the samples are stored."""
    from resources.catalog import evaluation_spec

    requests: list[dg.RunRequest] = []
    log: list[str] = []
    state = {k: dict(v) for k, v in cursor.items()}
    frame = lake.read("evaluations") if lake.exists("evaluations") else None
    scheduled = (
        frame.filter((pl.col("status") == "current") & ~pl.col("archived") & pl.col("schedule").is_not_null()).to_dicts()
        if frame is not None and frame.height else []
    )
    for row in scheduled:
        name = row["name"]
        tick = latest_tick(row["schedule"], now)
        entry = state.setdefault(name, {"last_tick": tick.isoformat()})
        pending = entry.get("pending")
        if pending:
            if _samples_stored(lake, pending["fingerprint"]):
                requests.extend(_pair_requests(lake, name, pending["fingerprint"], pending["tick"], pending.get("changed")))
                log.append(f"{name}: samples of {pending['fingerprint'][:12]} stored; running its models (tick {pending['tick']})")
                entry.pop("pending")
            elif now - dt.datetime.fromisoformat(pending["requested_at"]) > dt.timedelta(hours=6):
                log.append(f"{name}: samples of {pending['fingerprint'][:12]} never arrived for tick {pending['tick']}; giving up on that tick")
                entry.pop("pending")
            continue
        if tick <= dt.datetime.fromisoformat(entry["last_tick"]):
            continue
        entry["last_tick"] = tick.isoformat()
        stamp = tick.isoformat()
        try:
            resolved = register(evaluation_spec(lake, name), lake, None)
        except Exception as exc:  # noqa: BLE001 - one evaluation's bad tick never stops the others
            log.append(f"{name}: tick {stamp} not run: {exc}")
            continue
        reg = resolved.registration
        changed = f"{reg.previous_fingerprint[:12]}->{resolved.fingerprint[:12]}" if reg.previous_fingerprint else None
        for notice in reg.notices:
            log.append(notice)
        if _samples_stored(lake, resolved.fingerprint):
            requests.extend(_pair_requests(lake, name, resolved.fingerprint, stamp, changed))
            log.append(f"{name}: tick {stamp}: running {len(pairs_of(lake, resolved.fingerprint))} model(s)")
        else:
            key = evaluation_row(lake, resolved.fingerprint)["partition_key"]
            requests.append(dg.RunRequest(
                run_key=f"sched:{name}:{stamp}:samples", job_name=samples_job.name, partition_key=key,
                tags={"facetlake/evaluation": name, "facetlake/scheduled": stamp,
                      **({"facetlake/fingerprint_changed": changed} if changed else {})},
            ))
            entry["pending"] = {"fingerprint": resolved.fingerprint, "tick": stamp, "changed": changed,
                                "requested_at": now.isoformat()}
            log.append(f"{name}: tick {stamp}: new fingerprint {resolved.fingerprint[:12]}" + (f" ({changed})" if changed else "")
                       + "; materialising its samples first")
    active = {r["name"] for r in scheduled}
    state = {k: v for k, v in state.items() if k in active}
    return requests, state, log


def _pair_requests(lake: LakeStore, name: str, fingerprint: str, stamp: str, changed: str | None) -> list[dg.RunRequest]:
    from resources.catalog import evaluation_spec

    job = pair_job(evaluation_spec(lake, fingerprint))  # agent evaluations run their episodes
    return [
        dg.RunRequest(
            run_key=f"sched:{name}:{stamp}:{pair['model']}", job_name=job, partition_key=pair["partition_key"],
            tags={"facetlake/evaluation": name, "facetlake/scheduled": stamp, **({"facetlake/fingerprint_changed": changed} if changed else {})},
        )
        for pair in pairs_of(lake, fingerprint)
    ]


@dg.sensor(jobs=[evaluation_job, agent_job, samples_job], minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def evaluation_scheduler(context: dg.SensorEvaluationContext, lake: LakeStore) -> dg.SensorResult:
    """Runs every evaluation whose spec has a ``schedule`` on its own cron (UTC), with all its models."""
    cursor = json.loads(context.cursor) if context.cursor else {}
    requests, state, log = scheduler_tick(lake, cursor, dt.datetime.now(dt.timezone.utc))
    for line in log:
        context.log.info(line)
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=partition_requests(lake, context.instance) if requests else [],
        cursor=json.dumps(state, sort_keys=True),
        skip_reason=None if requests else ("; ".join(log) or "no scheduled evaluation is due"),
    )


# ----------------------------------------------------------------------------- agent episodes -> scores
def episodes_tick(instance: dg.DagsterInstance, after: int | None) -> tuple[list[dg.RunRequest], int | None]:
    """One evaluation of the episodes sensor: a ``scores_job`` request for each ``episodes``
    materialisation stored after the event storage id ``after`` (None: every one) by a run
    that the CLI did not start (the CLI scores the episodes it stores itself), and the last
    storage id seen. Run keys are the materialisation's storage id: each is scored once."""
    result = instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey("episodes"), after_storage_id=after),
                                             limit=1000, ascending=True)
    requests, last = [], after
    for record in result.records:
        last = record.storage_id
        run = instance.get_run_by_id(record.run_id)
        if record.partition_key is None or (run is not None and run.tags.get("facetlake/source", "").startswith("cli")):
            continue
        requests.append(dg.RunRequest(
            run_key=f"score-episodes:{record.storage_id}", job_name=scores_job.name, partition_key=record.partition_key,
            tags={"facetlake/evaluation": record.partition_key.split("@", 1)[0], "facetlake/episodes_run": record.run_id},
        ))
    return requests, last


@dg.sensor(job=scores_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def episodes_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Scores an agent's episodes after a run the CLI did not start stored them (the scheduler, the UI)."""
    requests, last = episodes_tick(context.instance, int(context.cursor) if (context.cursor or "").isdigit() else None)
    return dg.SensorResult(run_requests=requests, cursor=str(last) if last is not None else context.cursor,
                           skip_reason=None if requests else "no new agent episodes to score")


# ----------------------------------------------------------------------------- freshness
# a run in one of these states may still write the evaluation's scores or verdicts. NOT_STARTED is
# left out: a run killed before it started stays there for ever (issue 26, item 6) and would block
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
             dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.SUSPENDED]
# a run created but not yet queued (a CLI between create_run and submit_run) is in flight too
# for this long; older NOT_STARTED runs are taken as killed before they started
CREATED_GRACE = dt.timedelta(minutes=10)
MARKER_TAG = "facetlake/scores_marker"  # the scores (assets/freshness.py scores_marker, 16 hex) an analysis run was asked for
ANALYSIS_RETRIES = "2"  # Dagster's run retries (dagster.yaml run_retries) re-run a killed or failed analysis run


def analysis_tick(lake: LakeStore, instance: dg.DagsterInstance, cursor: dict[str, Any]) -> tuple[list[dg.RunRequest], dict[str, Any], list[str]]:
    """One evaluation of the analysis sensor: (run requests, new cursor, log lines).

    An evaluation's verdicts are stale when the latest run of a verdict asset did not read
    the scores stored now (assets/freshness.py): whatever changed them (CLI, UI, schedule,
    inbox) and whatever was killed when (a process killed between its scores and its
    verdicts leaves them stale; a run that reused every score leaves them fresh). Every
    active evaluation is checked when the ``scores`` or ``evaluations`` table has a new
    Delta version since the last tick (always at the first tick), and the evaluations
    still stale at the last tick are checked again.

    A stale evaluation with a run in progress on one of its partitions waits for it (it may
    still be writing scores, or be the analysis itself). Otherwise the jobs of its stale
    verdicts are requested, once per scores marker (the run key): a failed or killed one is
    re-run by Dagster's run retries (``dagster/max_retries``); once they are spent the
    evaluation is reported and left until its scores change again or a CLI command repairs
    it. ``cursor``: ``{"versions": [scores, evaluations], "stale": {evaluation key: marker}}``."""
    from assets.freshness import freshness
    from pipelines.jobs import verdict_jobs

    versions = [lake.version("scores"), lake.version("evaluations")]
    if versions[0] is None or versions[1] is None:
        return [], {"versions": versions, "stale": {}}, []
    evals = lake.read("evaluations", columns=["fingerprint", "partition_key", "status", "archived"])
    active = dict(evals.filter((pl.col("status") == "current") & ~pl.col("archived")).select("fingerprint", "partition_key").iter_rows())
    before = cursor.get("stale") or {}
    check = list(active) if versions != cursor.get("versions") else [fp for fp, key in active.items() if key in before]
    requests: list[dg.RunRequest] = []
    stale: dict[str, str] = {}
    log: list[str] = []
    for fp, state in freshness(lake, check).items():
        if not state.stale or state.marker is None:
            continue
        key, marker = active[fp], state.marker[:16]
        what = f"{key}: {', '.join(state.stale)} older than its scores"
        partitions = [key, *(p["partition_key"] for p in pairs_of(lake, fp))]
        busy = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partitions}, statuses=IN_FLIGHT), limit=1) or \
            instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partitions}, statuses=[dg.DagsterRunStatus.NOT_STARTED],
                                                    created_after=dt.datetime.now(dt.timezone.utc) - CREATED_GRACE), limit=1)
        if busy:
            stale[key] = marker
            log.append(f"{what}; waiting for run {busy[0].run_id[:8]} ({busy[0].job_name}) on it")
            continue
        for job in verdict_jobs(state.stale):
            earlier = instance.get_runs(filters=dg.RunsFilter(job_name=job, tags={"dagster/partition": key, MARKER_TAG: marker}), limit=1)
            if earlier and earlier[0].tags.get("dagster/will_retry") == "true":
                stale[key] = marker  # Dagster's run retries will start the next attempt
                continue
            if earlier:  # asked for these scores already: it failed and its retries are spent
                log.append(f"{what}; its {job} run {earlier[0].run_id[:8]} for these scores ended {earlier[0].status.value}: "
                           "see that run; `facetlake run SPEC` or `facetlake score -e EVAL -m METRIC` recomputes them")
                continue
            stale[key] = marker
            log.append(f"{what}: requesting {job}")
            requests.append(dg.RunRequest(
                run_key=f"{job}:{key}:{marker}", job_name=job, partition_key=key,
                tags={"facetlake/evaluation": key.split("@", 1)[0], MARKER_TAG: marker, "dagster/max_retries": ANALYSIS_RETRIES},
            ))
    return requests, {"versions": versions, "stale": stale}, log


@dg.sensor(jobs=[analysis_job, agent_analysis_job, lm_eval_analysis_job], minimum_interval_seconds=30,
           default_status=dg.DefaultSensorStatus.RUNNING)
def analysis_sensor(context: dg.SensorEvaluationContext, lake: LakeStore) -> dg.SensorResult:
    """Runs an evaluation's summary, comparisons and correlations (pass^k for agents, lm-eval's summary for lm-eval runs) whenever they are older than its scores."""
    try:
        cursor = json.loads(context.cursor) if context.cursor else {}
    except ValueError:
        cursor = {}
    if not isinstance(cursor, dict):  # an older cursor (a storage id): check every evaluation once
        cursor = {}
    requests, state, log = analysis_tick(lake, context.instance, cursor)
    for line in log:
        context.log.info(line)
    return dg.SensorResult(
        run_requests=requests, cursor=json.dumps(state, sort_keys=True),
        skip_reason=None if requests else ("; ".join(log) or "every evaluation's verdicts are as new as its scores"),
    )
