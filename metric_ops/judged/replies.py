"""Reading judge replies: JSON extraction, scale scores, G-Eval probability weighting.

What a judge answered (:class:`JudgeReply`, with per-token :class:`TokenLogprob`) and how it is
read. :mod:`metric_ops.judged.judging` (the judge contract and calls) builds on it. Honesty rules
(DESIGN.md, issue 4; issue 15 kind 5):

- a reply that cannot be parsed (prose with no JSON, truncated JSON, a missing field, a
  number outside the scale) raises :class:`JudgeParseError` carrying every raw reply;
- a free-text score is read only from a labelled form ("Score: 9", "rating = 4/5", or a
  JSON ``score`` field): a bare number such as a year is never a score;
- the reply is cleaned before a score is read (:func:`normalise_reply`: NFKC, zero-width
  and other format characters removed); the final verdict wins over scores mentioned in
  the reasoning, and verdicts that disagree are an error, never the first number seen.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from metric_ops.errors import FacetlakeError


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


class JudgeParseError(FacetlakeError, ValueError):
    """A judge reply could not be read; ``raw_replies`` holds every attempt's text."""

    def __init__(self, message: str, raw_replies: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.raw_replies = list(raw_replies)


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def extract_json(text: str) -> tuple[dict[str, Any], int]:
    """The one JSON object in a judge reply and its character offset in ``text``.

    The reply is cleaned first (:func:`normalise_reply`: NFKC, format characters such as
    zero-width spaces removed), so ``"verdict": "supported\u200b"`` or a fullwidth
    ``"winner": "１"`` read as their plain forms; the offset points into the raw ``text``.
    Accepted: a bare object, an object inside a complete Markdown fence, an object with
    prose before or after it. Raises :class:`JudgeParseError` for prose with no object, a
    truncated object (fenced or not), an unclosed fence, or several objects (ambiguous).
    """
    clean, where = normalise_reply(text)
    obj, at = _extract_json_clean(clean)
    return obj, (where[at] if at < len(where) else len(text))


def _extract_json_clean(text: str) -> tuple[dict[str, Any], int]:
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
_LABEL = r"(?P<final>(?<![^\W_])final\s+)?(?<![^\W_])(?:score|rating|grade|verdict)(?![^\W_])"
# a verdict fills in a form: "Score: 5", "Rating = 4/5", "**Score:** 4", "Rating - 3", "Score — 2"
_VERDICT_SEP = r"[*_]*\s*(?:[:=]|[–—]|(?<=\s)-(?=\s))\s*[*_]*\s*"
# a mention sits in a sentence: "a score of 2", "the score is 4"
_MENTION_SEP = r"[*_]*\s+(?:is|of|was|would\s+be)\s+[*_]*"
_TAIL = rf"(?P<value>{_NUMBER})(?:\s*(?:/|out\s+of)\s*(?P<out_of>{_NUMBER}))?"
_VERDICT = re.compile(rf"{_LABEL}{_VERDICT_SEP}{_TAIL}", re.IGNORECASE)
_MENTION = re.compile(rf"{_LABEL}{_MENTION_SEP}{_TAIL}", re.IGNORECASE)
_LABELLED = re.compile(rf"{_LABEL}(?:{_VERDICT_SEP}|{_MENTION_SEP}){_TAIL}", re.IGNORECASE)
_JSON_SCORE = re.compile(rf'"score"\s*:\s*"?({_NUMBER})')


def normalise_reply(text: str) -> tuple[str, list[int]]:
    """A judge reply cleaned for reading a score, and where each of its characters came from.

    Each character is NFKC-normalised (fullwidth digits and colons become ASCII, ``²``
    becomes ``2``, ligatures are split) and format characters (Unicode category ``Cf``:
    zero-width space/joiners, word joiner, BOM, soft hyphen, bidi marks) are removed. The
    returned list maps every index of the cleaned text to the index of the raw character
    it came from, so offsets found in the cleaned text point into the raw reply (for
    log-probability lookup). Per-character NFKC is used so the map is exact; it differs
    from whole-string NFKC only in composing combining sequences, which no score uses.
    """
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cf":
            continue
        norm = unicodedata.normalize("NFKC", ch) if ord(ch) > 127 else ch
        for c in norm:
            if unicodedata.category(c) == "Cf":
                continue
            out.append(c)
            where.append(i)
    return "".join(out), where


@dataclass(frozen=True)
class ParsedScore:
    """A score read from a reply: the raw value on the judge's scale, its normalisation
    ``(raw - lo) / (hi - lo)`` in [0, 1], the reasoning, and the character offset of the
    score's digits in the (raw) reply (used to find the score token for probability
    weighting)."""

    raw: float
    normalised: float
    reasoning: str
    offset: int | None
    fields: Mapping[str, Any] = field(default_factory=dict)


def _check_scale(value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise JudgeParseError(f"score {value:g} is outside the {lo:g}-{hi:g} scale")


def _final_verdict(text: str) -> re.Match[str] | None:
    """The reply's final verdict among its labelled scores (see :func:`parse_scale_score`);
    None when it has none; raises :class:`JudgeParseError` when the deciding ones disagree."""
    verdicts = list(_VERDICT.finditer(text))
    tiers = (
        ("final verdicts", [m for m in verdicts if m.group("final")]),
        ("verdicts", verdicts),
        ("labelled scores", list(_MENTION.finditer(text))),
    )
    for what, found in tiers:
        if not found:
            continue
        values = sorted({float(m.group("value")) for m in found})
        if len(values) > 1:
            shown = ", ".join(f"{m.group(0).strip()!r}" for m in found[:4])
            raise JudgeParseError(f"reply gives several different scores {values} as {what} ({shown}); ambiguous")
        return found[-1]
    return None


def parse_scale_score(text: str, lo: float, hi: float) -> ParsedScore:
    """Read a score on the ``lo``-``hi`` scale from a judge reply.

    The reply is cleaned first (:func:`normalise_reply`: NFKC, zero-width and other
    format characters removed), so "Score:\u200b 5" and "Ｓｃｏｒｅ：５" read as "Score: 5".
    Then, in order: a JSON object with a numeric ``score`` (and optional ``reasoning``);
    else the final verdict among the labelled scores (a label score/rating/grade/verdict
    is required: "In 2023 ..." holds no score):

    1. verdicts labelled final ("Final score: 4"), if any;
    2. else verdicts, a label filled in like a form: ``Score: 9``, ``**Rating:** 4/5``,
       ``Rating = 4``, ``Rating - 3``, ``Score — 2``;
    3. else mentions in a sentence: ``the score is 3 out of 5``, ``a score of 2``.

    A mention in the reasoning ("At first a score of 2 looked fair ... Score: 5") never
    outvotes a verdict. Several deciding scores that disagree (two different ``Score:``
    lines), a denominator that differs from ``hi``, or a value outside [lo, hi] raise
    :class:`JudgeParseError` -- never the first number seen. Example: "Score: 9" on
    0-10 -> raw 9, normalised 0.9. ``offset`` points into the raw ``text``.
    """
    if hi <= lo:
        raise ValueError(f"scale must have hi > lo, got {lo}-{hi}")
    clean, where = normalise_reply(text)

    def raw_offset(i: int | None) -> int | None:
        return None if i is None else where[i]

    obj = None
    if "{" in clean:
        try:
            obj, offset = extract_json(clean)
        except JudgeParseError:
            if not _LABELLED.search(clean):
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
        at = None
        for m in _JSON_SCORE.finditer(clean, offset):
            if float(m.group(1)) == value:
                at = m.start(1)
        reasoning = obj.get("reasoning", obj.get("explanation", ""))
        return ParsedScore(value, (value - lo) / (hi - lo), str(reasoning or ""), raw_offset(at), obj)
    m = _final_verdict(clean)
    if m is None:
        raise JudgeParseError("reply holds no labelled score (expected JSON {\"score\": N} or 'Score: N'); a bare number is not read as a score")
    value = float(m.group("value"))
    if m.group("out_of") is not None and float(m.group("out_of")) != hi:
        raise JudgeParseError(f"reply scores out of {m.group('out_of')} but the scale is {lo:g}-{hi:g}")
    _check_scale(value, lo, hi)
    first = _LABELLED.search(clean)
    reasoning = clean[: first.start() if first else m.start()].strip()
    return ParsedScore(value, (value - lo) / (hi - lo), reasoning, raw_offset(m.start("value")))


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
