"""Runs launched through Dagster's own machinery, never around it.

``facetlake run --submit`` (and ``--workers N``) creates real Dagster runs of the project's
jobs on the configured instance, exactly as the UI would:

- ``submit``: the run goes to the instance's run coordinator. With the queued coordinator
  (dagster.yaml's ``concurrency:`` section) it waits in the run queue, so concurrency
  pools, ``max_concurrent_runs``, run retries and run monitoring apply; a daemon
  (``facetlake ui``, ``dagster dev`` or ``dagster-daemon run``) dequeues it.
- ``launch``: the run goes straight to the instance's run launcher (each run in its own
  process; no daemon needed), for local parallelism.

Either way the run's steps execute on the executor the Definitions choose
(``$FACETLAKE_EXECUTOR``: ``multiprocess`` by default, ``celery`` on shared
infrastructure, ``in_process``). The lake root travels in the run config of the ``lake``
resource; storage credentials never do (they come from each process's environment).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import dagster as dg

from metric_ops.errors import FacetlakeError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


class LaunchError(FacetlakeError, RuntimeError):
    """A run could not be created or did not succeed; the message names it and where to look."""


@dataclass
class RunSpec:
    """One run to create: job, partition key, tags and run config."""

    job: str
    partition: str
    tags: Mapping[str, str] = field(default_factory=dict)
    run_config: Mapping[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def workspace(instance: dg.DagsterInstance, workspace_file: str | Path | None = None) -> Iterator[Any]:
    """A request context over the project's code location (``workspace.yaml``), served by
    a code server process for as long as the block runs."""
    from dagster import __version__
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    target = WorkspaceFileTarget(paths=[str(workspace_file or PROJECT_ROOT / "workspace.yaml")])
    with WorkspaceProcessContext(instance=instance, version=__version__, read_only=False,
                                 workspace_load_target=target, code_server_log_level="WARNING") as process_context:
        context = process_context.create_request_context()
        errors = [entry for entry in context.get_code_location_entries().values() if entry.load_error]
        if errors:
            raise LaunchError(f"the code location failed to load: {errors[0].load_error.message[:500]}")
        yield context


def _remote_job(context: Any, job_name: str):
    (entry,) = context.get_code_location_entries().values()
    location = entry.code_location
    (repo,) = location.get_repositories().values()
    return location, repo, repo.get_full_job(job_name)


def create_run(instance: dg.DagsterInstance, context: Any, spec: RunSpec) -> dg.DagsterRun:
    """Create (not start) a run of ``spec`` against the code location, as ``dagster job launch`` does."""
    from dagster._core.definitions.selector import JobSubsetSelector

    location, repo, remote_job = _remote_job(context, spec.job)
    tags = {**remote_job.tags, **dict(spec.tags), "dagster/partition": spec.partition}
    selector = JobSubsetSelector(location_name=location.name, repository_name=repo.name, job_name=spec.job, op_selection=None)
    remote_job = location.get_job(selector)
    plan = location.get_execution_plan(remote_job, dict(spec.run_config), step_keys_to_execute=None, known_state=None,
                                       instance=instance)
    snapshot = plan.execution_plan_snapshot
    return instance.create_run(
        job_name=spec.job, run_id=None, run_config=dict(spec.run_config), resolved_op_selection=None,
        step_keys_to_execute=snapshot.step_keys_to_execute, op_selection=None, status=None, root_run_id=None,
        parent_run_id=None, tags=tags, job_snapshot=remote_job.job_snapshot, execution_plan_snapshot=snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot, remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(), asset_selection=None, asset_check_selection=None,
        asset_graph=repo.asset_graph,
    )


def ensure_pool_limits(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """Give every pool ``run`` needs its limit (dagster.yaml ``concurrency.pools.default_limit``)
    before the run is queued; returns the pools initialised now.

    Dagster's run queue reads the set of limited pools once per pass and only then
    initialises a pool seen for the first time to the default limit, so two runs queued
    together on a fresh instance both pass a pool of limit 1 (seen here: two concurrent
    ``facetlake run --submit`` of one live evaluation sent every request twice). With the
    limit in place first, the queue holds the second run until the first has finished.
    """
    pools = sorted(p for p in ((run.run_op_concurrency.all_pools if run.run_op_concurrency else None) or []) if p)
    if not pools or instance.global_op_concurrency_default_limit is None:
        return []
    storage = instance.event_log_storage
    known = storage.get_concurrency_keys()
    done = []
    for pool in (p for p in pools if p not in known):
        try:
            if storage.initialize_concurrency_limit_to_default(pool):
                done.append(pool)
        except Exception:
            # another process initialised it at the same moment (unique key): fine once it is there
            if pool not in storage.get_concurrency_keys():
                raise
    return done


def start_runs(instance: dg.DagsterInstance, context: Any, specs: Sequence[RunSpec], submit: bool) -> list[str]:
    """Create each run and hand it to the run coordinator (``submit``) or the run launcher."""
    ids = []
    for spec in specs:
        run = create_run(instance, context, spec)
        if submit:
            ensure_pool_limits(instance, run)
            instance.submit_run(run.run_id, context)
        else:
            instance.launch_run(run.run_id, context)
        ids.append(run.run_id)
    return ids


def wait_for(instance: dg.DagsterInstance, run_ids: Sequence[str], label: str, timeout_s: float | None = None,
             poll_s: float = 0.5) -> dict[str, dg.DagsterRunStatus]:
    """Wait until every run is finished, with a progress bar; returns run id -> status.
    Raises :class:`LaunchError` on timeout (the runs go on: the UI shows them)."""
    from tqdm.auto import tqdm

    pending = set(run_ids)
    status: dict[str, dg.DagsterRunStatus] = {}
    start = time.monotonic()
    with tqdm(total=len(run_ids), desc=label, leave=False, disable=None) as bar:
        while pending:
            for run_id in sorted(pending):
                run = instance.get_run_by_id(run_id)
                if run is not None and run.status in TERMINAL:
                    status[run_id] = run.status
                    pending.discard(run_id)
                    bar.update(1)
            if pending:
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    raise LaunchError(f"{len(pending)} run(s) still not finished after {timeout_s:.0f} s (e.g. {sorted(pending)[0]}): "
                                      "is a daemon running for the queue (`facetlake ui` or `dagster-daemon run`)?")
                time.sleep(poll_s)
    return status


def run_all(instance: dg.DagsterInstance, context: Any, specs: Sequence[RunSpec], submit: bool, label: str,
            workers: int | None = None, timeout_s: float | None = None) -> dict[str, dg.DagsterRunStatus]:
    """Start ``specs`` (at most ``workers`` at a time when launching directly; the run queue
    limits submitted ones) and wait for them; raises :class:`LaunchError` naming the runs
    that did not succeed."""
    status: dict[str, dg.DagsterRunStatus] = {}
    batch = len(specs) if submit or not workers else max(1, workers)
    for start in range(0, len(specs), batch):
        ids = start_runs(instance, context, specs[start:start + batch], submit)
        status.update(wait_for(instance, ids, label, timeout_s))
    failed = [(rid, s) for rid, s in status.items() if s != dg.DagsterRunStatus.SUCCESS]
    if failed:
        run_id, state = failed[0]
        raise LaunchError(f"{len(failed)} of {len(status)} {label} run(s) did not succeed (e.g. run {run_id[:8]}: {state.value}); "
                          "`facetlake ui` shows the run's logs")
    return status
