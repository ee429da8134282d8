"""RAG checks support: reading a sample's case and corpus, extracting stated numbers,
detecting abstentions (no Metric classes here).

Part of :mod:`metric_ops.rag` (the metrics are in :mod:`metric_ops.rag.checks`, whose
docstring describes the case and trace shapes).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
from typing import Any, Mapping, Sequence

from metric_ops.base import Sample, Score, check_lengths
from metric_ops.rag.retrieval import item_id


def _case(sample: Sample) -> dict[str, Any]:
    case = dict(sample.metadata)
    nested = sample.metadata.get("case")
    if isinstance(nested, Mapping):
        case.update(nested)
    return case


def parse_date(value: Any) -> _dt.date | None:
    """A date from ``date``/``datetime``/ISO string (``YYYY-MM-DD...``); None for None/"".
    Raises ``ValueError`` for an unreadable string."""
    if value is None or value == "":
        return None
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValueError(f"date {value!r} is not ISO YYYY-MM-DD") from None


def _ids(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, (str, Mapping)):
        raw = [raw]
    out = []
    for item in raw:
        doc = item_id(item)
        if doc is not None:
            out.append(doc)
    return out


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class _CorpusMixin:
    """Shared corpus handling: a snapshot from the metric parameter or the sample."""

    _corpus: Mapping[str, Any] | None = None

    def __init__(self, corpus: Mapping[str, Any] | None = None, **params: Any) -> None:
        digest = self._set_corpus(corpus)
        super().__init__(**params, **({"corpus_sha256": digest} if digest else {}))

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        """``score_one`` (all of the metric's scores for one sample) over the batch."""
        check_lengths(samples, outputs)
        return [self.score_one(s, o) for s, o in zip(samples, outputs)]

    def _set_corpus(self, corpus: Mapping[str, Any] | None) -> str | None:
        if corpus is None:
            return None
        if not isinstance(corpus, Mapping):
            raise ValueError(f"corpus must be a mapping doc_id -> document, got {type(corpus).__name__}")
        self._corpus = corpus
        canonical = json.dumps(corpus, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def corpus_for(self, sample: Sample) -> Mapping[str, Any] | None:
        """The sample's corpus snapshot (``metadata.corpus``), else the metric's."""
        corpus = sample.metadata.get("corpus")
        if isinstance(corpus, Mapping):
            return corpus
        return self._corpus


def _corpus_version(sample: Sample, corpus: Mapping[str, Any] | None) -> Any:
    return sample.metadata.get("corpus_version") or (corpus or {}).get("__version__")


def _doc(corpus: Mapping[str, Any] | None, doc_id: str) -> Mapping[str, Any] | None:
    doc = (corpus or {}).get(doc_id)
    return doc if isinstance(doc, Mapping) else None


def _context_order(trace: Mapping[str, Any]) -> list[str]:
    prompt_ids = _ids(trace.get("prompt_ids"))
    return prompt_ids if prompt_ids else _ids(trace.get("retrieved"))


# ---------------------------------------------------------------------------- numbers

_NUMBER = re.compile(
    r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:\s*(%|percent\b|per cent\b|thousand\b|million\b|billion\b|trillion\b|bn\b|k\b))?",
    re.IGNORECASE,
)
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "billion": 1e9, "bn": 1e9, "trillion": 1e12}
_MARKER = re.compile(r"\[([^\[\]\n]{1,128})\]")


def extract_numbers(text: str) -> list[dict[str, Any]]:
    """Numbers stated in ``text`` with their precision, in order, citation markers
    (``[3]``) excluded. Each: ``{"text", "value", "step", "alternatives"}`` where
    ``step`` is the unit of the last stated digit of a rounded number (``5.2 million``
    -> 1e5, ``3.14`` -> 0.01, ``5 million`` -> 1e6; 0 for a plain integer, which must
    match exactly) and
    ``alternatives`` the readings to compare (a percentage is read as 12.5 and 0.125;
    ``1,234`` is one thousands-grouped number; ``2024-05-01`` gives 2024, 05, 01).
    Linear time (one regex scan without nested quantifiers)."""
    text = _MARKER.sub(" ", text)
    out = []
    for m in _NUMBER.finditer(text):
        sign = -1.0 if m.group(1) else 1.0
        integer = m.group(2).replace(",", "")
        frac = m.group(3) or ""
        unit = (m.group(4) or "").lower()
        base = sign * float(integer + frac)
        step = 10.0 ** -(len(frac) - 1) if frac else (1.0 if unit in _SCALE else 0.0)
        alternatives = []
        if unit in ("%", "percent", "per cent"):
            alternatives = [(base, step), (base / 100, step / 100)]
        elif unit in _SCALE:
            alternatives = [(base * _SCALE[unit], step * _SCALE[unit]), (base, step)]
        else:
            alternatives = [(base, step)]
        out.append({"text": m.group(0), "value": alternatives[0][0], "step": alternatives[0][1], "alternatives": alternatives})
    return out


def number_matches(stated: Mapping[str, Any], expected: float, rel_tol: float = 0.0) -> bool:
    """Whether a stated number (from :func:`extract_numbers`) gives ``expected``: equal
    within ``rel_tol``, or equal to ``expected`` rounded to the stated precision
    (``3.14`` gives 3.14159; ``5.2 million`` gives 5,234,000; ``3`` does not give 3.14)."""
    for value, step in stated["alternatives"]:
        if math.isclose(value, expected, rel_tol=rel_tol, abs_tol=1e-12):
            return True
        if step > 0 and abs(value - expected) <= step / 2 + 1e-9 * max(1.0, abs(expected)):
            return True
    return False


def _to_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        found = extract_numbers(value)
        return found[0]["value"] if len(found) == 1 else None
    return None


# ---------------------------------------------------------------------------- abstention

ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know",
    "i do not know",
    "i'm not sure",
    "i am not sure",
    "i'm unsure",
    "i am unsure",
    "not certain",
    "i cannot answer",
    "i can't answer",
    "unable to answer",
    "cannot be answered",
    "can't be answered",
    "unanswerable",
    "cannot be determined",
    "can't be determined",
    "cannot determine",
    "can't determine",
    "impossible to determine",
    "impossible to know",
    "impossible to say",
    "not possible to know",
    "not possible to determine",
    "no way to know",
    "no one knows",
    "nobody knows",
    "is unknown",
    "are unknown",
    "remains unknown",
    "still unknown",
    "not known",
    "no definitive answer",
    "no definite answer",
    "no clear answer",
    "no single answer",
    "no one answer",
    "no correct answer",
    "no right answer",
    "there is no answer",
    "not enough information",
    "insufficient information",
    "not enough evidence",
    "insufficient evidence",
    "the documents do not",
    "the context does not",
    "cannot provide an answer",
    "can't provide an answer",
    "i cannot say",
    "i can't say",
    "it is unclear",
    "it's unclear",
    "unclear",
    "a matter of opinion",
    "subjective",
    "open question",
    "debated",
)


def detect_abstention(answer: str) -> tuple[bool, str | None]:
    """Whether an answer abstains, by the phrases in :data:`ABSTENTION_PHRASES`
    (case-insensitive, curly apostrophes folded; an empty answer abstains). Returns
    (abstained, the phrase found)."""
    text = " ".join(answer.lower().replace("\u2019", "'").split())
    if not text:
        return True, "empty answer"
    for phrase in ABSTENTION_PHRASES:
        if phrase in text:
            return True, phrase
    return False, None
