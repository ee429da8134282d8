"""LLM-as-a-judge plumbing: the judge contract, versioned prompts, cached calls, honest parsing.

Pure (no Dagster, no Delta, no network): a judge is anything that satisfies the
:class:`Judge` protocol. The live clients (an OpenAI-compatible API through the one
outbound path, or any facetlake model backend) live in ``resources/judges.py``, which
installs a resolver so that a metric parameter ``judge: "api:MODEL@BASE_URL"`` becomes a
client (:func:`resolve_judge`).

Honesty rules implemented here (DESIGN.md, issue 4):

- a reply that cannot be parsed (prose with no JSON, truncated JSON, a missing field, a
  number outside the scale) raises :class:`JudgeParseError` carrying every raw reply;
  the caller re-asks a bounded number of times (``max_attempts``, with tenacity) and
  then records an ``error`` score with the raw text kept, never a zero;
- a free-text score is read only from a labelled form ("Score: 9", "rating = 4/5",
  or a JSON ``score`` field): a bare number such as a year is never a score;
- every call is cached under a key over the judge's identity, the decoding settings,
  the exact messages and a salt (juror index, attempt number), so re-materialising does
  not pay twice and two jurors with the same model are still two calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import string
import threading
import tomllib
from dataclasses import dataclass, field
from importlib import resources as _resources
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, natural-log probability, the top-k alternatives
    ``((token, logprob), ...)`` at that position (OpenAI ``logprobs.content`` shape) and,
    where the backend knows it, the character offset of the token in the reply."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    start: int | None = None


@dataclass(frozen=True)
class JudgeReply:
    """A judge's answer: the text and, where the backend returns them, per-token
    log-probabilities (``None`` when it does not)."""

    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None

    def to_json(self) -> str:
        """Compact JSON for a cache row."""
        lp = None if self.logprobs is None else [[t.token, t.logprob, [list(a) for a in t.top], t.start] for t in self.logprobs]
        return json.dumps({"text": self.text, "logprobs": lp}, ensure_ascii=False)

    @classmethod
    def from_json(cls, payload: str) -> "JudgeReply":
        """Inverse of :meth:`to_json`."""
        data = json.loads(payload)
        lp = data.get("logprobs")
        tokens = None if lp is None else tuple(
            TokenLogprob(t[0], float(t[1]), tuple((a, float(b)) for a, b in t[2]), t[3] if len(t) > 3 else None) for t in lp)
        return cls(text=data["text"], logprobs=tokens)


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


class JudgeSpecError(ValueError):
    """A judge could not be built from its spec; the message shows a right one."""


_resolver: Callable[[str], Judge] | None = None


def install_judge_resolver(resolver: Callable[[str], Judge] | None) -> None:
    """Install the function that turns a spec string into a :class:`Judge`
    (``resources.judges`` does this when imported)."""
    global _resolver
    _resolver = resolver


def resolve_judge(judge: str | Judge) -> Judge:
    """A :class:`Judge` from a spec string (through the installed resolver) or a judge
    object (returned as is). Raises :class:`JudgeSpecError` when neither works."""
    if isinstance(judge, str):
        if not judge.strip():
            raise JudgeSpecError("empty judge spec; name one, e.g. judge: 'api:gpt-4o-mini@https://api.openai.com/v1'")
        if _resolver is None:
            raise JudgeSpecError(
                f"cannot build judge {judge!r}: no judge client is installed (import resources.judges, "
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
    """The packaged prompt ``metric_ops/prompts/<name>.toml``, or a prompt file at a path
    (any ``name`` ending in ``.toml``). Raises ``FileNotFoundError`` listing the packaged ones."""
    if name in _PROMPTS:
        return _PROMPTS[name]
    if name.endswith(".toml"):
        with open(name, "rb") as handle:
            prompt = parse_prompt(handle.read(), name)
    else:
        folder = _resources.files("metric_ops").joinpath("prompts")
        path = folder.joinpath(f"{name}.toml")
        if not path.is_file():
            known = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))
            raise FileNotFoundError(f"no judge prompt {name!r}; packaged prompts: {', '.join(known)}")
        prompt = parse_prompt(path.read_bytes(), f"metric_ops/prompts/{name}.toml")
    _PROMPTS[name] = prompt
    return prompt


# --------------------------------------------------------------------------- cache


class JudgeCache(Protocol):
    """Where judge replies are kept between runs (``resources.judges.DeltaJudgeCache``
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


def cache_key(identity: str, messages: Sequence[Mapping[str, str]], decoding: Mapping[str, Any], salt: str = "") -> str:
    """SHA-256 hex over the judge identity, the decoding settings, the exact messages and
    a salt (juror index / attempt number)."""
    payload = json.dumps([identity, dict(decoding), list(messages), salt], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- parsing


class JudgeParseError(ValueError):
    """A judge reply could not be read; ``raw_replies`` holds every attempt's text."""

    def __init__(self, message: str, raw_replies: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.raw_replies = list(raw_replies)


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def extract_json(text: str) -> tuple[dict[str, Any], int]:
    """The one JSON object in a judge reply and its character offset in ``text``.

    Accepted: a bare object, an object inside a complete Markdown fence, an object with
    prose before or after it. Raises :class:`JudgeParseError` for prose with no object, a
    truncated object (fenced or not), an unclosed fence, or several objects (ambiguous).
    """
    fenced = list(_FENCE.finditer(text))
    if len(fenced) > 1:
        raise JudgeParseError(f"reply has {len(fenced)} fenced blocks; expected one JSON object")
    if fenced:
        body, base = fenced[0].group(1), fenced[0].start(1)
    else:
        if "```" in text:
            raise JudgeParseError("reply has an unclosed ``` fence (truncated JSON?)")
        body, base = text, 0
    start = body.find("{")
    if start < 0:
        raise JudgeParseError("reply holds no JSON object (prose only)")
    decoder = json.JSONDecoder()
    try:
        obj, end = decoder.raw_decode(body, start)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"reply holds no complete JSON object (truncated or malformed: {exc.msg} at char {exc.pos})") from None
    if not isinstance(obj, dict):
        raise JudgeParseError("reply's JSON is not an object")
    rest = body[end:]
    if "{" in rest:
        try:
            decoder.raw_decode(rest, rest.find("{"))
        except json.JSONDecodeError:
            pass
        else:
            raise JudgeParseError("reply holds more than one JSON object; expected exactly one")
    return obj, base + start


_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_LABELLED = re.compile(
    rf"\b(?:score|rating|grade)\b\**\s*(?:is|of|=|:)\s*\**\s*({_NUMBER})(?:\s*(?:/|out of)\s*({_NUMBER}))?",
    re.IGNORECASE,
)
_JSON_SCORE = re.compile(rf'"score"\s*:\s*"?({_NUMBER})')


@dataclass(frozen=True)
class ParsedScore:
    """A score read from a reply: the raw value on the judge's scale, its normalisation
    ``(raw - lo) / (hi - lo)`` in [0, 1], the reasoning, and the character offset of the
    score's digits in the reply (used to find the score token for probability weighting)."""

    raw: float
    normalised: float
    reasoning: str
    offset: int | None
    fields: Mapping[str, Any] = field(default_factory=dict)


def _check_scale(value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise JudgeParseError(f"score {value:g} is outside the {lo:g}-{hi:g} scale")


def parse_scale_score(text: str, lo: float, hi: float) -> ParsedScore:
    """Read a score on the ``lo``-``hi`` scale from a judge reply.

    Order: a JSON object with a numeric ``score`` (and optional ``reasoning``); else a
    labelled form ``Score: 9``, ``Rating = 4/5``, ``score is 3 out of 5`` (the label is
    required: "In 2023 ..." holds no score). Several labelled scores that disagree, a
    denominator that differs from ``hi``, or a value outside [lo, hi] raise
    :class:`JudgeParseError`. Example: "Score: 9" on 0-10 -> raw 9, normalised 0.9.
    """
    if hi <= lo:
        raise ValueError(f"scale must have hi > lo, got {lo}-{hi}")
    obj = None
    if "{" in text:
        try:
            obj, offset = extract_json(text)
        except JudgeParseError:
            if not _LABELLED.search(text):
                raise
    if obj is not None:
        if "score" not in obj:
            raise JudgeParseError(f"reply JSON has no 'score' field (fields: {', '.join(map(str, obj))})")
        value = obj["score"]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise JudgeParseError(f"reply JSON 'score' is not a number: {value!r}")
        try:
            value = float(value)
        except ValueError:
            raise JudgeParseError(f"reply JSON 'score' is not a number: {value!r}") from None
        if not math.isfinite(value):
            raise JudgeParseError(f"reply JSON 'score' is not finite: {value!r}")
        _check_scale(value, lo, hi)
        where = None
        for m in _JSON_SCORE.finditer(text, offset):
            if float(m.group(1)) == value:
                where = m.start(1)
        reasoning = obj.get("reasoning", obj.get("explanation", ""))
        return ParsedScore(value, (value - lo) / (hi - lo), str(reasoning or ""), where, obj)
    matches = list(_LABELLED.finditer(text))
    if not matches:
        raise JudgeParseError("reply holds no labelled score (expected JSON {\"score\": N} or 'Score: N'); a bare number is not read as a score")
    values = {float(m.group(1)) for m in matches}
    if len(values) > 1:
        raise JudgeParseError(f"reply gives several different scores {sorted(values)}; ambiguous")
    m = matches[-1]
    value = float(m.group(1))
    if m.group(2) is not None and float(m.group(2)) != hi:
        raise JudgeParseError(f"reply scores out of {m.group(2)} but the scale is {lo:g}-{hi:g}")
    _check_scale(value, lo, hi)
    reasoning = text[: matches[0].start()].strip()
    return ParsedScore(value, (value - lo) / (hi - lo), reasoning, m.start(1))


def probability_weighted_score(
    logprobs: Sequence[TokenLogprob] | None, offset: int | None, text: str, lo: int, hi: int
) -> tuple[float | None, dict[str, float], str]:
    """G-Eval's score (Liu et al., 2023): ``sum_s s * p(s)`` over the scale's values, with
    ``p`` renormalised over the scale tokens found among the top log-probabilities at the
    score token's position.

    The score token is the generated token whose characters cover ``offset`` (the digits
    of the parsed score), not the first number in the reply. Alternatives whose text,
    stripped of whitespace, is a value of the integer scale ``lo..hi`` count; duplicates
    such as ``"4"`` and ``" 4"`` are summed. Returns ``(weighted_score | None,
    {value: probability}, how)``; ``None`` with the reason in ``how`` when the reply has no
    log-probabilities, the score token cannot be located, or the score spans several
    tokens.
    """
    if not logprobs:
        return None, {}, "none: the judge returned no log-probabilities"
    if offset is None:
        return None, {}, "none: the score's position in the reply is unknown"
    if all(t.start is not None for t in logprobs):
        starts = [int(t.start) for t in logprobs]  # type: ignore[arg-type]
    elif "".join(t.token for t in logprobs) == text:
        starts = [0]
        for t in logprobs[:-1]:
            starts.append(starts[-1] + len(t.token))
    else:
        return None, {}, "none: the log-probability tokens do not spell the reply"
    for tok, pos in zip(logprobs, starts):
        end = pos + len(tok.token)
        if pos <= offset < end:
            break
    else:
        return None, {}, "none: no token covers the score"
    digits = re.match(r"[-+]?\d+(?:\.\d+)?", text[offset:])
    assert digits is not None
    if end < offset + len(digits.group(0)) or tok.token.strip() != digits.group(0):
        return None, {}, f"none: the score {digits.group(0)!r} is not a single token (token {tok.token!r})"
    scale = {str(v): v for v in range(int(lo), int(hi) + 1)}
    mass: dict[int, float] = {}
    alternatives = list(tok.top)
    if tok.token not in {a for a, _ in alternatives}:
        alternatives.append((tok.token, tok.logprob))
    for alt, lp in alternatives:
        value = scale.get(alt.strip())
        if value is not None and math.isfinite(lp):
            mass[value] = mass.get(value, 0.0) + math.exp(lp)
    total = sum(mass.values())
    if total <= 0:
        return None, {}, "none: no scale value among the top log-probabilities"
    probs = {str(k): v / total for k, v in sorted(mass.items())}
    weighted = sum(k * v for k, v in mass.items()) / total
    return weighted, probs, f"probability-weighted over {len(mass)} scale values (mass {total:.3f})"


def require_list(obj: Mapping[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list; raises :class:`JudgeParseError` naming the key otherwise."""
    value = obj.get(key)
    if not isinstance(value, list):
        raise JudgeParseError(f"reply JSON has no list {key!r} (fields: {', '.join(map(str, obj))})")
    return value


# --------------------------------------------------------------------------- calls


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

    def complete(self, messages: list[dict[str, str]], sample_id: str | None, salt: str) -> tuple[JudgeReply, bool]:
        """One reply, from the cache when present. Returns ``(reply, was_cached)``."""
        key = cache_key(self.judge.identity, messages, self.decoding, salt)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit, True
        reply = self.judge.complete(messages, purpose=self.purpose, sample_id=sample_id, **self.decoding)
        with self._lock:
            self.calls += 1
        if self.cache is not None:
            self.cache.put(key, reply, {"judge": self.judge.identity, "purpose": self.purpose, "sample_id": sample_id})
        return reply, False

    def ask(self, messages: list[dict[str, str]], parse: Callable[[JudgeReply], Any], sample_id: str | None = None,
            salt: str = "") -> JudgeCall:
        """Send ``messages`` and return ``parse(reply)``; on :class:`JudgeParseError` ask
        again, up to ``max_attempts``; the last failure is re-raised with every raw reply."""
        import tenacity

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
