"""The Dagster instance the CLI runs on: ``$DAGSTER_HOME``, or the project folder (it holds
dagster.yaml), opened under a file lock, with runs of this host left by a killed process
marked failed first (pipelines/runs/run_health.py).

Apart from the runner so that a command that only needs the instance (``facetlake
evaluations archive``, ``migrate``, ``ui``) does not load the code location.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

import dagster as dg

from pipelines.runs.heap import freeze_long_lived
from pipelines.runs.instance_storage import in_process_instance
from pipelines.runs.run_health import fail_dead_runs


PROJECT_ROOT = Path(__file__).resolve().parents[2]


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else the project folder (it holds dagster.yaml)."""
    home = os.environ.get("DAGSTER_HOME")
    return Path(home) if home else PROJECT_ROOT


@contextlib.contextmanager
def _instance_lock(home: Path) -> Iterator[None]:
    """An exclusive file lock on the Dagster home while an instance opens (POSIX; a no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".facetlake-instance.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def get_instance(ephemeral: bool = False, capture_logs: bool = True) -> dg.DagsterInstance:
    """The persistent Dagster instance under :func:`dagster_home` (or an ephemeral one).
    Runs of this host left in progress by a killed process are marked failed first
    (pipelines/runs/run_health.py).

    ``capture_logs=False`` is for a process that executes its runs itself (in process): their
    stdout/stderr go to the terminal and are not copied into Dagster's compute logs, and the
    default SQLite event log keeps one engine per file (pipelines/runs/instance_storage.py). Runs
    launched or submitted from this instance would inherit that (the run worker gets this
    instance's settings), so only pass it where every run stays in this process.

    In a command line process this is where the command has imported what it runs: the
    objects alive now are frozen for the garbage collector (pipelines/runs/heap.py)."""
    freeze_long_lived()
    if ephemeral:
        return dg.DagsterInstance.ephemeral()
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DAGSTER_HOME", str(home))
    with _instance_lock(Path(os.environ["DAGSTER_HOME"])):  # two first CLIs on a fresh home both create its SQLite tables
        home_dir = os.path.expanduser(os.environ["DAGSTER_HOME"])
        if capture_logs or not os.path.isabs(home_dir):
            instance = dg.DagsterInstance.get()  # (its own error for a relative $DAGSTER_HOME)
        else:
            instance = in_process_instance(home_dir)
    fail_dead_runs(instance)  # runs of this host whose process was killed stop blocking the queue (issue 16)
    return instance
