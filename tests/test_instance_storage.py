"""The Dagster instance of an in-process CLI run (pipelines/runs/instance_storage.py, issue 14).

The CLI's in-process runs use an event log that keeps one SQLite connection per run file
and creates a new run's file without reloading Alembic's scripts, and no compute-log
capture. What must not change: the files, schema, Alembic stamp and rows the stock
storage writes and reads (the UI and the daemon read these runs with the stock class), and
any other storage a home configures (PostgreSQL). The saving is guarded by counting work:
Alembic's script directory is loaded once per process, not twice per run.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from pipelines.runs.instance_storage import CachedEngineSqliteEventLogStorage, in_process_instance, in_process_overrides

ROOT = Path(__file__).resolve().parents[1]


def _entry(run_id: str, message: str) -> EventLogEntry:
    return EventLogEntry(error_info=None, level=20, user_message=message, run_id=run_id, timestamp=time.time())


def _run_event(run_id: str, kind: str) -> EventLogEntry:
    """A run status event (``RUN_START``, ``RUN_SUCCESS``...) as Dagster stores it."""
    from dagster._core.events import DagsterEvent, DagsterEventType

    event = DagsterEvent(event_type_value=DagsterEventType[kind].value, job_name="j")
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(), dagster_event=event)


def _fds_under(folder: Path) -> list[str]:
    """Files under ``folder`` this process holds open (Linux /proc)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


def _shape(path: Path) -> tuple:
    conn = sqlite3.connect(path)
    try:
        schema = sorted(conn.execute("select type, name, tbl_name, sql from sqlite_master").fetchall(), key=str)
        return schema, conn.execute("select version_num from alembic_version").fetchall(), conn.execute("pragma journal_mode").fetchall()
    finally:
        conn.close()


def _in_process_home(tmp_path: Path, monkeypatch) -> tuple[Path, object]:
    """A Dagster home with the project's dagster.yaml (set as DAGSTER_HOME) and its in-process instance."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home, in_process_instance(str(home))


def test_a_new_run_file_is_the_stock_one_and_the_stock_class_reads_it(tmp_path, monkeypatch):
    """run-a's file is made through SQLAlchemy and Alembic and its statements recorded;
    run-b's by replaying them: both equal the stock class's files."""
    from pipelines.runs import instance_storage

    monkeypatch.setattr(instance_storage, "_SHARD_STATEMENTS", None)
    stock_dir, ours_dir = tmp_path / "stock", tmp_path / "ours"
    stock_dir.mkdir()
    ours_dir.mkdir()
    stock = SqliteEventLogStorage(str(stock_dir))
    ours = CachedEngineSqliteEventLogStorage(str(ours_dir))
    for storage in (stock, ours):
        for i in range(3):
            storage.store_event(_entry("run-a", f"event {i}"))
        storage.store_event(_entry("run-b", "other run"))
    ours.dispose()
    stock.dispose()
    assert instance_storage._SHARD_STATEMENTS and any("alembic_version" in sql for sql, _ in instance_storage._SHARD_STATEMENTS)
    for run in ("run-a", "run-b"):
        schema, stamp, journal = _shape(ours_dir / f"{run}.db")
        assert (schema, stamp, journal) == _shape(stock_dir / f"{run}.db")
        assert stamp and stamp[0][0] and journal == [("wal",)]
    assert _shape(ours_dir / "index.db") == _shape(stock_dir / "index.db")
    reader = SqliteEventLogStorage(str(ours_dir))  # what the UI and the daemon use
    assert [e.user_message for e in reader.get_logs_for_run("run-a")] == ["event 0", "event 1", "event 2"]
    assert [e.user_message for e in reader.get_logs_for_run("run-b")] == ["other run"]


def test_connections_are_bounded_and_closed(tmp_path):
    ours = CachedEngineSqliteEventLogStorage(str(tmp_path))
    ours.store_event(_run_event("run-0", "RUN_START"))  # kept only while a run is in progress
    for i in range(ours.MAX_SHARDS + 5):
        ours.store_event(_entry(f"run-{i}", "x"))
    assert len(ours._engines) == ours.MAX_SHARDS  # least recently used closed first
    assert f"run-{ours.MAX_SHARDS + 4}" in ours._engines and "run-0" not in ours._engines
    ours.store_event(_entry("run-0", "again"))  # a closed file opens again, its rows intact
    assert [e.user_message for e in ours.get_logs_for_run("run-0")][1:] == ["x", "again"]  # after RUN_START
    ours.store_event(_run_event("run-0", "RUN_SUCCESS"))
    assert not ours._engines and _fds_under(tmp_path) == []  # the run ended: nothing held open
    ours.store_event(_entry("run-1", "after"))  # outside a run: opened and closed per statement
    assert not ours._engines and [e.user_message for e in ours.get_logs_for_run("run-1")] == ["x", "after"]
    ours.store_event(_run_event("run-2", "RUN_START"))
    ours.store_event(_entry("run-2", "y"))
    assert ours._engines
    ours.dispose()
    assert not ours._engines and _fds_under(tmp_path) == []


def test_connections_are_reused_within_a_run(tmp_path, monkeypatch):
    """The saving: one engine per database file during a run, not one per event."""
    from dagster._core.storage import sql as dagster_sql

    created = []
    original = dagster_sql.create_engine
    monkeypatch.setattr(dagster_sql, "create_engine", lambda *a, **k: created.append(a[0]) or original(*a, **k))
    ours = CachedEngineSqliteEventLogStorage(str(tmp_path))
    created.clear()
    ours.store_event(_run_event("run-a", "RUN_START"))
    for i in range(20):
        ours.store_event(_entry("run-a", f"event {i}"))
    ours.store_event(_run_event("run-a", "RUN_SUCCESS"))
    assert len(created) == 2  # run-a.db and index.db (the run status events are mirrored there)
    assert len(ours.get_logs_for_run("run-a")) == 22
    ours.dispose()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir() or not hasattr(os, "fork"), reason="needs Linux /proc and fork")
def test_a_forked_child_forgets_the_parents_connections_without_closing_them(tmp_path):
    from pipelines.runs import instance_storage

    ours = CachedEngineSqliteEventLogStorage(str(tmp_path))
    ours.store_event(_run_event("run-f", "RUN_START"))
    ours.store_event(_entry("run-f", "before"))
    assert ours._engines
    pid = os.fork()
    if pid == 0:  # the child: nothing it touches may close the parent's SQLite files
        ok = not ours._engines and not ours._open_runs and len(instance_storage._INHERITED) >= 2
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ours.store_event(_entry("run-f", "after"))
    ours.store_event(_run_event("run-f", "RUN_SUCCESS"))
    assert [e.user_message for e in ours.get_logs_for_run("run-f")][1:3] == ["before", "after"]
    conn = sqlite3.connect(tmp_path / "run-f.db")
    assert conn.execute("pragma integrity_check").fetchone() == ("ok",)
    conn.close()
    ours.dispose()


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
def test_no_connection_outlives_a_command_so_reading_the_home_cannot_corrupt_it(tmp_path, monkeypatch, capsys):
    """The CI failure of 2026-12-01 ("database disk image is malformed"), reproduced: an
    in-process `facetlake run` that left SQLite connections open, then any other open and
    close of those files in the same process (here reading every file of the home, as a
    test and an archive do), then another process writing to the same home, broke the
    next in-process run. Nothing may stay open after a command."""
    import subprocess
    import sys

    from pipelines import cli

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("FACETLAKE_DEBUG", raising=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: held\ndataset: {kind: sfres, limit: 5}\nmodels: {m: 'precomputed:column=system_output'}\nmetrics: [bleu]\n")

    def run_here(lake: str) -> int:
        monkeypatch.setattr(sys, "argv", ["facetlake", "run", str(spec), "--lake", str(tmp_path / lake)])
        with pytest.raises(SystemExit) as exc:
            cli.main()
        return exc.value.code

    assert run_here("lake-1") == 0, capsys.readouterr().err
    assert _fds_under(home) == []
    assert sum(len(p.read_bytes()) for p in home.rglob("*") if p.is_file()) > 0  # every file opened and closed here
    other = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(spec), "--lake", str(tmp_path / "lake-2")],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert other.returncode == 0, other.stderr[-2000:]
    assert run_here("lake-3") == 0, capsys.readouterr().err
    for db in (home / "history" / "runs").glob("*.db"):
        conn = sqlite3.connect(db)
        assert conn.execute("pragma integrity_check").fetchone() == ("ok",), db.name
        conn.close()


def test_overrides_keep_a_configured_storage(tmp_path):
    default_home = tmp_path / "default"
    default_home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", default_home / "dagster.yaml")
    overrides = in_process_overrides(str(default_home))
    assert overrides["compute_logs"]["class"] == "NoOpComputeLogManager"
    assert overrides["event_log_storage"]["class"] == "CachedEngineSqliteEventLogStorage"
    assert overrides["event_log_storage"]["config"]["base_dir"] == os.path.join(str(default_home), "history", "runs", "")
    assert overrides["run_storage"]["class"] == "CachedEngineSqliteRunStorage"
    assert overrides["run_storage"]["config"]["base_dir"] == os.path.join(str(default_home), "history", "")  # runs.db's folder
    # the deploy profile's PostgreSQL storage (parsed, never connected) stays as configured
    pg_home = tmp_path / "pg"
    pg_home.mkdir()
    (pg_home / "dagster.yaml").write_text(
        "storage:\n  postgres:\n    postgres_db:\n      username: u\n      password: p\n      hostname: 127.0.0.1\n"
        "      db_name: d\n      port: 5432\n"
    )
    assert set(in_process_overrides(str(pg_home))) == {"compute_logs"}
    legacy_home = tmp_path / "legacy"
    legacy_home.mkdir()
    (legacy_home / "dagster.yaml").write_text(
        "event_log_storage:\n  module: dagster._core.storage.event_log\n  class: SqliteEventLogStorage\n"
        f"  config:\n    base_dir: {legacy_home / 'elsewhere'}\n"
    )
    assert set(in_process_overrides(str(legacy_home))) == {"compute_logs"}


def test_an_in_process_run_is_read_by_the_stock_instance_and_loads_alembic_scripts_once(tmp_path, monkeypatch):
    import dagster as dg
    from alembic.script import ScriptDirectory
    from dagster._core.instance.ref import InstanceRef

    from pipelines.runs import instance_storage
    from pipelines.runs.runner import materialize_samples
    from pipelines.runs.register import register
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    home, instance = _in_process_home(tmp_path, monkeypatch)
    assert type(instance.event_log_storage) is CachedEngineSqliteEventLogStorage
    assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
    lake = LakeStore(root=str(tmp_path / "lake"))
    resolved = register(small_spec(name="instance-storage", limit=5), lake, instance)
    instance_storage._event_log_scripts.cache_clear()
    monkeypatch.setattr(instance_storage, "_SHARD_STATEMENTS", None)  # as in a new process
    loads = []
    original = ScriptDirectory.from_config
    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(lambda cls, cfg: loads.append(1) or original(cfg)))
    runs = [materialize_samples(resolved.fingerprint, lake, instance).run_id for _ in range(3)]
    assert len(loads) == 1  # the stock storage loads them twice for every run (check, then stamp); later shards replay
    stock = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))  # what `dagster dev` opens
    assert type(stock.event_log_storage) is SqliteEventLogStorage
    for run_id in runs:
        assert stock.get_run_by_id(run_id).is_success
        kinds = {e.dagster_event.event_type_value for e in stock.all_logs(run_id) if e.dagster_event}
        assert {"ASSET_MATERIALIZATION", "STEP_SUCCESS", "PIPELINE_SUCCESS"} <= kinds
        assert not list((home / "storage").glob(f"{run_id}/**/*.out"))  # no compute-log files in process
    materialization = stock.get_latest_materialization_event(dg.AssetKey("samples"))
    assert materialization is not None and materialization.run_id == runs[-1]
    instance.dispose()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
def test_a_command_s_runs_keep_one_connection_per_file_and_close_them_after(tmp_path, monkeypatch):
    """issue 26, "Fixed cost of a run": inside ``hold_connections`` (a command's runs) the run
    storage keeps one connection to runs.db and the event log one per file, from a run's
    creation and planned events (stored before its RUN_START) to its end; the stock classes
    open an engine per statement (about 100 for runs.db in a two-model run). Afterwards
    nothing of the home is open, and the stock instance reads the runs."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef
    from dagster._core.storage import sql as dagster_sql
    from dagster._core.storage.runs.sqlite import sqlite_run_storage

    from pipelines.runs.instance_storage import CachedEngineSqliteRunStorage, hold_connections
    from pipelines.runs.register import register
    from pipelines.runs.runner import materialize_samples
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    home, instance = _in_process_home(tmp_path, monkeypatch)
    assert type(instance.run_storage) is CachedEngineSqliteRunStorage
    lake = LakeStore(root=str(tmp_path / "lake"))
    resolved = register(small_spec(name="held-connections", limit=5), lake, instance)
    created: list[str] = []
    original = dagster_sql.create_engine

    def counting(url, *a, **k):
        created.append(os.path.basename(str(url)))
        return original(url, *a, **k)

    monkeypatch.setattr(dagster_sql, "create_engine", counting)
    monkeypatch.setattr(sqlite_run_storage, "create_engine", counting)  # the stock run storage's own name
    run_ids = []
    with hold_connections(instance):
        for _ in range(2):
            run_ids.append(materialize_samples(resolved.fingerprint, lake, instance).run_id)
        assert _fds_under(home)  # held while the block lasts
    assert created.count("runs.db") == 1 and created.count("index.db") == 1
    assert sorted(n for n in created if n not in ("runs.db", "index.db")) == sorted(f"{r}.db" for r in run_ids)
    assert _fds_under(home) == []
    created.clear()
    instance.get_runs()  # outside the window: the stock behaviour, an engine for the statement, closed after
    assert created == ["runs.db"] and _fds_under(home) == []
    stock = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    assert all(stock.get_run_by_id(r).is_success for r in run_ids)
    instance.dispose()


@pytest.mark.parametrize("capture", [True, False])
def test_get_instance_chooses_by_capture_logs(tmp_path, monkeypatch, capture):
    from pipelines.runs.instance import get_instance

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = get_instance(capture_logs=capture)
    expected = SqliteEventLogStorage if capture else CachedEngineSqliteEventLogStorage
    assert type(instance.event_log_storage) is expected
    # what a launched run's worker would get: the stock settings unless in process
    assert (instance.get_ref().compute_logs_data.class_name == "NoOpComputeLogManager") is (not capture)
    instance.dispose()
