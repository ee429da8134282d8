"""A lease per (fingerprint, model) generation, so two live writers of one partition never
both pay for every request (issue 16, item 12).

Two concurrent live runs of the same partition each planned the samples without an
``ok`` row and sent them all: 400 requests for 200 samples. Now a generations run takes
the partition's lease first; a second run waits until the lease is released (or its
holder is dead), then plans against what the first stored and sends only what is
still missing (usually nothing).

**How (and why a Delta row):** the lease is one row of the ``leases`` Delta table, keyed
by (fingerprint, model), taken by a *conditional commit*: the taker reads the table at
version v, sees the row free (absent, released, expired, or held by a process of this
host that no longer exists), and writes its own row with a predicate overwrite of that
key made on the version-v snapshot. If another writer committed to the table after v,
Delta's conflict checker rejects the commit (``CommitFailedError``) and the taker
re-reads; so exactly one of two racing takers wins. This needs nothing beyond what the
lake already relies on for every commit: an atomic "create if absent" of the next log
entry, which a local filesystem gives (rename without replace) and which S3-compatible
stores give by conditional put (delta-rs uses ``If-None-Match``; checked against moto in
tests/test_lease.py). No extra service (DynamoDB, Redis) and no second storage protocol.

A holder renews its lease every ``ttl/3`` from a daemon thread; a lease not renewed for
``ttl`` seconds (``FACETLAKE_LEASE_TTL_S``, default 60) is expired and can be taken.
A holder on this host whose process is gone (``kill -9``) is taken over at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Iterator

from resources.faults import fault_point
from metric_ops.errors import FacetlakeError

LEASES = "leases"


class LeaseTimeout(FacetlakeError, RuntimeError):
    """The lease stayed held by a live writer for longer than the wait allowed."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def pid_alive(pid: int | None) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ttl_s() -> float:
    """The lease lifetime without renewal, ``FACETLAKE_LEASE_TTL_S`` (default 60 s)."""
    return float(os.environ.get("FACETLAKE_LEASE_TTL_S", "60"))


def _free(row: dict[str, Any] | None, holder: str, now: dt.datetime) -> bool:
    if row is None or row.get("holder") in (None, "", holder):
        return True
    if row["expires_at"] is not None and row["expires_at"] <= now:
        return True
    return row.get("host") == socket.gethostname() and not pid_alive(row.get("pid"))


class Lease:
    """The lease of one (fingerprint, model) on one lake. ``holder``: a unique id of this taker."""

    def __init__(self, lake: Any, fingerprint: str, model: str, run_id: str | None = None, ttl: float | None = None) -> None:
        self.lake, self.fingerprint, self.model, self.run_id = lake, fingerprint, model, run_id
        self.ttl = float(ttl if ttl is not None else ttl_s())
        self.holder = uuid.uuid4().hex
        self.waited_s = 0.0
        self.takeovers = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _predicate(self) -> str:
        from resources.lake.tables import predicate_for

        return predicate_for({"fingerprint": self.fingerprint, "model": self.model})

    def _current(self) -> tuple[Any, dict[str, Any] | None]:
        delta = self.lake.delta(LEASES)
        scan = self.lake.native_scan(LEASES, delta=delta)  # this version exactly: the commit below is conditional on it
        if scan is not None:
            import polars as pl

            rows = scan.filter((pl.col("fingerprint") == self.fingerprint) & (pl.col("model") == self.model)).collect().to_dicts()
        else:
            rows = delta.to_pyarrow_table(filters=[("fingerprint", "=", self.fingerprint), ("model", "=", self.model)]).to_pylist()
        if len(rows) > 1:  # never written by this module; keep the newest
            rows.sort(key=lambda r: r["acquired_at"])
        return delta, (rows[-1] if rows else None)

    def _write(self, delta: Any, release: bool = False) -> None:
        from deltalake import write_deltalake

        from resources.lake.tables import to_arrow

        now = _now()
        rows = [] if release else [{
            "fingerprint": self.fingerprint, "model": self.model, "holder": self.holder, "host": socket.gethostname(),
            "pid": os.getpid(), "run_id": self.run_id, "acquired_at": now, "expires_at": now + dt.timedelta(seconds=self.ttl)}]
        write_deltalake(delta, to_arrow(LEASES, rows), mode="overwrite", predicate=self._predicate())
        fault_point("commit.after:leases")

    def try_acquire(self) -> bool:
        """Take the lease if it is free (one conditional commit); False when a live writer holds it."""
        from deltalake.exceptions import CommitFailedError

        from resources.lake.schemas import PARTITION_COLUMNS, SCHEMAS
        from resources.lake.commit import ensure_table

        ensure_table(self.lake.uri(LEASES), SCHEMAS[LEASES], PARTITION_COLUMNS.get(LEASES), self.lake._options())
        delta, row = self._current()
        if not _free(row, self.holder, _now()):
            return False
        if row is not None and row.get("holder") not in (None, "", self.holder):
            self.takeovers += 1
        try:
            self._write(delta)
        except CommitFailedError:
            return False  # someone committed since we read: re-read and decide again
        return True

    def acquire(self, wait_s: float = 3600.0, poll_s: float = 0.5, on_wait: Callable[[dict[str, Any]], None] | None = None) -> "Lease":
        """Block until the lease is ours (raises :class:`LeaseTimeout` after ``wait_s``), then
        renew it from a daemon thread until :meth:`release`."""
        start = time.monotonic()
        told = False
        while not self.try_acquire():
            if time.monotonic() - start > wait_s:
                _, row = self._current()
                raise LeaseTimeout(
                    f"the generation of model {self.model!r} under fingerprint {self.fingerprint[:12]} is held by another live "
                    f"writer (run {str((row or {}).get('run_id'))[:8]} on {(row or {}).get('host')}, pid {(row or {}).get('pid')}) "
                    f"for more than {wait_s:.0f} s; wait for it to finish, or stop it and re-run"
                )
            if not told and on_wait is not None:
                told = True
                on_wait(self._current()[1] or {})
            time.sleep(poll_s)
        self.waited_s = time.monotonic() - start
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew, name=f"lease-{self.model}", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        from deltalake.exceptions import CommitFailedError

        while not self._stop.wait(self.ttl / 3):
            for _ in range(5):
                try:
                    delta, row = self._current()
                    if row is not None and row.get("holder") != self.holder:
                        return  # taken over after we stalled past the ttl; keyed appends keep the rows right
                    self._write(delta)
                    break
                except CommitFailedError:
                    time.sleep(0.05)
                except Exception:  # noqa: BLE001 - a failed renewal must not kill the run; the ttl bounds the damage
                    break

    def release(self) -> None:
        """Stop renewing and remove our row (if it is still ours)."""
        from deltalake.exceptions import CommitFailedError

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for _ in range(20):
            try:
                delta, row = self._current()
                if row is None or row.get("holder") != self.holder:
                    return
                self._write(delta, release=True)
                return
            except CommitFailedError:
                time.sleep(0.05)


@contextlib.contextmanager
def generation_lease(lake: Any, fingerprint: str, model: str, run_id: str | None = None, *, wait_s: float = 3600.0,
                     log: Callable[[str], None] | None = None) -> Iterator[Lease]:
    """Hold the (fingerprint, model) lease for a ``with`` block (see the module docstring)."""
    lease = Lease(lake, fingerprint, model, run_id)

    def waiting(row: dict[str, Any]) -> None:
        if log is not None:
            log(f"waiting for the generation lease of {model} (held by run {str(row.get('run_id'))[:8]} on {row.get('host')}, "
                f"pid {row.get('pid')}): its stored outputs will be reused")

    lease.acquire(wait_s=wait_s, on_wait=waiting)
    try:
        yield lease
    finally:
        lease.release()


__all__ = ["LEASES", "Lease", "LeaseTimeout", "generation_lease", "pid_alive", "ttl_s"]
