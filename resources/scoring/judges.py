"""Judge clients, the judge-call cache in the lake, and judge parameters at rescoring time.

A judge is named by the same model spec strings as any model (``resources.backends``):

- ``api:MODEL@BASE_URL``: an OpenAI-compatible endpoint (OpenAI, vLLM serve, Ollama, a
  local server). Every call goes through :func:`resources.privacy.outbound.chat_completion`, the
  one outbound path (offline guard, anonymiser, ledger, the endpoint's concurrency, rpm/tpm
  pace and the run's budget: the evaluation's ``runtime`` options apply to its judges'
  endpoints as to its model's). Locality ``external``. The key
  comes from ``$FACETLAKE_JUDGE_API_KEY``, else ``$OPENAI_API_KEY`` (never stored);
  transport retries are the openai client's own (``max_retries``).
- any other registered backend kind (``hf:PATH``, ``vllm:NAME`` when the live-generation
  backends are installed): the backend's ``generate`` with the chat messages. Locality is
  the backend's.

Importing this module installs the resolver that judged metrics use
(:func:`metric_ops.judged.judging.install_judge_resolver`). :func:`judge_session` makes judged
metrics read and write the lake's ``judge_cache`` table, so re-materialising does not pay
twice.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from typing import Any, Iterator, Mapping

from metric_ops.base import Sample
from metric_ops.errors import BudgetExhausted
from metric_ops.judged.replies import JudgeReply, TokenLogprob
from metric_ops.judged.judging import JudgeSpecError, install_judge_resolver, use_cache
from resources.catalog import utcnow
from resources.lake.resource import LakeStore

API_KEY_ENV = ("FACETLAKE_JUDGE_API_KEY", "OPENAI_API_KEY")


def _logprobs_from_openai(choice: Any) -> tuple[TokenLogprob, ...] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    out = []
    for item in content:
        top = tuple((t.token, float(t.logprob)) for t in (getattr(item, "top_logprobs", None) or []))
        out.append(TokenLogprob(item.token, float(item.logprob), top))
    return tuple(out)


def _logprobs_from_records(records: Any) -> tuple[TokenLogprob, ...] | None:
    """Token records ``[{token, logprob, char_start?, top_logprobs: [{token, logprob}] | {token: logprob}}]``
    (the live backends' ``extra["token_logprobs"]``)."""
    if not records:
        return None
    out = []
    for r in records:
        top = r.get("top_logprobs") or r.get("top") or []
        if isinstance(top, Mapping):
            pairs = tuple((str(k), float(v)) for k, v in top.items())
        else:
            pairs = tuple((str(t.get("token")), float(t.get("logprob"))) if isinstance(t, Mapping) else (str(t[0]), float(t[1]))
                          for t in top)
        lp = r.get("logprob")
        start = r.get("char_start")
        out.append(TokenLogprob(str(r.get("token", "")), -math.inf if lp is None else float(lp), pairs,
                                None if start is None else int(start)))
    return tuple(out)


class ApiJudge:
    """A judge behind an OpenAI-compatible chat-completions endpoint (``api:MODEL@BASE_URL``).

    ``complete`` sends through :func:`resources.privacy.outbound.chat_completion` with the call's
    purpose (the metric name) and sample id; raises the openai client's errors after its
    own retries, and :class:`resources.privacy.outbound.OfflineModeError` in offline mode.
    """

    locality = "external"

    def __init__(self, spec: str, max_retries: int = 3, timeout_s: float = 120.0) -> None:
        target = spec.split(":", 1)[1]
        model, sep, base_url = target.partition("@")
        if not sep or not model or not base_url.startswith(("http://", "https://")):
            raise JudgeSpecError(f"judge {spec!r}: an API judge is api:MODEL@BASE_URL, e.g. api:gpt-4o-mini@https://api.openai.com/v1")
        self.identity = spec
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The ``openai.OpenAI`` client (built on first use; key from the environment), on the
        endpoint's transport (resources/backends/endpoints.py: 429 feedback)."""
        with self._lock:
            if self._client is None:
                from resources.backends.endpoints import openai_client

                key = next((os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), "not-needed")
                self._client = openai_client(self.base_url, key, max_retries=self.max_retries, timeout_s=self.timeout_s)
            return self._client

    @property
    def options(self) -> Any:
        """The judge endpoint's options under the current run (resources/backends/endpoints.py)."""
        from resources.backends.endpoints import endpoint_for

        return endpoint_for(self.base_url).options

    def defer(self, key: str, messages: list[dict[str, str]], *, purpose: str, sample_id: str | None,
              decoding: Mapping[str, Any]) -> bool:
        """Queue the call for a Batch API file instead of sending it (True) when the judge's
        endpoint is in ``runtime.mode: batch`` and a :func:`batch_judging` block is collecting;
        a call whose batch request failed raises its error here (the sample's ``error``)."""
        collector = _collector
        if collector is None or self.options.mode != "batch":
            return False
        failed = collector.failed.get(key)
        if failed is not None:
            raise RuntimeError(failed)
        if collector.refused is not None:  # not admitted to a batch by the run's budget: no score (JudgedMetric)
            raise collector.refused
        collector.add(self, key, messages, purpose, sample_id, decoding)
        return True

    def _kwargs(self, decoding: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = {k: v for k, v in decoding.items() if v is not None}
        if not kwargs.get("logprobs"):
            kwargs.pop("logprobs", None)
            kwargs.pop("top_logprobs", None)
        return kwargs

    def concurrency(self) -> int:
        """The judge endpoint's in-flight limit under the current run's runtime
        (``runtime.concurrency`` or ``runtime.endpoints[URL].concurrency``)."""
        from resources.backends.endpoints import endpoint_for

        return endpoint_for(self.base_url).options.concurrency

    def complete(self, messages: list[dict[str, str]], *, purpose: str, sample_id: str | None = None, **decoding: Any) -> JudgeReply:
        from resources.privacy.outbound import CallContext, chat_completion

        kwargs = self._kwargs(decoding)
        response = chat_completion(self.client(), CallContext(purpose=purpose, sample_id=sample_id, model=self.model),
                                   messages=messages, model=self.model, **kwargs)
        choice = response.choices[0]
        return JudgeReply(choice.message.content or "", _logprobs_from_openai(choice))


class BackendJudge:
    """A judge behind any facetlake model backend (``hf:PATH``, ``vllm:NAME``, ...): the
    chat messages go to the backend's ``generate`` as one request; a failed generation
    raises ``RuntimeError`` with the backend's message."""

    def __init__(self, spec: str) -> None:
        from resources.backends import BACKENDS, parse_model_spec

        kind, _ = parse_model_spec(spec)
        if not BACKENDS[kind].live:  # precomputed, heuristic, lm_eval: outputs made elsewhere, nothing to ask
            raise JudgeSpecError(f"judge {spec!r}: a {kind} backend reads outputs made elsewhere and cannot judge; "
                                 "use api:MODEL@BASE_URL, hf:PATH or vllm:NAME")
        self.identity = spec
        self.backend = BACKENDS[kind](spec, None)
        self.locality = getattr(self.backend, "locality", "local")

    def complete(self, messages: list[dict[str, str]], *, purpose: str, sample_id: str | None = None, **decoding: Any) -> JudgeReply:
        from resources.backends import GenerationRequest

        prompt = "\n\n".join(m["content"] for m in messages)
        request = GenerationRequest(sample=Sample(sample_id=sample_id or "judge", input=prompt), prompt=prompt, messages=messages)
        result = next(iter(self.backend.generate([request], decoding)))
        if result.status != "ok" or result.output is None:
            raise RuntimeError(f"judge {self.identity} failed: {result.error}")
        extra = result.extra or {}
        records = extra.get("token_logprobs") or extra.get("logprobs")
        return JudgeReply(result.output, _logprobs_from_records(records))


@functools.lru_cache(maxsize=32)
def judge_for(spec: str) -> Any:
    """The judge client for a spec string (one per spec per process). Raises
    :class:`~metric_ops.judged.judging.JudgeSpecError` for a malformed or unavailable spec."""
    from resources.backends import ModelSpecError, parse_model_spec

    try:
        kind, _ = parse_model_spec(spec)
    except ModelSpecError as exc:
        raise JudgeSpecError(f"judge: {exc}") from None
    if kind == "api":
        return ApiJudge(spec)
    return BackendJudge(spec)


install_judge_resolver(judge_for)


# --------------------------------------------------------------------------- judges through the Batch API
MAX_BATCH_ROUNDS = 4  # G-Eval: its evaluation steps, then its ratings; a re-ask after an unreadable reply adds one


class BatchJudging:
    """The judge calls of one scores step that wait for Batch API files (judge endpoints in
    ``runtime.mode: batch``): ``calls`` by judge-cache key, ``failed`` keys with the batch's
    error. See :func:`batch_judging` and :meth:`settle`."""

    def __init__(self, lake: LakeStore, fingerprint: str, model: str, run_id: str) -> None:
        self.lake, self.fingerprint, self.model, self.run_id = lake, fingerprint, model, run_id
        self.calls: dict[str, dict[str, Any]] = {}
        self.failed: dict[str, str] = {}
        self.batch_ids: list[str] = []
        self.pending: Any = None  # the BatchPending of the last send, when a batch was not back in time
        self.refused: BudgetExhausted | None = None  # the run's budget stopped a batch short
        self._lock = threading.Lock()

    def add(self, judge: "ApiJudge", key: str, messages: list[dict[str, str]], purpose: str, sample_id: str | None,
            decoding: Mapping[str, Any]) -> None:
        with self._lock:
            self.calls[key] = {"judge": judge, "messages": messages, "purpose": purpose, "sample_id": sample_id,
                               "decoding": dict(decoding)}

    def send(self, cache: Any) -> Any:
        """Submit the queued calls (one batch per judge endpoint and purpose, resuming open ones),
        wait, and put each reply in ``cache`` under its key (a failed request goes to
        ``failed``). Returns the :class:`~resources.backends.batch.BatchPending` of a batch not
        finished in time (None when all came back)."""
        from resources.backends.batch import BatchCalls, BatchPending

        groups: dict[tuple[str, str], list[str]] = {}
        with self._lock:
            calls, self.calls = self.calls, {}
        for key, call in calls.items():
            groups.setdefault((call["judge"].identity, call["purpose"]), []).append(key)
        pending = None
        for (identity, purpose), keys in groups.items():
            judge = calls[keys[0]]["judge"]
            batch = BatchCalls(self.lake, judge, self.fingerprint, self.model, self.run_id, purpose=f"judge:{purpose}",
                               ledger_purpose=purpose)

            def make(key: str, batch: Any = batch) -> Any:
                call = calls[key]
                return batch.item(key, call["sample_id"], call["messages"], call["judge"]._kwargs(call["decoding"]))

            try:
                for got in batch.run(keys, make):
                    if got.result.status == "ok":
                        records = (got.result.extra or {}).get("token_logprobs")
                        cache.put(got.key, JudgeReply(got.result.output or "", _logprobs_from_records(records)),
                                  {"judge": identity, "purpose": purpose, "sample_id": got.sample_id})
                    else:
                        self.failed[got.key] = got.result.error or "batch request failed"
            except BatchPending as exc:
                pending = exc
            except BudgetExhausted as exc:  # the admitted requests came back; the others are not sent
                self.refused = exc
            self.batch_ids.extend(batch.submitted + [b for b in batch.collected if b not in batch.submitted])
        return pending


_collector: BatchJudging | None = None


@contextlib.contextmanager
def batch_judging(lake: LakeStore, fingerprint: str, model: str, run_id: str) -> Iterator[BatchJudging]:
    """Within the block, API judges whose endpoint is in batch mode queue their calls in the
    yielded :class:`BatchJudging` instead of sending them (the scores asset)."""
    global _collector
    previous = _collector
    _collector = BatchJudging(lake, fingerprint, model, run_id)
    try:
        yield _collector
    finally:
        _collector = previous


# --------------------------------------------------------------------------- cache in the lake


class DeltaJudgeCache:
    """Judge replies in the lake's ``judge_cache`` Delta table (one row per call: key,
    judge, purpose, sample id, reply JSON, time). Keys are read once; new replies are
    buffered and appended every ``flush_every`` calls and on :meth:`flush`, so a killed run
    keeps most of what it paid for. Thread-safe. Only replies are stored: no keys, and no
    prompt text beyond what the reply holds."""

    def __init__(self, lake: LakeStore, flush_every: int = 50) -> None:
        self.lake = lake
        self.flush_every = flush_every
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._data: dict[str, str] | None = None
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, str]:
        if self._data is None:
            frame = self.lake.read("judge_cache", columns=["key", "reply"])
            self._data = dict(zip(frame["key"].to_list(), frame["reply"].to_list()))
        return self._data

    def get(self, key: str) -> JudgeReply | None:
        with self._lock:
            payload = self._load().get(key)
            if payload is None:
                self.misses += 1
                return None
            self.hits += 1
        return JudgeReply.from_json(payload)

    def put(self, key: str, reply: JudgeReply, meta: Mapping[str, Any]) -> None:
        payload = reply.to_json()
        with self._lock:
            self._load()[key] = payload
            self._pending.append({"key": key, "judge": str(meta.get("judge")), "purpose": str(meta.get("purpose")),
                                  "sample_id": meta.get("sample_id"), "reply": payload, "created_at": utcnow()})
            if len(self._pending) >= self.flush_every:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._pending:
            rows, self._pending = self._pending, []
            self.lake.append("judge_cache", rows)

    def flush(self) -> None:
        """Append buffered replies to ``judge_cache``."""
        with self._lock:
            self._flush_locked()


@contextlib.contextmanager
def judge_session(lake: LakeStore) -> Iterator[DeltaJudgeCache]:
    """Within the block judged metrics use the lake's judge cache; flushed at the end
    (also when the block raises)."""
    cache = DeltaJudgeCache(lake)
    try:
        with use_cache(cache):
            yield cache
    finally:
        cache.flush()
