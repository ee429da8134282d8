"""The Dagster instance of a CLI process that executes its runs itself (issue 14).

``facetlake run`` and ``facetlake score`` (without ``--submit``) materialise their assets in
process: three to four short Dagster runs per evaluation. Two of the instance's stock
components cost that process more than the assets of a small evaluation do, so such a
process opens the same Dagster home with two overrides (:func:`in_process_instance`):

- compute logs off (``NoOpComputeLogManager``): the runs print to the user's terminal
  already; the stock manager mirrors stdout/stderr into files through two ``tail``
  processes per run. Structured logs (``context.log``) stay in the event log.
- :class:`CachedEngineSqliteEventLogStorage`, only where the home uses Dagster's default
  SQLite storage: the stock :class:`SqliteEventLogStorage` opens a new SQLAlchemy engine
  and connection for every event it stores (about 2 ms an event, ~25 events a run) and
  loads Alembic's migration scripts twice for each new run's database (~45 ms a run);
  this one keeps one connection per database file *while a run of this process is in
  progress* (or inside :func:`hold_connections`) and loads the scripts once. Files, tables
  and rows are the stock class's, so the UI and the daemon read these runs as any other.
- :class:`CachedEngineSqliteRunStorage`, likewise: the stock run storage opens an engine for
  every statement on runs.db (about 100 in a two-model run); inside
  :func:`hold_connections` this one keeps one.

:func:`hold_connections` is the window the runner opens around a command's runs
(``pipelines.runs.runner``): a run's creation and its planned events are stored before its
``RUN_START``, so a window that starts with the run alone would miss them (issue 26, "Fixed
cost of a run": with the window, the run storage and ``OPENBLAS_NUM_THREADS=1``
(pipelines/runs/heap.py) a 10-sample run went from 0.71x to 0.64x of 5b73d7a's CPU; docs/metrics.md).

Why only during a run: SQLite's locks are POSIX advisory locks, which a process loses on
*every* file descriptor of that file as soon as it closes any one of them. A connection
held open after the runs (as the first version of this class did) was corrupted ("database
disk image is malformed") when the same process later read the home's files in any other
way (a copy, an archive, a hash of the folder) and another process then wrote to them:
that process believed it was alone and rebuilt the WAL index under the open connection.
The stock class holds a connection only for one statement; this one holds them from a
run's start (or a command's first run) to its end and closes them all then, so after a
command the process holds nothing open (tests/test_instance_storage.py reproduces the corruption). A
forked child forgets the parent's connections without closing them (closing an inherited
SQLite connection in a child is another way to corrupt the file).

A home configured with other storage (PostgreSQL in the deploy profile) keeps it.
Runs launched or submitted from an instance get its settings, so the CLI opens this
instance only where every run stays in its own process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import weakref
from collections import OrderedDict
from typing import Any, Iterator

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()  # the storages below alive in this process
_INHERITED: list[Any] = []  # a forked child's copies of its parent's connections: kept, never closed


def _forget_connections_in_child() -> None:
    """After ``fork()``, in the child: drop (but keep referenced, so never close) every
    connection inherited from the parent; the child opens its own when it needs them."""
    for storage in list(_LIVE):
        if isinstance(storage, CachedEngineSqliteRunStorage):
            _INHERITED.extend(e for e in [storage._engine] if e is not None)
            storage._engine, storage._held = None, 0
            continue
        _INHERITED.extend(storage._engines.values())
        storage._engines = OrderedDict()
        storage._open_runs = set()
        storage._held = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_connections_in_child)


NO_COMPUTE_LOGS = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")


@functools.cache
def _event_log_scripts() -> Any:
    """Alembic's script directory of Dagster's event log schema, loaded once per process (the
    stock class loads its ~90 migration files twice for every new run's database)."""
    from alembic.script import ScriptDirectory
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import get_alembic_config

    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


def _kept_engine(conn_string: str) -> Any:
    """A SQLAlchemy engine holding one SQLite connection to ``conn_string`` (a ``StaticPool``)
    with Dagster's busy timeout, usable from any thread (its users serialise statements under
    their own lock)."""
    from dagster._core.storage.sql import create_engine
    from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
    from sqlalchemy.pool import StaticPool

    return create_engine(conn_string, poolclass=StaticPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})


#: the statements that create a new run shard (tables, indexes, WAL, Alembic stamp), recorded
#: from the first shard this process creates through SQLAlchemy and Alembic
_SHARD_STATEMENTS: tuple[tuple[str, Any], ...] | None = None


@contextlib.contextmanager
def _recording_shard_statements(conn: Any) -> Iterator[list[tuple[str, Any]]]:
    """Record the statements run on ``conn`` inside the block that change the file (``CREATE``,
    ``INSERT``, ``PRAGMA journal_mode``; not the reads that decide them), with their parameters."""
    import sqlalchemy as db

    recorded: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        head = statement.lstrip().upper()
        if head.startswith(("CREATE", "INSERT", "PRAGMA JOURNAL_MODE")):
            recorded.append((statement, tuple(parameters) if isinstance(parameters, (list, tuple)) else parameters))

    db.event.listen(conn, "before_cursor_execute", record)
    try:
        yield recorded
    finally:
        db.event.remove(conn, "before_cursor_execute", record)


class CachedEngineSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's run-sharded SQLite event log storage that, while a run stored through it is
    in progress (from its ``RUN_START`` event to its ``RUN_SUCCESS`` / ``RUN_FAILURE`` /
    ``RUN_CANCELED``), keeps one open connection per database file (a run's shard or the
    index shard) instead of a new engine and connection for every statement, and creates a
    new run's shard without reloading Alembic's scripts.

    Same files (``<base_dir>/<run_id>.db`` and ``index.db``), schema, Alembic stamp and rows
    as the stock class (tests/test_instance_storage.py compares them), so the UI and the
    daemon read these runs as any other. Every use still takes the stock class's lock and
    commits its own transaction; at most ``MAX_SHARDS`` connections stay open, least
    recently used closed first. When no run is in progress every connection is closed after
    its statement, as the stock class does (see the module docstring for why), and all of
    them on :meth:`dispose`. Config: ``base_dir`` (str), as the stock class.
    """

    MAX_SHARDS = 8

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: OrderedDict[str, Any] = OrderedDict()
        self._open_runs: set[str] = set()
        self._held = 0  # hold_connections() windows open now
        super().__init__(base_dir, inst_data=inst_data)
        _LIVE.add(self)

    @contextlib.contextmanager
    def hold_connections(self) -> Iterator[None]:
        """Keep connections open from entering to leaving (around a command's runs, so that a
        run's creation and planned events, stored before its ``RUN_START``, reuse them too);
        every connection is closed on leaving when no run is in progress."""
        with self._db_lock:
            self._held += 1
        try:
            yield
        finally:
            with self._db_lock:
                self._held -= 1
                if not self._open_runs and not self._held:
                    self._close_engines()

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "CachedEngineSqliteEventLogStorage":
        """From the instance config (the stock class's method builds a stock instance)."""
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Any:
        from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME

        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        new_run = shard != INDEX_SHARD_NAME and not os.path.exists(self.path_for_shard(shard))
        engine = _kept_engine(self.conn_string_for_shard(shard))  # used under the stock class's lock
        if shard not in self._initialized_dbs:
            if new_run:
                self._create_run_shard(engine)
            else:
                self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        while len(self._engines) > self.MAX_SHARDS:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    def _create_run_shard(self, engine: Any) -> None:
        """What the stock ``_initdb`` does for a database that does not exist yet: the event
        log tables, WAL journal mode, and the Alembic stamp of the head revision. The first
        new shard of a process runs them through SQLAlchemy and Alembic and records the
        statements that changed the file (:func:`_recording_shard_statements`); later ones
        replay those statements (about 30 ms of SQLAlchemy's DDL compilation saved a run)."""
        import sqlalchemy as db
        from alembic.runtime.migration import MigrationContext
        from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata

        global _SHARD_STATEMENTS
        try:
            with engine.connect() as conn:
                if _SHARD_STATEMENTS is not None:
                    for statement, parameters in _SHARD_STATEMENTS:
                        conn.exec_driver_sql(statement, parameters)
                else:
                    with _recording_shard_statements(conn) as recorded:
                        SqlEventLogStorageMetadata.create_all(conn)
                        conn.execute(db.text("PRAGMA journal_mode=WAL;"))
                        MigrationContext.configure(conn).stamp(_event_log_scripts(), "head")
                conn.commit()
            if _SHARD_STATEMENTS is None:
                _SHARD_STATEMENTS = tuple(recorded)
        except db.exc.DatabaseError:  # created meanwhile by another process: the stock path copes (and retries)
            self._initdb(engine)

    @contextlib.contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:
        with self._db_lock:
            try:
                with self._engine(shard).connect() as conn:
                    with conn.begin():
                        yield conn
            finally:
                if not self._open_runs and not self._held:  # nothing in progress: hold nothing open (module docstring)
                    self._close_engines()

    def store_event(self, event: Any) -> None:
        """The stock method; a run's ``RUN_START`` opens its connection-keeping window and
        its terminal event closes it (every connection is closed once no run is open)."""
        from dagster._core.events import DagsterEventType

        kind = event.dagster_event_type if event.is_dagster_event else None
        if kind == DagsterEventType.RUN_START:
            with self._db_lock:
                self._open_runs.add(event.run_id)
        try:
            super().store_event(event)
        finally:
            if kind in (DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE, DagsterEventType.RUN_CANCELED):
                with self._db_lock:
                    self._open_runs.discard(event.run_id)
                    if not self._open_runs and not self._held:
                        self._close_engines()

    def _close_engines(self) -> None:
        """Close every kept connection (the caller holds ``_db_lock``)."""
        while self._engines:
            self._engines.popitem(last=False)[1].dispose()

    def dispose(self) -> None:
        """Stop the watchers (stock) and close the connections."""
        super().dispose()
        with self._db_lock:
            self._open_runs.clear()
            self._held = 0
            self._close_engines()


class CachedEngineSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage (``<base_dir>/runs.db``) that, inside
    :meth:`hold_connections` (a command's runs, :func:`hold_connections`), keeps one open
    connection instead of a new engine and connection for every statement (the stock class:
    about 100 engines for a two-model run). Outside that window it is the stock class; same
    file, schema and rows. Config: ``base_dir`` (str), as the stock class."""

    def __init__(self, conn_string: str, inst_data: Any = None) -> None:
        import threading

        self._engine: Any = None
        self._held = 0
        self._lock = threading.RLock()  # one kept connection: one statement at a time
        super().__init__(conn_string, inst_data=inst_data)
        _LIVE.add(self)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "CachedEngineSqliteRunStorage":
        """From the instance config (the stock class's method builds a stock instance)."""
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextlib.contextmanager
    def hold_connections(self) -> Iterator[None]:
        """Keep one connection to runs.db open from entering to leaving; closed on leaving."""
        with self._lock:
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
                if not self._held and self._engine is not None:
                    self._engine.dispose()
                    self._engine = None

    @contextlib.contextmanager
    def connect(self) -> Iterator[Any]:
        """The stock connection outside a held window; inside it, the kept one (a transaction each use)."""
        if not self._held:
            with super().connect() as conn:
                yield conn
            return
        with self._lock:
            if self._engine is None:
                self._engine = _kept_engine(self._conn_string)
            with self._engine.connect() as conn:
                with conn.begin():
                    yield conn

    def dispose(self) -> None:
        """The stock method, and the kept connection closed."""
        super().dispose()
        with self._lock:
            self._held = 0
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None


@contextlib.contextmanager
def hold_connections(instance: dg.DagsterInstance) -> Iterator[None]:
    """Around a command's in-process runs: the run and event log storages of ``instance``
    keep their SQLite connections open until the block ends (where they are this module's
    classes; other storages are left as they are). Nothing in the block may read the Dagster
    home's files other than through ``instance`` (module docstring)."""
    with contextlib.ExitStack() as stack:
        for storage in (instance.run_storage, instance.event_log_storage):
            if isinstance(storage, (CachedEngineSqliteRunStorage, CachedEngineSqliteEventLogStorage)):
                stack.enter_context(storage.hold_connections())
        yield


def in_process_overrides(home: str) -> dict[str, Any]:
    """Instance overrides for a process that executes its own runs: compute logs off, and
    the cached-engine event log where ``home``'s dagster.yaml keeps Dagster's default SQLite
    storage (none of ``storage``, ``run_storage``, ``event_log_storage``,
    ``schedule_storage`` set)."""
    from dagster._core.instance.config import dagster_instance_config

    config, _ = dagster_instance_config(home)
    overrides: dict[str, Any] = {"compute_logs": dict(NO_COMPUTE_LOGS)}
    if not any(config.get(key) for key in STORAGE_KEYS):
        overrides["event_log_storage"] = {
            "module": __name__, "class": CachedEngineSqliteEventLogStorage.__name__,
            "config": {"base_dir": os.path.join(home, "history", "runs", "")},  # the stock default's folder
        }
        overrides["run_storage"] = {
            "module": __name__, "class": CachedEngineSqliteRunStorage.__name__,
            "config": {"base_dir": os.path.join(home, "history", "")},  # the stock default's folder (runs.db)
        }
    return overrides


def in_process_instance(home: str) -> dg.DagsterInstance:
    """The Dagster instance of ``home`` (an absolute folder holding dagster.yaml) with
    :func:`in_process_overrides`; same run, event and schedule storage as the stock one."""
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides=in_process_overrides(home)))
