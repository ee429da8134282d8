"""The base of the judged metrics (metric_ops/judged/geval_jury.py: G-Eval, jury;
metric_ops/judged/rag_triad.py: the RAG Triad): :class:`JudgedMetric` (judge parameter,
locality from the judge, prompt hashes in the signature) and the small text helpers
they share (sentence splitting, numbered lists, short hashes)."""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Sequence

from metric_ops.base import Metric, Sample, Score, check_lengths
from metric_ops.errors import BudgetExhausted, CallDeferred
from metric_ops.judged.judging import Judge, JudgeCaller, active_cache, error_score_detail, load_prompt, resolve_judge
from metric_ops.judged.replies import JudgeParseError

VERDICTS = ("supported", "unsupported", "contradicted")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` with pysbd (the segmenter RAGAS uses), stripped, empty ones
    dropped."""
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return [s.strip() for s in segmenter.segment(text or "") if s.strip()]


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(items, start=1))


def _short_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


class JudgedMetric(Metric):
    """Base of the judged metrics: judge resolution, locality, signature, cached calls,
    per-sample error isolation and parallel calls.

    Parameters (all enter the signature except ``concurrency``): ``judge`` (spec or
    Judge; required), ``temperature`` (0.0), ``max_tokens`` (1024), ``seed`` (0),
    ``max_attempts`` (2: one re-ask after an unparseable reply), ``concurrency`` (samples
    judged at once; default the judge endpoint's ``runtime.concurrency``, :meth:`workers`).
    A call the run's budget refuses gives no score for its sample (``unsent``,
    ``budget_stop``): the scores asset keeps the rest and ends the run with the message. A reply that still cannot be parsed gives an ``error`` score
    whose ``detail`` keeps ``raw_reply``; a transport failure gives an ``error`` with its
    message. Never a zero.
    """

    abstract = True
    locality = "external"  # until a judge says otherwise (instances take their judge's)
    signature_lead = ("judge", "judges", "prompts", "decoding", "attempts")
    dimension = "factual"
    value_range = (0.0, 1.0)
    prompts: ClassVar[tuple[str, ...]] = ()
    logprobs: ClassVar[bool] = False

    def __init__(self, judge: Any = None, temperature: float = 0.0, max_tokens: int = 1024, seed: int | None = 0,
                 max_attempts: int = 2, concurrency: int | None = None, **params: Any) -> None:
        self.judge: Judge = resolve_judge(judge)
        self.locality = self.judge.locality  # type: ignore[misc]  # the metric runs where its judge runs
        self.decoding: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens)}
        if seed is not None:
            self.decoding["seed"] = int(seed)
        if self.logprobs:
            self.decoding.update(logprobs=True, top_logprobs=int(params.pop("top_logprobs", 10)))
        self.max_attempts = int(max_attempts)
        self.concurrency = None if concurrency is None else max(1, int(concurrency))
        self.unsent: set[str] = set()  # samples whose calls the run's budget refused (no score rows)
        self.budget_stop: BudgetExhausted | None = None
        self.deferred: set[str] = set()  # samples whose judge calls wait in a Batch API file
        self._budget_lock = threading.Lock()
        self.templates = {name: load_prompt(name) for name in self.prompts}
        super().__init__(**params)

    def param_fields(self) -> dict[str, str]:
        """The parameters as the signature writes them: a dict or list as sorted-key JSON,
        anything else as ``str``; a text longer than 40 characters as ``#`` plus a short
        hash of the value."""
        out = {}
        for key in sorted(self.params):
            value = self.params[key]
            text = json.dumps(value, sort_keys=True, default=str) if isinstance(value, (dict, list, tuple)) else str(value)
            out[key] = text if len(text) <= 40 else "#" + _short_hash(value)
        return out

    def judge_field(self) -> str:
        """The signature field naming the judge (``judge:<identity>``)."""
        return f"judge:{self.judge.identity}"

    def signature(self) -> str:
        parts = [self.name, f"v:{self.version}", self.judge_field()]
        parts.append("prompts:" + ",".join(t.tag for t in self.templates.values()))
        parts.append("decoding:" + ",".join(f"{k}={v}" for k, v in sorted(self.decoding.items())))
        parts.append(f"attempts:{self.max_attempts}")
        parts.extend(f"{key}:{text}" for key, text in self.param_fields().items())
        for lib in self.libraries:
            from metric_ops.base import library_version

            parts.append(f"{lib}:{library_version(lib)}")
        return "|".join(parts)

    def caller(self, purpose: str | None = None) -> JudgeCaller:
        """A :class:`JudgeCaller` for this metric's judge and decoding, using the active cache."""
        return JudgeCaller(self.judge, self.decoding, purpose or self.name, self.max_attempts, active_cache())

    def prepare(self, caller: JudgeCaller) -> None:
        """Once per batch, before the samples (G-Eval writes its evaluation steps here)."""

    def score_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        """Scores of one sample (raise :class:`JudgeParseError` for an unreadable reply)."""
        raise NotImplementedError

    def _refused(self, sample_ids: Sequence[str], exc: BudgetExhausted) -> None:
        with self._budget_lock:
            self.unsent.update(sample_ids)
            if self.budget_stop is None:
                self.budget_stop = exc

    def _safe_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        try:
            return self.score_one(caller, sample, output)
        except BudgetExhausted as exc:  # not sent: no score at all (a re-run with a larger budget scores it)
            self._refused([sample.sample_id], exc)
            return {}
        except CallDeferred:  # queued for a Batch API file: scored in a later round (resources/scoring/judges.py)
            with self._budget_lock:
                self.deferred.add(sample.sample_id)
            return {}
        except Exception as exc:  # noqa: BLE001 - one bad sample never sinks a run
            prefix = "unparseable judge reply" if isinstance(exc, JudgeParseError) else type(exc).__name__
            score = Score.error(f"{prefix}: {exc}", **error_score_detail(exc))
            return {name: score for name in self.emitted()}

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        caller = self.caller()
        self.last_caller = caller
        try:
            self.prepare(caller)
        except BudgetExhausted as exc:
            self._refused([s.sample_id for s in samples], exc)
            return [{} for _ in samples]
        except CallDeferred:  # the setup call (G-Eval's evaluation steps) is in a batch: every sample waits for it
            self.deferred.update(s.sample_id for s in samples)
            return [{} for _ in samples]
        workers = self.workers()
        if workers == 1 or len(samples) <= 1:
            return [self._safe_one(caller, s, o) for s, o in zip(samples, outputs)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda pair: self._safe_one(caller, *pair), zip(samples, outputs)))

    def workers(self) -> int:
        """Samples judged at once: the ``concurrency`` parameter, else the judge endpoint's
        in-flight limit (resources/backends/endpoints.py; the endpoint caps the calls in flight
        across every metric anyway), else 4 for a judge with no endpoint (a local backend)."""
        if self.concurrency is not None:
            return self.concurrency
        limit = getattr(self.judge, "concurrency", None)
        return max(1, int(limit() if callable(limit) else limit)) if limit else 4
