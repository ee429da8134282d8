"""Write-ahead files for appends that must be durable before the caller goes on, faster than a
Delta commit each (issue 30: the outbound ledger's intents, resources/privacy/ledger.py).

A writer appends JSON lines of rows to its own file under ``<lake>/_wal/<table>/`` and makes
each group durable with one ``os.write`` and ``os.fsync``; it folds the file's rows into the
Delta table itself (in the background and when it ends), then removes the file. It holds an
exclusive ``flock`` on the file for its life, so a file whose lock is free belongs to a writer
that is gone (killed, or dropped without finishing): :func:`recover` folds such files with a
keyed append (rows the writer had already folded are not doubled) and removes them.
:func:`settle` runs before every read of a table that has write-ahead files
(:meth:`resources.lake.tables.LakeTables.read`): this process's live writers of that table
fold what they hold, and dead writers' files are recovered, so a reader sees every row
written by this process or by a process that has ended. Local lakes only (a remote lake has
no shared disk: its writers commit to Delta directly); ``FACETLAKE_LEDGER_WAL=0`` turns the
files off.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, Mapping

WAL_FOLDER = "_wal"  # beside the tables of a local lake (no _delta_log: not a table)
WAL_TABLES = frozenset({"outbound_ledger"})  # the tables whose writers keep write-ahead files (resources/privacy/ledger.py)
DATETIME_COLUMNS = ("called_at", "completed_at", "created_at")  # written as ISO text, read back as datetimes


def wal_folder(lake: Any, table: str) -> Path | None:
    """The write-ahead folder of ``table`` on a local lake (None for a remote lake, or when
    ``FACETLAKE_LEDGER_WAL=0`` asks for a Delta commit per group)."""
    root = str(lake.root)
    if os.environ.get("FACETLAKE_LEDGER_WAL", "1").lower() in ("0", "false", "no"):
        return None
    if "://" in root and not root.startswith("file://"):
        return None
    return Path(root.removeprefix("file://")).expanduser() / WAL_FOLDER / table


def _encode(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in row.items()}


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for key in DATETIME_COLUMNS:
        if isinstance(row.get(key), str):
            row[key] = dt.datetime.fromisoformat(row[key])
    return row


class IntentLog:
    """One writer's write-ahead file (see the module docstring). Created under a temporary
    name, locked, then renamed, so no reader ever sees it unlocked."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd
        self._lock = threading.Lock()
        # a writer dropped without finishing: the file's lock is released when it is collected,
        # so the next reader folds the file as a dead writer's (nothing is lost)
        self._closer = weakref.finalize(self, os.close, fd)

    @classmethod
    def create(cls, folder: Path, run_id: str) -> "IntentLog":
        """A new locked file in ``folder`` (created with its parents; its name made durable)."""
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{''.join(c for c in run_id if c.isalnum())[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = folder / f"{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = folder / f"{name}.jsonl"
        os.rename(tmp, path)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return cls(path, fd)

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` (one JSON line each) and fsync: durable when this returns."""
        data = "".join(json.dumps(_encode(r), sort_keys=True) + "\n" for r in rows).encode("utf-8")
        with self._lock:
            os.write(self.fd, data)
            os.fsync(self.fd)

    def close(self, remove: bool) -> None:
        """Close the file (releasing its lock), removing it first with ``remove``."""
        with self._lock:
            if remove:
                os.unlink(self.path)
            self._closer()


_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()  # this process's writers holding a file: .lake, .wal_table, .sync()


def register_live(writer: Any) -> None:
    """Record a writer (with ``lake``, ``wal_table`` and ``sync()``) that holds a file now."""
    _LIVE.add(writer)


def forget_live(writer: Any) -> None:
    _LIVE.discard(writer)


def _try_lock(path: Path) -> int | None:
    """An fd of ``path`` holding its lock, or None when a live writer holds it (or it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
        return None


def recover(lake: Any, table: str) -> int:
    """Fold into ``table`` every write-ahead file of it whose writer is gone, and remove the
    file; rows already folded are not doubled (the table's keyed append,
    resources/lake/commit.py ``KEYS``). A trailing line cut short by a kill is skipped: its
    write never returned, so the caller did not go on. Returns the rows read."""
    folder = wal_folder(lake, table)
    if folder is None or not folder.is_dir():
        return 0
    n = 0
    for path in sorted(folder.glob("*.jsonl")):
        fd = _try_lock(path)
        if fd is None:
            continue
        try:
            rows = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rows.append(_decode(json.loads(line)))
                except ValueError:
                    continue
            if rows:
                lake.append(table, rows)
            path.unlink(missing_ok=True)
            n += len(rows)
        finally:
            os.close(fd)
    for stale in folder.glob("*.tmp"):  # a writer killed between create and rename wrote nothing
        fd = _try_lock(stale)
        if fd is not None:
            stale.unlink(missing_ok=True)
            os.close(fd)
    return n


def settle(lake: Any, table: str) -> None:
    """Before ``table`` is read: this process's live writers of it on the same lake fold what
    they hold, then dead writers' files are recovered (:func:`recover`). Costs a directory
    check when the table has no write-ahead files (callers skip tables outside :data:`WAL_TABLES`)."""
    root = str(lake.root)
    for writer in list(_LIVE):
        if str(writer.lake.root) == root and writer.wal_table == table:
            writer.sync()
    recover(lake, table)


__all__ = ["IntentLog", "WAL_FOLDER", "WAL_TABLES", "forget_live", "recover", "register_live", "settle", "wal_folder"]
