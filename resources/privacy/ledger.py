"""The durable outbound ledger: each external call's intent is committed to the
``outbound_ledger`` Delta table *before* the call is sent, and completed after (issue 16,
item 5).

Why: a buffered ledger (rows flushed every 32 calls) lost the rows of up to 31 calls
that had left the machine when the process was killed. Now, after any crash, the ledger
holds at least every call the server could have seen: a row with ``status = 'intent'``
is a call whose outcome is unknown (it may or may not have reached the server), then
``completed`` or ``failed`` once the reply (or the error) is back.

Batching without losing correctness (group commit): a caller's intent row joins a
pending group; one caller (the leader) commits the whole group in one Delta commit
(an append of rows with fresh ``call_id`` s: a commit is retried only after a
conflict that kept it from landing, so a row is never doubled) while the
others wait for it; nobody sends before the commit holding its row returns. With an API
backend sending N requests concurrently, their N intents share one commit. Completions
are not needed for the guarantee, so they are buffered and merged every
``complete_every`` calls by a background thread (no caller waits for a MERGE) and when the
session ends (a crash leaves those rows at ``intent``, which is the truthful state). The
writer holds its ``DeltaTable`` between intent commits (loading it for each commit cost more
than the commit). ``benchmarks/bench_reliability.py`` measures the
cost per call.

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

LEDGER_TABLE = "outbound_ledger"
INTENT, COMPLETED, FAILED = "intent", "completed", "failed"
ABANDONED = "abandoned"  # an intent of an ended run that stored no output for its sample (reconcile_intents)
# intent commits through one held DeltaTable before it is loaded again: deltalake's cost per
# commit through a handle grows with the commits made through it (11 ms fresh, +0.1 ms per
# commit), while a load is ~15 ms (measured with deltalake 1.x on this machine)
HANDLE_COMMITS = 32
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
        self._done_lock = threading.Lock()
        self._table: Any = None  # loaded after the first append (which brings an older table up to the contract)
        self._table_commits = 0
        self._merger: ThreadPoolExecutor | None = None
        self._merging: Future | None = None
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
        """One Delta append of a group of intent rows. Call ids are fresh uuid4s, so a plain
        append is exact (resources/lake/commit.py ``keyed_append``); it goes through a
        ``DeltaTable`` held by this writer (loading the table for every commit cost more than
        the commit itself, benchmarks/bench_calls.py), retried on a commit conflict."""
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
            # race (the background completion MERGE) stays stale: load it again then
            if attempts[0] or self._table_commits >= HANDLE_COMMITS:
                self._table, self._table_commits = self.lake.delta(LEDGER_TABLE), 0
            attempts[0] += 1
            write_deltalake(self._table, data, mode="append")

        with_retries(commit, table=LEDGER_TABLE, what="ledger intent")
        self._table_commits += 1

    # ------------------------------------------------------------------ completions
    def complete(self, call_id: str | None, ok: bool = True) -> None:
        """Mark a call ``completed`` (or ``failed``); merged in batches of ``complete_every``
        by a background thread, so no caller waits for a MERGE (see module docstring)."""
        if not call_id:
            return
        with self._done_lock:
            self._done.append({"call_id": call_id, "status": COMPLETED if ok else FAILED, "completed_at": _now()})
            full = len(self._done) >= self.complete_every and (self._merging is None or self._merging.done())
            if full:
                done, self._done = self._done, []
                if self._merger is None:
                    self._merger = ThreadPoolExecutor(max_workers=1, thread_name_prefix="facetlake-ledger")
                self._merging = self._merger.submit(mark_completed, self.lake, done)

    def wait(self) -> None:
        """Wait for the background completion merge in flight (if any); raises what it raised."""
        with self._done_lock:
            merging, self._merging = self._merging, None
        if merging is not None:
            merging.result()

    def flush(self) -> None:
        """Wait for a background merge, then merge the buffered completions (one commit).
        Raises what the background merge raised."""
        self.wait()
        with self._done_lock:
            done, self._done = self._done, []
        if done:
            mark_completed(self.lake, done)
        if self._merger is not None:
            self._merger.shutdown(wait=True)
            self._merger = None


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
           "mark_completed", "reconcile_intents"]
