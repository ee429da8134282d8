"""Dead runs never block the run queue (issue 16, item 6).

A run whose process is killed (``kill -9``, an OOM kill, a lost machine) stays STARTED in
Dagster's run storage: it keeps its place in ``max_concurrent_runs`` and its pool slots,
and queued runs wait behind it. Dagster's run monitoring fails such runs only when the
run launcher can check a run worker's health, and the default run launcher cannot (its
``supports_check_run_worker_health`` is False), so monitoring alone would wait for
``max_runtime_seconds`` (hours). Two pieces close that gap:

- :class:`HealthCheckedRunLauncher`: the default run launcher plus a worker health
  check. A run's process is known from the ``facetlake/pid`` and ``facetlake/host`` tags
  (CLI in-process runs) or from Dagster's own "Started process for run (pid: N)" engine
  event (launched runs). A run on this host whose process is gone is FAILED; the
  daemon's run monitoring (dagster.yaml ``run_monitoring``, polled every
  ``poll_interval_seconds``) then marks it failed, so a dead run is failed within one
  poll interval. A run on another host is reported RUNNING (that host's daemon checks
  it; ``max_runtime_seconds`` bounds it in any case).
- :func:`fail_dead_runs`: the same check run by the CLI at start-up over every
  in-progress run of this host, so a re-run after a crash never waits for a daemon.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus

PID_TAG, HOST_TAG = "facetlake/pid", "facetlake/host"
IN_PROGRESS = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.CANCELING)


def process_tags() -> dict[str, str]:
    """The tags naming this process (pid and host), for runs executed in it."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (killed child not yet reaped) is dead too
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def run_process(instance: dg.DagsterInstance, run: dg.DagsterRun, events: bool = True) -> tuple[int | None, str | None]:
    """(pid, host) of the process executing ``run``: from its tags, else (``events``) from
    Dagster's "Started process for run" engine event, whose process runs on the host of
    the code server that launched it (the daemon's own host, for the run launcher)."""
    pid, host = run.tags.get(PID_TAG), run.tags.get(HOST_TAG)
    if pid and pid.isdigit():
        return int(pid), host
    if not events:
        return None, None
    try:
        records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=50).records
    except Exception:  # noqa: BLE001 - storage without event queries: unknown
        return None, None
    for record in records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event is None or "Started process for run" not in (entry.user_message or event.message or ""):
            continue
        data = event.event_specific_data
        value = (getattr(data, "metadata", None) or {}).get("pid")
        value = getattr(value, "value", value)
        if value is not None and str(value).isdigit():
            return int(value), socket.gethostname()
    return None, None


def worker_status(instance: dg.DagsterInstance, run: dg.DagsterRun, events: bool = True) -> tuple[WorkerStatus, str]:
    """FAILED (with the reason) when ``run``'s process is known, on this host, and gone; else
    RUNNING. ``events``: also trust the engine event's pid (see :func:`run_process`)."""
    pid, host = run_process(instance, run, events)
    if pid is None:
        return WorkerStatus.RUNNING, "process unknown"
    if host and host != socket.gethostname():
        return WorkerStatus.RUNNING, f"process {pid} runs on {host}"
    if _alive(pid):
        return WorkerStatus.RUNNING, f"process {pid} is alive"
    return WorkerStatus.FAILED, f"the process running it (pid {pid} on {host or socket.gethostname()}) no longer exists"


class HealthCheckedRunLauncher(DefaultRunLauncher):
    """Dagster's default run launcher with a run worker health check (see the module docstring)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        status, message = worker_status(self._instance, run)
        return CheckRunHealthResult(status, message)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "HealthCheckedRunLauncher":
        return cls(inst_data=inst_data)


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every in-progress run of this host whose process is gone; returns their ids.
    Only runs tagged with their pid and host count: a CLI on another machine than the code
    server must not judge a launched run's pid against its own process table. A CLI run
    killed after Dagster created it but before it started stays NOT_STARTED for ever
    (issue 26, fault 6): such a run, tagged with a process that is gone, is failed too (a
    run created by the UI or a sensor carries no pid tag and is left to the daemon)."""
    failed = []
    statuses = [*IN_PROGRESS, dg.DagsterRunStatus.NOT_STARTED]
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses, tags={HOST_TAG: socket.gethostname()})):
        status, message = worker_status(instance, run, events=False)
        if status == WorkerStatus.FAILED:
            instance.report_run_failed(run, f"facetlake: run {run.run_id[:8]} is marked failed: {message} (killed or crashed)")
            failed.append(run.run_id)
    return failed


__all__ = ["HealthCheckedRunLauncher", "PID_TAG", "HOST_TAG", "fail_dead_runs", "process_tags", "worker_status"]
