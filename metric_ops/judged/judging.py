"""LLM-as-a-judge plumbing: the judge contract, versioned prompts, cached calls, honest parsing.

Pure (no Dagster, no Delta, no network): a judge is anything that satisfies the
:class:`Judge` protocol. The live clients (an OpenAI-compatible API through the one
outbound path, or any facetlake model backend) live in ``resources/scoring/judges.py``, which
installs a resolver so that a metric parameter ``judge: "api:MODEL@BASE_URL"`` becomes a
client (:func:`resolve_judge`).

Honesty rules implemented here (DESIGN.md, issue 4):

- a reply that cannot be parsed (prose with no JSON, truncated JSON, a missing field, a
  number outside the scale) raises :class:`JudgeParseError` carrying every raw reply;
  the caller re-asks a bounded number of times (``max_attempts``, with tenacity) and
  then records an ``error`` score with the raw text kept, never a zero;
- a free-text score is read only from a labelled form ("Score: 9", "rating = 4/5",
  or a JSON ``score`` field): a bare number such as a year is never a score; the reply
  is cleaned first (NFKC, zero-width and format characters removed), the final verdict
  wins over scores mentioned in the reasoning, and disagreeing verdicts are an error;
- every call is cached under a key over the judge's identity, the decoding settings,
  the exact messages and a salt (juror index, attempt number), so re-materialising does
  not pay twice and two jurors with the same model are still two calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import string
import threading
import tomllib
from dataclasses import dataclass
from importlib import resources as _resources
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from metric_ops.errors import CallDeferred, FacetlakeError
from metric_ops.judged.replies import JudgeParseError, JudgeReply

@runtime_checkable
class Judge(Protocol):
    """A model that answers chat messages.

    ``identity``: what names the judge in signatures and cache keys (a model spec string
    such as ``api:gpt-4o-mini@https://api.openai.com/v1``; never a key).
    ``locality``: ``local`` or ``external`` (remote APIs are external).
    ``complete(messages, *, purpose, sample_id, **decoding)`` returns a
    :class:`JudgeReply`; ``decoding`` holds ``temperature``, ``max_tokens``, ``seed``,
    ``logprobs`` (bool), ``top_logprobs`` (int). Transport failures raise.
    """

    identity: str
    locality: str

    def complete(self, messages: list[dict[str, str]], *, purpose: str, sample_id: str | None = None, **decoding: Any) -> JudgeReply:
        ...


class JudgeSpecError(FacetlakeError, ValueError):
    """A judge could not be built from its spec; the message shows a right one."""


_resolver: Callable[[str], Judge] | None = None


def install_judge_resolver(resolver: Callable[[str], Judge] | None) -> None:
    """Install the function that turns a spec string into a :class:`Judge`
    (``resources.scoring.judges`` does this when imported)."""
    global _resolver
    _resolver = resolver


def resolve_judge(judge: str | Judge) -> Judge:
    """A :class:`Judge` from a spec string (through the installed resolver) or a judge
    object (returned as is). Raises :class:`JudgeSpecError` when neither works, and when the
    spec string holds something that looks like a secret (:mod:`metric_ops.secrets`; the judge
    identity is stored in every judged score's signature and in ``judge_cache``)."""
    if isinstance(judge, str):
        if not judge.strip():
            raise JudgeSpecError("empty judge spec; name one, e.g. judge: 'api:gpt-4o-mini@https://api.openai.com/v1'")
        from metric_ops.secrets import JUDGE_FIX, refuse_secrets

        refuse_secrets(judge, "judge spec", fix=JUDGE_FIX, error=JudgeSpecError)
        if _resolver is None:
            raise JudgeSpecError(
                f"cannot build judge {judge!r}: no judge client is installed (import resources.scoring.judges, "
                "as the facetlake CLI and Dagster definitions do), or pass a Judge object"
            )
        return _resolver(judge)
    if judge is None:
        raise JudgeSpecError(
            "this metric needs a judge: set metric_params: {METRIC: {judge: 'api:MODEL@BASE_URL'}} in the evaluation spec, "
            "or `facetlake score --metric METRIC --param judge=api:MODEL@BASE_URL`"
        )
    if not isinstance(judge, Judge):
        raise JudgeSpecError(f"{judge!r} is not a judge: it needs identity, locality and complete(messages, ...)")
    return judge


# --------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned judge prompt loaded from a TOML file: ``name``, ``version``, ``system``
    and ``user`` (``string.Template`` placeholders such as ``$question``).

    ``sha256`` is the hash of the file's bytes; it enters the metric signature, so editing
    a prompt changes every number it produces and the cache misses."""

    name: str
    version: str
    system: str
    user: str
    sha256: str

    @property
    def tag(self) -> str:
        """``name@version#<12 hex>`` for signatures."""
        return f"{self.name}@{self.version}#{self.sha256[:12]}"

    def render(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; raises ``KeyError`` naming a
        missing one."""
        messages = []
        if self.system.strip():
            messages.append({"role": "system", "content": string.Template(self.system).substitute(**values).strip()})
        messages.append({"role": "user", "content": string.Template(self.user).substitute(**values).strip()})
        return messages


def parse_prompt(data: bytes, where: str) -> PromptTemplate:
    """A :class:`PromptTemplate` from TOML bytes; raises ``ValueError`` naming the file and key."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"prompt file {where}: not valid TOML ({exc})") from None
    for key in ("name", "version", "user"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise ValueError(f"prompt file {where}: missing string key {key!r} (keys: name, version, system, user)")
    return PromptTemplate(doc["name"], doc["version"], doc.get("system", ""), doc["user"], hashlib.sha256(data).hexdigest())


_PROMPTS: dict[str, PromptTemplate] = {}


def load_prompt(name: str) -> PromptTemplate:
    """The packaged prompt ``metric_ops/judged/prompts/<name>.toml``, or a prompt file at a path
    (any ``name`` ending in ``.toml``). Raises ``FileNotFoundError`` listing the packaged ones."""
    if name in _PROMPTS:
        return _PROMPTS[name]
    if name.endswith(".toml"):
        with open(name, "rb") as handle:
            prompt = parse_prompt(handle.read(), name)
    else:
        folder = _resources.files("metric_ops.judged").joinpath("prompts")
        path = folder.joinpath(f"{name}.toml")
        if not path.is_file():
            known = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))
            raise FileNotFoundError(f"no judge prompt {name!r}; packaged prompts: {', '.join(known)}")
        prompt = parse_prompt(path.read_bytes(), f"metric_ops/judged/prompts/{name}.toml")
    _PROMPTS[name] = prompt
    return prompt


# --------------------------------------------------------------------------- cache


class JudgeCache(Protocol):
    """Where judge replies are kept between runs (``resources.scoring.judges.DeltaJudgeCache``
    keeps them in the lake's ``judge_cache`` table)."""

    def get(self, key: str) -> JudgeReply | None: ...

    def put(self, key: str, reply: JudgeReply, meta: Mapping[str, Any]) -> None: ...


class MemoryJudgeCache:
    """A thread-safe in-process cache (tests, one-off commands)."""

    def __init__(self) -> None:
        self._data: dict[str, JudgeReply] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> JudgeReply | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, reply: JudgeReply, meta: Mapping[str, Any]) -> None:
        with self._lock:
            self._data[key] = reply

    def __len__(self) -> int:
        return len(self._data)


_active_cache: JudgeCache | None = None


def active_cache() -> JudgeCache | None:
    """The cache judged metrics use now (``None`` = every call is paid)."""
    return _active_cache


@contextlib.contextmanager
def use_cache(cache: JudgeCache | None) -> Iterator[JudgeCache | None]:
    """Within the block, judged metrics read and write ``cache`` (``None`` disables caching,
    e.g. for the score-stability command, which must pay every repeat)."""
    global _active_cache
    previous = _active_cache
    _active_cache = cache
    try:
        yield cache
    finally:
        _active_cache = previous


_trial_salted = False


@contextlib.contextmanager
def repeated_judging(enabled: bool = True) -> Iterator[bool]:
    """Within the block (``enabled``), a judge call about a trial row (sample id
    ``<sample>#<trial>``, :func:`metric_ops.stats.trials.split_trial`) has the trial index in
    its cache key: trial t of a repeated evaluation is its own judge call, paid once and
    replayed from the cache on a re-run, so going from k to a larger k pays only the new
    trials (issue 28). Process-wide like :func:`use_cache` (the judging threads see it)."""
    global _trial_salted
    previous = _trial_salted
    _trial_salted = bool(enabled)
    try:
        yield _trial_salted
    finally:
        _trial_salted = previous


def cache_key(identity: str, messages: Sequence[Mapping[str, str]], decoding: Mapping[str, Any], salt: str = "") -> str:
    """SHA-256 hex over the judge identity, the decoding settings, the exact messages and
    a salt (juror index / attempt number)."""
    payload = json.dumps([identity, dict(decoding), list(messages), salt], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class JudgeCall:
    """The outcome of one judged question: the parsed value, the reply it came from and
    the raw text of every attempt."""

    value: Any
    reply: JudgeReply
    raw_replies: list[str]
    cached: int


RETRY_MESSAGE = ("Your reply could not be read: {error}. Answer again with exactly one JSON object in the "
                 "requested format and nothing else.")


class JudgeCaller:
    """Asks one judge with fixed decoding settings, through the cache, re-asking on a
    parse failure at most ``max_attempts`` times in all (tenacity).

    A re-ask appends the unreadable reply and the parse error to the conversation
    (:data:`RETRY_MESSAGE`), so even a deterministic judge gets a different request. Each
    attempt has its own cache key (salt ``<salt>#a<n>``), so a re-run replays the same
    attempts from the cache at no cost.
    """

    def __init__(self, judge: Judge, decoding: Mapping[str, Any], purpose: str, max_attempts: int = 2,
                 cache: JudgeCache | None = None) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.judge = judge
        self.decoding = dict(decoding)
        self.purpose = purpose
        self.max_attempts = max_attempts
        self.cache = cache
        self.calls = 0
        self._lock = threading.Lock()
        self._in_flight: dict[str, threading.Lock] = {}

    def complete(self, messages: list[dict[str, str]], sample_id: str | None, salt: str) -> tuple[JudgeReply, bool]:
        """One reply, from the cache when present. Returns ``(reply, was_cached)``."""
        key = cache_key(self.judge.identity, messages, self.decoding, salt)
        if self.cache is None:  # no cache (e.g. the stability command): every call is paid
            return self._call(messages, sample_id), False
        # one call per key even when judging threads ask the same question at once (identical
        # outputs, e.g. repeated trials of a deterministic model): the others wait and read it
        with self._lock:
            key_lock = self._in_flight.setdefault(key, threading.Lock())
        with key_lock:
            hit = self.cache.get(key)
            if hit is not None:
                return hit, True
            defer = getattr(self.judge, "defer", None)  # a judge whose endpoint is in batch mode queues the call
            if defer is not None and defer(key, messages, purpose=self.purpose, sample_id=sample_id, decoding=self.decoding):
                raise CallDeferred(f"judge call queued for a batch (sample {sample_id})")
            reply = self._call(messages, sample_id)
            self.cache.put(key, reply, {"judge": self.judge.identity, "purpose": self.purpose, "sample_id": sample_id})
        return reply, False

    def _call(self, messages: list[dict[str, str]], sample_id: str | None) -> JudgeReply:
        reply = self.judge.complete(messages, purpose=self.purpose, sample_id=sample_id, **self.decoding)
        with self._lock:
            self.calls += 1
        return reply

    def ask(self, messages: list[dict[str, str]], parse: Callable[[JudgeReply], Any], sample_id: str | None = None,
            salt: str = "") -> JudgeCall:
        """Send ``messages`` and return ``parse(reply)``; on :class:`JudgeParseError` ask
        again, up to ``max_attempts``; the last failure is re-raised with every raw reply."""
        import tenacity

        if _trial_salted and sample_id is not None:
            from metric_ops.stats.trials import split_trial

            trial = split_trial(sample_id)[1]
            if trial is not None:
                salt = f"{salt}|trial{trial}"
        raws: list[str] = []
        failures: list[str] = []
        cached = 0
        conversation = list(messages)
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            retry=tenacity.retry_if_exception_type(JudgeParseError),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    n = attempt.retry_state.attempt_number
                    if n > 1:  # re-ask with the parse error, as a validation-feedback loop does
                        conversation = [*messages, {"role": "assistant", "content": raws[-1]},
                                        {"role": "user", "content": RETRY_MESSAGE.format(error=failures[-1])}]
                    reply, hit = self.complete(conversation, sample_id, f"{salt}#a{n}")
                    cached += int(hit)
                    raws.append(reply.text)
                    try:
                        value = parse(reply)
                    except JudgeParseError as exc:
                        failures.append(str(exc))
                        raise
                    return JudgeCall(value, reply, raws, cached)
        except JudgeParseError as exc:
            raise JudgeParseError(f"{exc} (after {len(raws)} attempt{'s' if len(raws) != 1 else ''})", raws) from None
        raise AssertionError("unreachable")  # pragma: no cover


def error_score_detail(exc: BaseException) -> dict[str, Any]:
    """``detail`` of an error score for ``exc``: the message and, for a parse failure,
    the raw replies (``raw_reply`` = the last one)."""
    detail: dict[str, Any] = {}
    raws = getattr(exc, "raw_replies", None)
    if raws:
        detail["raw_reply"] = raws[-1]
        detail["raw_replies"] = list(raws)
    return detail
