"""Safe Delta commits for the lake store (issue 16, items 8-11).

Several processes may write one lake at once (two ``facetlake run``, a scheduled run and
a ``facetlake score --force``, Celery workers). Delta commits are optimistic: a commit
that overlaps a concurrent one fails with ``deltalake.exceptions.CommitFailedError``.
This module makes every write of :class:`resources.lake.resource.LakeStore` safe under that:

- **race-free creation**: a missing table is first created empty with its schema
  contract and partition columns (``DeltaTable.create(mode="ignore")``; a concurrent
  creator winning is fine), so two first writers never both *append* what should have
  been a partition replacement;
- **bounded retries with backoff**: a conflicting commit is retried (tenacity,
  exponential backoff with full jitter) at most ``FACETLAKE_COMMIT_ATTEMPTS`` times
  (default 30; 12 lost a keyed append among four busy writers on a loaded 2-core machine) and for at most ``FACETLAKE_COMMIT_RETRY_S`` seconds (default 120). A
  conflict that outlasts the bound raises :class:`LakeConflictError`: one line naming
  the table and what to do, never a traceback;
- **keyed appends**: every append is a Delta MERGE on the table's key (:data:`KEYS`)
  that inserts only the rows whose key is not stored yet, so appending the same rows
  twice (a retried commit, a resumed run, two writers) stores them once. Null key
  values match null (``scores`` of corpus metrics have no ``sample_id``).

Delta's conflict checker is what makes a retry correct: a MERGE or predicate overwrite
records what it read, so a concurrent commit touching those rows makes it fail and be
re-run against the new snapshot (checked in tests/test_lake_concurrency.py with 2-4
processes).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence, TypeVar

import pyarrow as pa

from resources.faults import fault_point
from metric_ops.errors import FacetlakeError

T = TypeVar("T")

# the key of each table's rows: an append never stores a second row with the same key (a
# replace is idempotent by its partition predicate instead; the crash and concurrency tests
# check every table against these keys)
KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id", "asset", "table_name", "model", "fingerprint"),
    "outbound_ledger": ("call_id",),
    "judge_cache": ("key",),
    "call_batches": ("input_file_id", "state"),
    "evidence_exports": ("manifest_sha256",),
    "reviews": ("review_id",),
    "agreement": ("fingerprint", "rubric", "kind", "reviewer_a", "reviewer_b", "metric"),
    "samples": ("fingerprint", "sample_id"),
    "samples_raw": ("fingerprint", "sample_id"),
    "generations": ("model", "fingerprint", "sample_id", "run_id"),
    "token_logprobs": ("model", "fingerprint", "sample_id", "run_id", "position"),
    "annotations": ("model", "fingerprint", "sample_id", "annotator"),
    "scores": ("model", "fingerprint", "metric", "signature", "sample_id"),
    "leases": ("fingerprint", "model"),
    "evaluations": ("name", "fingerprint"),
    "evaluation_models": ("evaluation", "model", "version"),
    "pairs": ("evaluation", "fingerprint", "model"),
    "evaluation_metrics": ("evaluation", "metric"),
    "summary": ("fingerprint", "model", "metric"),
    "comparisons": ("fingerprint", "kind", "model", "baseline", "metric", "sample_id"),
    "correlations": ("fingerprint", "model", "kind", "metric_a", "metric_b"),
    "pairwise": ("fingerprint", "config_key", "round", "sample_id", "model_a", "model_b"),
    "episodes": ("model", "fingerprint", "task_id", "trial"),
    "episode_summary": ("fingerprint", "kind", "model", "baseline", "oracle", "oracle_b", "k", "task_id", "label"),
    "lm_eval_responses": ("model", "fingerprint", "sample_id", "task", "filter"),
    "lm_eval_summary": ("fingerprint", "model", "task", "metric", "lm_eval_metric", "filter"),
}


class LakeError(FacetlakeError, RuntimeError):
    """A lake operation was refused (bad partition value, schema mismatch, missing table)."""


class LakeConflictError(LakeError):
    """A Delta commit still conflicted with concurrent writers after the bounded retries."""


def _conflict_types() -> tuple[type[BaseException], ...]:
    from deltalake.exceptions import CommitFailedError

    return (CommitFailedError,)


def retry_bounds() -> tuple[int, float]:
    """(attempts, seconds) from ``FACETLAKE_COMMIT_ATTEMPTS`` / ``FACETLAKE_COMMIT_RETRY_S``."""
    return max(1, int(os.environ.get("FACETLAKE_COMMIT_ATTEMPTS", "30"))), float(os.environ.get("FACETLAKE_COMMIT_RETRY_S", "120"))


def with_retries(fn: Callable[[], T], *, table: str, what: str) -> T:
    """Run ``fn`` (one Delta commit, re-reading whatever it needs) and retry it on a commit
    conflict with exponential backoff and jitter, within :func:`retry_bounds`. Raises
    :class:`LakeConflictError` (one line) when the bound is reached; other errors pass."""
    from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_random_exponential

    attempts, seconds = retry_bounds()
    started = time.monotonic()
    retrying = Retrying(retry=retry_if_exception_type(_conflict_types()), stop=stop_after_attempt(attempts) | stop_after_delay(seconds),
                        wait=wait_random_exponential(multiplier=0.05, max=2.0), reraise=False)
    try:
        for attempt in retrying:
            with attempt:
                fault_point(f"commit.before:{table}")
                result = fn()
                fault_point(f"commit.after:{table}")
        return result
    except RetryError as exc:
        n = exc.last_attempt.attempt_number
        raise LakeConflictError(
            f"{what} on table {table!r} still conflicted with concurrent writers after {n} attempts in "
            f"{time.monotonic() - started:.1f} s; nothing partial was written: re-run the command (writes are idempotent), "
            "or raise FACETLAKE_COMMIT_ATTEMPTS / FACETLAKE_COMMIT_RETRY_S"
        ) from None


def ensure_table(uri: str, schema: pa.Schema, partition_by: Sequence[str] | None, storage_options: dict[str, str] | None,
                 added: Sequence[str] = ()) -> None:
    """Create the empty table at ``uri`` unless it exists (a concurrent creator may win).

    ``added``: columns of ``schema`` added to the contract after tables were written
    without them (``resources.lake.schemas.ADDED_COLUMNS``); a stored table lacking one
    gets it as a nullable column (one schema-only Delta commit, no row rewritten), so the
    write that follows matches the contract. Older rows hold null there."""
    from deltalake import DeltaTable

    if DeltaTable.is_deltatable(uri, storage_options=storage_options):
        if added:
            add_missing_columns(uri, schema, added, storage_options)
        return
    try:
        DeltaTable.create(uri, schema=schema, partition_by=list(partition_by) if partition_by else None, mode="ignore",
                          storage_options=storage_options)
    except Exception:
        if not DeltaTable.is_deltatable(uri, storage_options=storage_options):
            raise


def add_missing_columns(uri: str, schema: pa.Schema, added: Sequence[str], storage_options: dict[str, str] | None) -> list[str]:
    """Add to the stored table at ``uri`` each column of ``added`` it lacks (typed as in
    ``schema``, nullable), retrying commit conflicts; a concurrent writer adding it first is
    fine. Returns the columns this call added."""
    from deltalake import DeltaTable, Field

    def missing() -> list[str]:
        names = set(DeltaTable(uri, storage_options=storage_options).schema().to_arrow().names)
        return [c for c in added if c not in names]

    todo = missing()
    if not todo:
        return []

    def alter() -> None:
        still = missing()
        if still:
            fields = [Field.from_arrow(pa.field(c, schema.field(c).type, nullable=True)) for c in still]
            try:
                DeltaTable(uri, storage_options=storage_options).alter.add_columns(fields)
            except Exception:
                if missing():  # not a concurrent writer adding it first
                    raise

    with_retries(alter, table=uri.rstrip("/").rsplit("/", 1)[-1], what="add columns")
    return todo


def dedupe(data: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``data`` with one row per key (the last one; nulls equal nulls)."""
    import polars as pl

    if data.num_rows < 2:
        return data
    frame = pl.from_arrow(data)
    if frame.select(keys).is_duplicated().any():
        frame = frame.unique(subset=list(keys), keep="last", maintain_order=True)
        return frame.to_arrow().cast(data.schema)
    return data


def merge_predicate(keys: Sequence[str]) -> str:
    """``t.k = s.k AND ...`` with nulls equal (``(t.k = s.k OR (t.k IS NULL AND s.k IS NULL))``)."""
    return " AND ".join(f"(t.{k} = s.{k} OR (t.{k} IS NULL AND s.{k} IS NULL))" for k in keys)


def keyed_append(uri: str, table: str, data: pa.Table, storage_options: dict[str, str] | None, *,
                 partition_filter: str | None = None, fresh_keys: bool = False) -> None:
    """Insert the rows of ``data`` whose key (:data:`KEYS`) is not stored yet, in one
    MERGE commit (retried on conflicts). A table without a key gets a plain append.
    ``partition_filter``: extra ``t.col = 'v'`` terms narrowing the files scanned.
    ``fresh_keys``: every key was generated for this write (e.g. a new uuid4 call id), so
    no stored row can have it and a plain append is exact: a conflict retry happens only
    after a ``CommitFailedError``, i.e. a commit that did not land."""
    from deltalake import DeltaTable, write_deltalake

    keys = KEYS.get(table)
    if data.num_rows == 0:
        return
    if not keys or fresh_keys:  # no key, or keys made just now (uuid4): a retry follows only a commit that did not land
        with_retries(lambda: write_deltalake(uri, data, mode="append", storage_options=storage_options), table=table, what="append")
        return
    data = dedupe(data, keys)
    predicate = merge_predicate(keys) + (f" AND {partition_filter}" if partition_filter else "")

    def merge() -> None:
        (DeltaTable(uri, storage_options=storage_options)
         .merge(data, predicate=predicate, source_alias="s", target_alias="t")
         .when_not_matched_insert_all().execute())

    with_retries(merge, table=table, what="keyed append")


def overwrite(uri: str, table: str, data: pa.Table, predicate: str, storage_options: dict[str, str] | None) -> None:
    """Replace the rows matching ``predicate`` with ``data`` in one commit (retried on conflicts)."""
    from deltalake import write_deltalake

    with_retries(lambda: write_deltalake(uri, data, mode="overwrite", predicate=predicate, storage_options=storage_options),
                 table=table, what="partition replace")


def partition_filter(data: pa.Table, partition_by: Sequence[str] | None) -> str | None:
    """``t.col = 'v'`` terms for partition columns holding one safe value in ``data`` (prunes a MERGE)."""
    import re

    terms = []
    for col in partition_by or ():
        values = data.column(col).unique().to_pylist()
        if len(values) == 1 and isinstance(values[0], str) and re.fullmatch(r"[A-Za-z0-9._:\-@/+ ]{1,200}", values[0]):
            terms.append(f"t.{col} = '{values[0]}'")
    return " AND ".join(terms) or None


def table_keys(table: str) -> tuple[str, ...] | None:
    """The key columns of ``table`` (None when its appends are not keyed)."""
    return KEYS.get(table)


__all__ = ["KEYS", "LakeConflictError", "LakeError", "add_missing_columns", "dedupe", "ensure_table", "keyed_append", "merge_predicate", "overwrite",
           "retry_bounds", "table_keys", "with_retries"]
