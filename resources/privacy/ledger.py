"""The durable outbound ledger: each external call's intent is committed to the
``outbound_ledger`` Delta table *before* the call is sent, and completed after (issue 16,
item 5).

Why: a buffered ledger (rows flushed every 32 calls) lost the rows of up to 31 calls
that had left the machine when the process was killed. Now, after any crash, the ledger
holds at least every call the server could have seen: a row with ``status = 'intent'``
is a call whose outcome is unknown (it may or may not have reached the server), then
``completed`` or ``failed`` once the reply (or the error) is back.

Batching without losing correctness (group commit): a caller's intent row joins a
pending group; one caller (the leader) makes the whole group durable in one write while the
others wait for it; nobody sends before the write holding its row returns. On a local lake
that write is one ``fsync``'d append to the writer's write-ahead file (:class:`IntentLog`,
``<lake>/_wal/outbound_ledger/``, resources/lake/wal.py), and a background thread folds the file's rows into the Delta
table every :data:`FOLD_EVERY` intents and when the session ends (then the file is removed):
a Delta commit per group cost 15-30 ms of CPU and grew with the table's files, a third of
the wall time of a judged run at 32 calls in flight (issue 30, ``benchmarks/bench_calls.py``).
On a remote lake (S3) the group is one Delta append (fresh ``call_id`` s: a commit is retried
only after a conflict that kept it from landing, so a row is never doubled). Completions are
not needed for the guarantee, so they are buffered and merged by the background thread every
``complete_every`` calls and when the session ends (a crash leaves those rows at ``intent``,
which is the truthful state).

After a crash the killed writer's file is folded by the next reader or writer of the ledger
(resources/lake/wal.py, from :meth:`LakeStore.read` of the table, the outbound session's
start and :func:`reconcile_intents`): a file whose ``flock`` is free belongs to a dead
process. ``FACETLAKE_LEDGER_WAL=0`` turns the file off (a Delta commit per group).
``benchmarks/bench_reliability.py`` and ``benchmarks/bench_calls.py`` measure the cost per call.

Reconciliation after a crash (issue 26, fault 6): the next ``generations`` run of a
partition, holding its lease, calls :func:`reconcile_intents` before it sends anything. A
``generation`` intent left by an earlier run of that partition becomes ``completed`` when
that run stored the sample's output (``completed_at`` = when the output was stored),
``failed`` when it stored an error row, and ``abandoned`` when it stored nothing: the call
may or may not have reached the server, the run ended before recording the reply, and no
output came of it. No row is deleted; an abandoned row stays as the evidence of an attempt.
Intents of other purposes (judges, the model anonymiser) are left at ``intent``: their
replies are not stored per call.

Rows never hold the text sent or a key: hashes, counts and identifiers only.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Mapping

from resources.lake.wal import IntentLog, forget_live, recover, register_live, wal_folder

LEDGER_TABLE = "outbound_ledger"
INTENT, COMPLETED, FAILED = "intent", "completed", "failed"
ABANDONED = "abandoned"  # an intent of an ended run that stored no output for its sample (reconcile_intents)
# intent commits through one held DeltaTable before it is loaded again: deltalake's cost per
# commit through a handle grows with the commits made through it (11 ms fresh, +0.1 ms per
# commit), while a load is ~15 ms (measured with deltalake 1.x on this machine)
HANDLE_COMMITS = 32
FOLD_EVERY = 512  # intents of the write-ahead file folded into the table per background append
GENERATION_PURPOSE = "generation"  # the purpose of an API backend's generation calls (resources/backends/api.py)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class DurableLedger:
    """Outbound-ledger writer for one run / partition (thread-safe).

    ``ledger(call)`` (``call``: the mapping resources/privacy/outbound.py builds: called_at, host,
    model, purpose, sample_id, text_sha256, n_chars, anonymised, strategy, entity_counts)
    commits the intent row and returns its ``call_id``; :meth:`complete` marks it done.
    Raises whatever the lake raises (e.g. :class:`resources.lake.tables.LakeConflictError`): the
    call is then not sent (fail closed).
    """

    def __init__(self, lake: Any, run_id: str, fingerprint: str | None, model: str | None, complete_every: int = 256) -> None:
        self.lake, self.run_id, self.fingerprint, self.model = lake, run_id, fingerprint, model
        self.complete_every = max(1, int(complete_every))
        self._cv = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._queued = 0  # sequence number of the last intent queued
        self._durable = 0  # every intent up to this number is committed
        self._leader = False
        self._failed: dict[int, BaseException] = {}
        self._done: list[dict[str, Any]] = []
        self._table: Any = None  # loaded after the first append (which brings an older table up to the contract)
        self._table_commits = 0
        self._wal_dir = wal_folder(lake, LEDGER_TABLE)
        self.wal_table = LEDGER_TABLE  # for resources.lake.wal.settle: readers of the table fold this writer's file
        self._wal: IntentLog | None = None
        self.fold_every = FOLD_EVERY
        self._unfolded: list[dict[str, Any]] = []  # intents in the write-ahead file, not yet in the table
        self._unfolded_ids: set[str] = set()
        self._state_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._syncing: Future | None = None
        self.commits = 0  # intent commits made (for the benchmark and tests)
        self.written = 0
        if lake.exists(LEDGER_TABLE) and "call_id" not in lake.delta(LEDGER_TABLE).schema().to_arrow().names:
            from resources.lake.commit import LakeError

            raise LakeError(f"the outbound ledger under {lake.root} predates durable intents (no call_id column); "
                            f"run `facetlake migrate --lake {lake.root}` once")

    # ------------------------------------------------------------------ intents
    def row(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """The ledger row of ``call`` with a fresh ``call_id`` and ``status = 'intent'``."""
        counts = dict(call.get("entity_counts") or {})
        return {
            "called_at": call.get("called_at") or _now(), "run_id": self.run_id, "fingerprint": self.fingerprint,
            "model": self.model, "host": call.get("host"), "api_model": call.get("model"), "purpose": call.get("purpose"),
            "sample_id": call.get("sample_id"), "text_sha256": call["text_sha256"], "n_chars": call.get("n_chars"),
            "anonymised": bool(call.get("anonymised")), "strategy": call.get("strategy"),
            "entity_counts": json.dumps(counts, sort_keys=True), "n_entities": sum(counts.values()),
            "call_id": call.get("call_id") or uuid.uuid4().hex, "status": INTENT, "completed_at": None, "batch_id": None,
        }

    def __call__(self, call: Mapping[str, Any]) -> str:
        row = self.row(call)
        with self._cv:
            self._pending.append(row)
            self._queued += 1
            mine = self._queued
            while self._durable < mine:
                if mine in self._failed:
                    raise self._failed.pop(mine)
                if self._leader:
                    self._cv.wait()
                    continue
                self._leader = True
                group, self._pending = self._pending, []
                upto = self._queued
                first = upto - len(group) + 1
                self._cv.release()
                error: BaseException | None = None
                try:
                    self._append(group)
                except BaseException as exc:  # noqa: BLE001 - handed to every waiter of the group
                    error = exc
                finally:
                    self._cv.acquire()
                self._leader = False
                if error is None:
                    self.commits += 1
                    self.written += len(group)
                    self._durable = upto
                else:
                    for seq in range(first, upto + 1):
                        self._failed[seq] = error
                    self._durable = upto  # nothing of the group is durable: each caller raises below
                self._cv.notify_all()
            if mine in self._failed:
                raise self._failed.pop(mine)
        return row["call_id"]

    def _append(self, group: list[dict[str, Any]]) -> None:
        """Make a group of intent rows durable: one fsync'd write to this writer's write-ahead
        file on a local lake (:class:`IntentLog`; folded into the Delta table in the background
        and when the session ends), else one Delta append."""
        if self._wal_dir is None:
            self._delta_append(group)
            return
        from resources.faults import fault_point

        with self._state_lock:
            if self._wal is None:
                self._wal = IntentLog.create(self._wal_dir, self.run_id)
                register_live(self)
        fault_point(f"commit.before:{LEDGER_TABLE}")  # the write-ahead file is the intent's commit
        self._wal.write(group)
        fault_point(f"commit.after:{LEDGER_TABLE}")
        with self._state_lock:
            self._unfolded.extend(group)
            self._unfolded_ids.update(r["call_id"] for r in group)
            due = len(self._unfolded) >= self.fold_every
        if due:
            self._background()

    def _delta_append(self, group: list[dict[str, Any]]) -> None:
        """One Delta append of intent rows. Call ids are fresh uuid4s, so a plain append is
        exact (resources/lake/commit.py ``keyed_append``); it goes through a ``DeltaTable`` held
        by this writer (loading the table for every commit cost more than the commit itself),
        retried on a commit conflict."""
        from deltalake import write_deltalake

        from resources.lake.commit import with_retries
        from resources.lake.tables import to_arrow

        if not all(r["call_id"] for r in group):
            self.lake.append(LEDGER_TABLE, group)
            return
        data = to_arrow(LEDGER_TABLE, group)
        if self._table is None:
            self.lake.append(LEDGER_TABLE, data, fresh_keys=True)  # creates the table when it is the first
            self._table = self.lake.delta(LEDGER_TABLE)
            return
        attempts = [0]

        def commit() -> None:
            # a handle grows slower with every commit made through it, and one that lost a commit
            # race (a completion MERGE) stays stale: load it again then
            if attempts[0] or self._table_commits >= HANDLE_COMMITS:
                self._table, self._table_commits = self.lake.delta(LEDGER_TABLE), 0
            attempts[0] += 1
            write_deltalake(self._table, data, mode="append")

        with_retries(commit, table=LEDGER_TABLE, what="ledger intent")
        self._table_commits += 1

    # ------------------------------------------------------------------ folding and completions
    def _background(self) -> None:
        """Run :meth:`sync` on the writer's background thread unless one is in flight."""
        with self._state_lock:
            if self._syncing is not None and not self._syncing.done():
                return
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="facetlake-ledger")
            self._syncing = self._worker.submit(self.sync)

    def sync(self) -> None:
        """Fold the intents of the write-ahead file into the Delta table (one append), then
        merge the buffered completions whose intents are in the table (one MERGE). Raises what
        the lake raises; nothing is lost (the rows stay buffered and in the file)."""
        with self._sync_lock:
            with self._state_lock:
                rows, self._unfolded = self._unfolded, []
            if rows:
                try:
                    self._delta_append(rows)
                except BaseException:
                    with self._state_lock:
                        self._unfolded = rows + self._unfolded
                    raise
                with self._state_lock:
                    self._unfolded_ids.difference_update(r["call_id"] for r in rows)
            with self._state_lock:
                ready = [d for d in self._done if d["call_id"] not in self._unfolded_ids]
                self._done = [d for d in self._done if d["call_id"] in self._unfolded_ids]
            if ready:
                try:
                    mark_completed(self.lake, ready)
                except BaseException:
                    with self._state_lock:
                        self._done = ready + self._done
                    raise

    def complete(self, call_id: str | None, ok: bool = True) -> None:
        """Mark a call ``completed`` (or ``failed``); merged in batches of ``complete_every``
        by the background thread, so no caller waits for a MERGE (see module docstring)."""
        if not call_id:
            return
        with self._state_lock:
            self._done.append({"call_id": call_id, "status": COMPLETED if ok else FAILED, "completed_at": _now()})
            due = len(self._done) >= self.complete_every
        if due:
            self._background()

    def wait(self) -> None:
        """Wait for the background work in flight (if any); raises what it raised."""
        with self._state_lock:
            syncing, self._syncing = self._syncing, None
        if syncing is not None:
            syncing.result()

    def flush(self) -> None:
        """Fold every intent and merge every completion now (after the background work), then
        remove the write-ahead file (everything in it is in the table). Raises what the lake
        raises (the file then stays, and the next session folds it)."""
        self.wait()
        self.sync()
        with self._state_lock:
            wal, self._wal = self._wal, None
            worker, self._worker = self._worker, None
        if wal is not None:
            wal.close(remove=True)
            forget_live(self)
        if worker is not None:
            worker.shutdown(wait=True)


def mark_completed(lake: Any, updates: list[Mapping[str, Any]], only_intent: bool = False) -> None:
    """Set ``status`` and ``completed_at`` of the ledger rows named by ``call_id`` (a MERGE,
    retried on commit conflicts); ``only_intent``: leave rows no longer at ``intent`` as they are."""
    import pyarrow as pa

    from resources.lake.commit import with_retries

    source = pa.Table.from_pylist([dict(u) for u in updates], schema=pa.schema(
        [("call_id", pa.string()), ("status", pa.string()), ("completed_at", pa.timestamp("us", tz="UTC"))]))

    def merge() -> None:
        (lake.delta(LEDGER_TABLE).merge(source, predicate="t.call_id = s.call_id", source_alias="s", target_alias="t")
         .when_matched_update({"status": "s.status", "completed_at": "s.completed_at"},
                              predicate=f"t.status = '{INTENT}'" if only_intent else None).execute())

    with_retries(merge, table=LEDGER_TABLE, what="ledger completion")


def reconcile_intents(lake: Any, fingerprint: str, model: str) -> dict[str, int]:
    """Settle the ``generation`` intents that earlier runs of the (``fingerprint``,
    ``model``) partition left open (a crash between the intent and its completion), from
    what those runs stored in ``generations`` (matched by run id and sample id): an ``ok``
    row makes the intent ``completed`` (``completed_at``: the row's ``created_at``), an
    ``error`` row ``failed``, no row ``abandoned`` (``completed_at``: now).

    Call it holding the partition's generation lease (``@lease_scope``), before this run
    sends anything: every open ``generation`` intent of the partition is then an earlier
    run's (or an earlier attempt's of this run), since no other run can be sending. Returns the count per new status (empty when nothing was
    open). Raises what the lake raises (a commit conflict is retried,
    :func:`mark_completed`)."""
    import polars as pl

    recover(lake, LEDGER_TABLE)  # a killed run's write-ahead file first: its intents are what is settled here
    if not lake.exists(LEDGER_TABLE):
        return {}
    open_rows = (lake.read(LEDGER_TABLE, where={"fingerprint": fingerprint, "model": model},
                           columns=["call_id", "run_id", "purpose", "sample_id", "status"])
                 .filter((pl.col("status") == INTENT) & (pl.col("purpose") == GENERATION_PURPOSE)))
    if open_rows.height == 0:
        return {}
    stored = {}
    if lake.exists("generations"):
        rows = lake.read("generations", where={"model": model, "fingerprint": fingerprint},
                         columns=["sample_id", "run_id", "status", "created_at"])
        rows = rows.filter(pl.col("run_id").is_in(open_rows["run_id"].unique().to_list()))
        for r in rows.sort("created_at").iter_rows(named=True):  # a run's last row of a sample wins
            stored[(r["run_id"], r["sample_id"])] = r
    now, updates, counts = _now(), [], {}
    for r in open_rows.iter_rows(named=True):
        found = stored.get((r["run_id"], r["sample_id"]))
        if found is None:
            status, at = ABANDONED, now
        else:
            status, at = (COMPLETED if found["status"] == "ok" else FAILED), found["created_at"] or now
        updates.append({"call_id": r["call_id"], "status": status, "completed_at": at})
        counts[status] = counts.get(status, 0) + 1
    mark_completed(lake, updates, only_intent=True)
    return counts


__all__ = ["ABANDONED", "COMPLETED", "DurableLedger", "FAILED", "GENERATION_PURPOSE", "INTENT", "LEDGER_TABLE",
           "mark_completed", "reconcile_intents", "recover_intents"]


def recover_intents(lake: Any) -> int:
    """Fold dead writers' write-ahead files into the ledger table (resources/lake/wal.py
    :func:`~resources.lake.wal.recover`); returns the rows read."""
    return recover(lake, LEDGER_TABLE)
