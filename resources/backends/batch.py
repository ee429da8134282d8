"""Generations through the OpenAI Batch API (``runtime: {mode: batch}``).

For an OpenAI-compatible endpoint that offers the Batch API (OpenAI, and servers speaking
its files and batches routes): half the price, results within a 24-hour window; the
workload of recurring nightly evaluations. :class:`BatchCalls` does, for one
(fingerprint, model) partition:

1. **resume first**: every batch an earlier run of the partition submitted and nobody
   collected (``call_batches`` rows without a ``done`` state) is collected, never sent
   again. A run killed between the upload and the batch's creation left an ``uploaded``
   row: its batch is found on the server by its input file (``GET /v1/batches``) or, when
   the server never saw the create, created now from the file already uploaded;
2. **submit the rest**: each request goes through the outbound gate without being sent
   (:func:`resources.privacy.outbound.deferred_chat`: offline guard, anonymiser, a ledger
   intent committed before the upload; the request's ``custom_id`` is its ledger
   ``call_id``), and counts as one call against the run's budget at the batch price
   (a request the budget refuses is not put in the file). The JSONL file is uploaded
   (``uploaded`` row), the batch created (``submitted`` row, batch id also set on the
   requests' ledger rows);
3. **poll with backoff** (tenacity: ``runtime.poll_s`` doubling up to 10 minutes) until each
   batch is finished or ``runtime.batch_wait_s`` has passed: then :class:`BatchPending` ends
   the run, naming the batches, and the next run (the same command, or a schedule's next
   tick) collects them;
4. **collect**: the output file's lines become results (``custom_id`` -> sample), the error
   file's and any request a finished batch did not answer become ``error`` results with the
   reason; the ledger rows are completed or failed; a ``done`` row closes the batch.

Table ``call_batches``: one row per state change (key: input file id, state).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from metric_ops.errors import BudgetExhausted, FacetlakeError
from resources.backends import GenerationRequest, GenerationResult

BATCH_TABLE = "call_batches"
UPLOADED, SUBMITTED, DONE = "uploaded", "submitted", "done"
FINISHED = ("completed", "failed", "expired", "cancelled")
ENDPOINT = "/v1/chat/completions"


class BatchPending(FacetlakeError, RuntimeError):
    """Submitted batches are not finished within ``runtime.batch_wait_s``: the run ends, the
    rows collected so far are kept, and the next run collects the rest (nothing is sent again)."""


@dataclass
class BatchItem:
    """One line of a batch file: ``custom_id`` (the ledger call id), ``key`` (what it answers:
    a sample id for generations, a judge-cache key for judges), the sample and the request body."""

    custom_id: str
    key: str
    sample_id: str | None
    body: dict[str, Any]


@dataclass
class Collected:
    """One request's result: its key, sample id and :class:`GenerationResult` (``extra`` holds
    ``token_logprobs`` when the reply has them)."""

    key: str
    sample_id: str | None
    result: GenerationResult


def _now():
    from resources.catalog import utcnow

    return utcnow()


class BatchCalls:
    """The Batch API path of one (fingerprint, model) partition; see the module docstring.
    ``backend``: the partition's :class:`~resources.backends.api.APIBackend` (its client,
    model, base URL and options)."""

    def __init__(self, lake: Any, backend: Any, fingerprint: str, model: str, run_id: str, purpose: str = "generation",
                 ledger_purpose: str | None = None) -> None:
        self.lake, self.backend = lake, backend
        self.fingerprint, self.model, self.run_id, self.purpose = fingerprint, model, run_id, purpose
        self.ledger_purpose = ledger_purpose or purpose  # the ledger rows' purpose, as a live call of the same kind writes it
        self.options = backend.options
        self.submitted: list[str] = []  # batch ids this run created
        self.collected: list[str] = []  # batch ids this run collected

    # ------------------------------------------------------------------ the table
    def _record(self, state: str, **fields: Any) -> None:
        row = {"input_file_id": None, "state": state, "batch_id": None, "base_url": self.backend.base_url,
               "api_model": self.backend.model, "purpose": self.purpose, "fingerprint": self.fingerprint, "model": self.model,
               "run_id": self.run_id, "requests": None, "n_requests": None, "status": None, "output_file_id": None,
               "error_file_id": None, "created_at": _now(), **fields}
        self.lake.append(BATCH_TABLE, [row])

    def open_batches(self) -> list[dict[str, Any]]:
        """The partition's batches not yet collected (latest state ``uploaded`` or ``submitted``),
        with their ``requests`` (``[[custom_id, sample_id, key], ...]``)."""
        import polars as pl

        if not self.lake.exists(BATCH_TABLE):
            return []
        rows = self.lake.read(BATCH_TABLE, where={"fingerprint": self.fingerprint, "model": self.model})
        rows = rows.filter((pl.col("base_url") == self.backend.base_url) & (pl.col("purpose") == self.purpose))
        if rows.height == 0:
            return []
        order = {UPLOADED: 0, SUBMITTED: 1, DONE: 2}
        latest: dict[str, dict[str, Any]] = {}
        requests: dict[str, str] = {}
        for r in rows.sort("created_at").iter_rows(named=True):
            if r["requests"]:
                requests[r["input_file_id"]] = r["requests"]
            prev = latest.get(r["input_file_id"])
            if prev is None or order[r["state"]] >= order[prev["state"]]:
                latest[r["input_file_id"]] = r
        return [{**r, "requests": json.loads(requests.get(r["input_file_id"], "[]"))} for r in latest.values() if r["state"] != DONE]

    # ------------------------------------------------------------------ submit
    def item(self, key: str, sample_id: str | None, messages: list[dict[str, Any]], kwargs: Mapping[str, Any]) -> BatchItem:
        """A request for the batch file: through the outbound gate without being sent
        (:func:`resources.privacy.outbound.deferred_chat`: the ledger intent is committed now);
        ``key`` names what it answers (a sample id, a judge-cache key)."""
        from resources.privacy import outbound

        ctx = outbound.CallContext(purpose=self.ledger_purpose, sample_id=sample_id, model=self.backend.model)
        sent, call_id = outbound.deferred_chat(self.backend.base_url, ctx, messages=messages)
        body = {"model": self.backend.model, "messages": sent, **{k: v for k, v in kwargs.items() if v is not None}}
        return BatchItem(str(call_id or uuid.uuid4().hex), key, sample_id, body)

    def submit(self, items: Iterator[BatchItem]) -> BudgetExhausted | None:
        """Upload and submit one batch of ``items`` (drawn one at a time: the first one the run's
        budget refuses, its ledger intent already written, is marked failed and never sent, and no
        later one is drawn); returns the budget's refusal when it stopped short (None otherwise)."""
        from resources.backends.endpoints import active_budget, batch_price, estimate_tokens, price_of, usd_estimate

        budget = active_budget()
        price = batch_price(price_of(self.backend.model))
        lines, index, refused = [], [], None
        for item in items:
            custom_id, body = item.custom_id, item.body
            if budget is not None:
                texts = [str(m.get("content")) for m in body["messages"]]
                try:
                    held = budget.reserve(estimate_tokens(texts, body.get("max_tokens")), usd_estimate(price, texts, body.get("max_tokens")))
                except BudgetExhausted as exc:
                    from resources.privacy.outbound import complete_deferred

                    complete_deferred(custom_id, ok=False)  # its intent row: never sent
                    refused = exc
                    break
                budget.settle(held, sent=True, tokens=None, usd=None)
            lines.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False))
            index.append([custom_id, item.sample_id, item.key])
        if not lines:
            return refused
        client = self.backend.client()
        data = ("\n".join(lines) + "\n").encode("utf-8")
        upload = client.files.create(file=(f"facetlake-{self.model}-{uuid.uuid4().hex[:8]}.jsonl", data), purpose="batch")
        self._record(UPLOADED, input_file_id=upload.id, requests=json.dumps(index), n_requests=len(index))
        self._create(upload.id, [c for c, _, _ in index])
        return refused

    def _create(self, input_file_id: str, call_ids: Sequence[str]) -> str:
        from resources.faults import fault_point

        fault_point("batch.before_create")
        batch = self.backend.client().batches.create(input_file_id=input_file_id, endpoint=ENDPOINT, completion_window="24h",
                                                     metadata={"facetlake_run": self.run_id[:64], "facetlake_model": self.model[:64]})
        fault_point("batch.after_create")
        self._record(SUBMITTED, input_file_id=input_file_id, batch_id=batch.id, status=batch.status)
        self.submitted.append(batch.id)
        mark_batch(self.lake, call_ids, batch.id)
        return batch.id

    def _resolve(self, row: dict[str, Any]) -> str:
        """The batch id of an ``uploaded`` row left by a killed run: the server's batch over
        that input file, else a batch created now."""
        for batch in self.backend.client().batches.list(limit=100):
            if batch.input_file_id == row["input_file_id"]:
                self._record(SUBMITTED, input_file_id=row["input_file_id"], batch_id=batch.id, status=batch.status)
                return batch.id
        return self._create(row["input_file_id"], [c for c, _, _ in row["requests"]])

    # ------------------------------------------------------------------ poll and collect
    def _wait(self, batch_id: str, deadline: float) -> Any:
        import tenacity

        client = self.backend.client()
        remaining = max(0.0, deadline - time.monotonic())
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda b: b.status not in FINISHED),
            wait=tenacity.wait_exponential(multiplier=self.options.poll_s, min=self.options.poll_s, max=600),
            stop=tenacity.stop_after_delay(remaining), retry_error_callback=lambda state: state.outcome.result())
        return retrying(client.batches.retrieve, batch_id)

    def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        text = self.backend.client().files.content(file_id).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def generations(self, requests: Sequence[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[Collected]:
        """:meth:`run` for generation requests (key: the sample id)."""
        by_id = {r.sample.sample_id: r for r in requests}
        kwargs = self.backend._request_kwargs(settings)

        def make(key: str) -> BatchItem:
            r = by_id[key]
            return self.item(key, key, r.messages or [{"role": "user", "content": r.prompt}], kwargs)

        return self.run(list(by_id), make)

    def run(self, keys: Sequence[str], make: Callable[[str], BatchItem]) -> Iterator[Collected]:
        """Resume the open batches, submit (``make(key)`` for each) the keys they do not cover,
        wait, and yield each result as its batch is collected (``Collected.key``). Raises
        :class:`BatchPending` (after yielding what finished) when a batch is not done within
        ``batch_wait_s``, and the budget's :class:`~metric_ops.errors.BudgetExhausted` after
        the admitted requests' results."""
        from resources.privacy.outbound import complete_deferred

        wanted = set(keys)
        open_rows = self.open_batches()
        covered = {key for row in open_rows for _, _, key in row["requests"]}
        todo = [k for k in dict.fromkeys(keys) if k not in covered]
        refused = self.submit(make(k) for k in todo) if todo else None
        open_rows = self.open_batches()
        deadline = time.monotonic() + self.options.batch_wait_s
        pending = []
        for row in open_rows:
            batch_id = row["batch_id"] if row["state"] == SUBMITTED else self._resolve(row)
            batch = self._wait(batch_id, deadline)
            if batch.status not in FINISHED:
                pending.append(f"{batch_id} ({batch.status}, {len(row['requests'])} requests)")
                continue
            by_call = {c: (sid, key) for c, sid, key in row["requests"]}
            answered = set()
            for line in self._lines(batch.output_file_id) + self._lines(getattr(batch, "error_file_id", None)):
                custom_id = line.get("custom_id")
                if custom_id not in by_call:
                    continue
                answered.add(custom_id)
                sid, key = by_call[custom_id]
                result = _result(sid, line)
                complete_deferred(custom_id, ok=result.status == "ok")
                if key in wanted:
                    yield Collected(key, sid, result)
            for custom_id, (sid, key) in by_call.items():
                if custom_id not in answered:
                    complete_deferred(custom_id, ok=False)
                    if key in wanted:
                        yield Collected(key, sid, GenerationResult(
                            sid, None, "error", f"the batch {batch_id} ended {batch.status} without a result for this request"))
            mark_batch(self.lake, list(by_call), batch_id)  # again: a run killed after the create never set it
            self._record(DONE, input_file_id=row["input_file_id"], batch_id=batch_id, status=batch.status,
                         output_file_id=batch.output_file_id, error_file_id=getattr(batch, "error_file_id", None))
            self.collected.append(batch_id)
        if pending:
            raise BatchPending(
                f"{self.model}: batch(es) still running after {self.options.batch_wait_s:.0f} s: {', '.join(pending)}. "
                "Finished rows are stored; run the same command again (or let the schedule's next tick run) to collect "
                "them: nothing is sent again. Raise runtime.batch_wait_s to wait longer in one run")
        if refused is not None:
            raise refused


def _result(sample_id: str, line: Mapping[str, Any]) -> GenerationResult:
    """A :class:`GenerationResult` from one output- or error-file line."""
    response = line.get("response") or {}
    body = response.get("body") or {}
    if line.get("error") or int(response.get("status_code") or 0) != 200:
        error = line.get("error") or body.get("error") or {"message": f"status {response.get('status_code')}"}
        message = error.get("message") if isinstance(error, Mapping) else str(error)
        return GenerationResult(sample_id, None, "error", f"batch request failed: {message}")
    choice = (body.get("choices") or [{}])[0]
    usage = body.get("usage") or {}
    text = (choice.get("message") or {}).get("content") or ""
    extra: dict[str, Any] = {"finish_reason": choice.get("finish_reason")}
    content = (choice.get("logprobs") or {}).get("content")
    if content:
        extra["token_logprobs"] = content  # OpenAI's records: token, logprob, top_logprobs
    return GenerationResult(sample_id, text, "ok", tokens_in=usage.get("prompt_tokens"), tokens_out=usage.get("completion_tokens"),
                            extra=extra)


def mark_batch(lake: Any, call_ids: Sequence[str], batch_id: str) -> None:
    """Set ``batch_id`` on the ledger rows of ``call_ids`` (one MERGE, retried on conflicts)."""
    import pyarrow as pa

    from resources.lake.commit import with_retries
    from resources.privacy.ledger import LEDGER_TABLE

    from resources.lake.wal import settle

    settle(lake, LEDGER_TABLE)  # the requests' intents may still be in this process's write-ahead file
    if not call_ids or not lake.exists(LEDGER_TABLE):
        return
    source = pa.table({"call_id": pa.array(list(call_ids), pa.string()), "batch_id": pa.array([batch_id] * len(call_ids), pa.string())})

    def merge() -> None:
        (lake.delta(LEDGER_TABLE).merge(source, predicate="t.call_id = s.call_id", source_alias="s", target_alias="t")
         .when_matched_update({"batch_id": "s.batch_id"}).execute())

    with_retries(merge, table=LEDGER_TABLE, what="ledger batch id")


__all__ = ["BATCH_TABLE", "BatchCalls", "BatchItem", "BatchPending", "Collected", "mark_batch"]
