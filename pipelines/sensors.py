"""Recurring evaluations: the evaluation scheduler, the inbox sensor and the analysis sensor.

All three start RUNNING (``dagster dev`` / ``dagster-daemon`` run them with no hand step):

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
- ``analysis_sensor``: every new ``scores`` materialisation (CLI, UI, schedule, inbox)
  runs its evaluation's ``analysis_job`` (summary, comparisons with the regression alert,
  correlations) unless those are already newer, so verdicts never go stale.
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
from pipelines.jobs import agent_analysis_job, agent_job, analysis_job, evaluation_job, samples_job
from resources.catalog import CatalogError, evaluation_row, find_evaluation, pair_row, pairs_of, register_model
from resources.backends import BackendError, PrecomputedBackend
from resources.evaluation import MODEL_SLUG, slugify_model
from resources.lake import LakeStore

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
    from pipelines.runner import register
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
    from pipelines.runner import pair_job
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


# ----------------------------------------------------------------------------- freshness
def stale_evaluations(lake: LakeStore, instance: dg.DagsterInstance, after: int | None) -> tuple[dict[str, int], int | None]:
    """Evaluation partition keys whose verdicts are older than their scores: scores
    materialisations after storage id ``after`` mapped to their evaluation (current pairs
    only), minus those whose ``comparisons`` were materialised later or whose analysis run
    is already queued or running. Returns (key ->
    newest scores storage id, new cursor)."""
    newest: dict[str, int] = {}
    last = after
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("scores"), after_storage_id=after), limit=1000, ascending=True
    ).records
    for record in records:
        last = record.storage_id
        key = record.partition_key
        if not key:
            continue
        try:
            pair = pair_row(lake, key)
        except CatalogError:
            continue
        if pair["status"] != "current":
            continue
        ekey = key.rsplit(":", 1)[0]
        newest[ekey] = max(newest.get(ekey, 0), record.storage_id)
    stale = {}
    for ekey, sid in newest.items():
        done = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("comparisons"), asset_partitions=[ekey]), limit=1
        ).records
        if done and done[0].storage_id >= sid:
            continue
        queued = instance.get_runs(
            filters=dg.RunsFilter(job_name=analysis_job.name, tags={"dagster/partition": ekey},
                                  statuses=[dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
                                            dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]), limit=1)
        if not queued:  # an analysis run already on its way (e.g. `facetlake run --submit`) reads the new scores
            stale[ekey] = sid
    return stale, last


@dg.sensor(jobs=[analysis_job, agent_analysis_job], minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def analysis_sensor(context: dg.SensorEvaluationContext, lake: LakeStore) -> dg.SensorResult | dg.SkipReason:
    """After any change of an evaluation's scores, runs its summary, comparisons and correlations (and pass^k for agents)."""
    from resources.episodes import has_episodes

    after = int(context.cursor) if context.cursor else None
    stale, last = stale_evaluations(lake, context.instance, after)
    requests = []
    for key, sid in sorted(stale.items()):
        tags = {"facetlake/evaluation": key.split("@", 1)[0]}
        requests.append(dg.RunRequest(run_key=f"analysis:{key}:{sid}", job_name=analysis_job.name, partition_key=key, tags=tags))
        if has_episodes(lake, evaluation_row(lake, key)["fingerprint"]):
            requests.append(dg.RunRequest(run_key=f"agents:{key}:{sid}", job_name=agent_analysis_job.name, partition_key=key, tags=tags))
    cursor = str(last) if last is not None else context.cursor
    if not requests:
        return dg.SensorResult(skip_reason="every evaluation's verdicts are up to date", cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)
