"""Deterministic RAG evidence checks: evidence-set recall, context retention, freshness,
access control, citations, numeric accuracy and abstention.

No model and no judge: every check is a set or number comparison over a versioned
corpus snapshot, a case and the pipeline's trace, so the same inputs always give the
same score. Each check returns a score or ``unscored`` naming the missing input.

Inputs
------
Corpus snapshot: ``sample.metadata["corpus"]`` or the metric's ``corpus`` parameter
(its SHA-256 enters the signature), ``{doc_id: {"text": str, "valid_from": date,
"valid_to": date | None, "tenants": [tenant, ...] | "tenant": str | "acl": [...],
"public": bool, "version": str}}``; ``sample.metadata["corpus_version"]`` (or
``corpus["__version__"]``) is recorded in ``detail``. Dates are ISO ``YYYY-MM-DD``.

Case: ``sample.metadata["case"]`` (or the same keys directly in ``sample.metadata``):
``evidence_sets`` (list of sufficient evidence sets, each a list of doc ids: the answer
is supported when any one set is fully available), ``citations`` (gold supporting ids),
``tenant``, ``decision_date``, ``answerable`` (bool), ``expected_numbers`` (list).

Trace: :func:`metric_ops.retrieval.extract_trace` (the output as JSON, else
``sample.metadata["trace"]``): ``retrieved`` (ids in rank order), ``prompt_ids`` (ids of
the documents placed in the final prompt) and/or ``final_prompt`` (its text),
``citations`` (ids the answer cites), ``abstained`` (bool), ``answer`` (text). When the
trace has no ``citations``, bracketed markers in the answer are read: ``[doc-7]`` names an
id, ``[2]`` the second document of the final prompt (or of the retrieved list).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.retrieval import extract_trace, item_id

# ============================================================================ helpers


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


# ============================================================================ metrics


class EvidenceChecks(_CorpusMixin, Metric):
    """Evidence retrieval, retention, freshness and access control of one RAG trace.

    Scores (inputs in the module docstring; retrieved ids counted once each):

    - ``evidence_set_recall``: best over the sufficient evidence sets of the share of the
      set that was retrieved (1.0 exactly when some set is complete). Needs
      ``evidence_sets`` and ``trace.retrieved``.
    - ``context_retention``: of the gold evidence that was retrieved (ids in any
      evidence set), the share that reached the final prompt: listed in
      ``trace.prompt_ids``, else its id or its full corpus text found in
      ``trace.final_prompt``. Unscored without prompt information or when no gold
      evidence was retrieved.
    - ``stale_hit_rate`` (minimise): share of retrieved documents not valid on the
      ``decision_date`` (``valid_from`` after it, or ``valid_to`` on or before it); a
      document missing from the corpus counts as stale (it cannot be shown fresh).
    - ``unauthorised_hit_rate`` (minimise): share of retrieved documents the case's
      ``tenant`` may not read. Fails closed: a document missing from the corpus, or with
      no ``tenants``/``tenant``/``acl`` and not ``public: true``, is unauthorised; ``"*"``
      in the ACL admits every tenant.

    An empty retrieved list makes evidence_set_recall 0 and the two rates unscored
    (nothing was retrieved to be stale or unauthorised).
    """

    name = "rag_evidence"
    aliases = ("evidence_checks",)
    direction = Direction.MAXIMIZE
    score_directions = {
        "evidence_set_recall": Direction.MAXIMIZE,
        "context_retention": Direction.MAXIMIZE,
        "stale_hit_rate": Direction.MINIMIZE,
        "unauthorised_hit_rate": Direction.MINIMIZE,
    }
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("metadata",)

    def score_one(self, sample: Sample, output: Any) -> dict[str, Score]:
        """The four scores for one sample."""
        case = _case(sample)
        trace, _ = extract_trace(sample, output)
        corpus = self.corpus_for(sample)
        has_retrieved = trace.get("retrieved") is not None
        retrieved = _unique(_ids(trace.get("retrieved")))
        version = {"corpus_version": _corpus_version(sample, corpus)}
        out: dict[str, Score] = {}

        # evidence-set recall
        sets = [_unique(_ids(s)) for s in case.get("evidence_sets") or []]
        sets = [s for s in sets if s]
        gold_union = {d for s in sets for d in s}
        if not sets:
            out["evidence_set_recall"] = Score.unscored("case has no evidence_sets")
        elif not has_retrieved:
            out["evidence_set_recall"] = Score.unscored("trace has no retrieved list")
        else:
            got = set(retrieved)
            shares = [sum(d in got for d in s) / len(s) for s in sets]
            best = max(range(len(sets)), key=lambda i: (shares[i], -i))
            out["evidence_set_recall"] = Score(
                shares[best],
                detail={"best_set": best, "missing": [d for d in sets[best] if d not in got], "sufficient": shares[best] == 1.0},
            )

        # context retention
        prompt_ids = _ids(trace.get("prompt_ids")) if trace.get("prompt_ids") is not None else None
        final_prompt = trace.get("final_prompt") if isinstance(trace.get("final_prompt"), str) else None
        kept_gold = [d for d in retrieved if d in gold_union]
        if not sets:
            out["context_retention"] = Score.unscored("case has no evidence_sets")
        elif prompt_ids is None and final_prompt is None:
            out["context_retention"] = Score.unscored("trace has no final_prompt or prompt_ids")
        elif not kept_gold:
            out["context_retention"] = Score.unscored("no gold evidence was retrieved; nothing to retain")
        else:

            def in_prompt(doc_id: str) -> bool:
                if prompt_ids is not None:
                    return doc_id in prompt_ids
                text = (_doc(corpus, doc_id) or {}).get("text")
                return doc_id in final_prompt or (isinstance(text, str) and bool(text.strip()) and text.strip() in final_prompt)  # type: ignore[operator]

            dropped = [d for d in kept_gold if not in_prompt(d)]
            out["context_retention"] = Score(1 - len(dropped) / len(kept_gold), detail={"dropped": dropped, "retained_of": kept_gold})

        # freshness
        date = parse_date(case.get("decision_date"))
        if date is None:
            out["stale_hit_rate"] = Score.unscored("case has no decision_date")
        elif corpus is None:
            out["stale_hit_rate"] = Score.unscored("no corpus snapshot (metadata.corpus or the corpus parameter)")
        elif not retrieved:
            out["stale_hit_rate"] = Score.unscored("trace has no retrieved documents")
        else:
            stale = {}
            for d in retrieved:
                doc = _doc(corpus, d)
                if doc is None:
                    stale[d] = "not in corpus"
                    continue
                start, end = parse_date(doc.get("valid_from")), parse_date(doc.get("valid_to"))
                if start is not None and start > date:
                    stale[d] = f"valid from {start.isoformat()}"
                elif end is not None and end <= date:
                    stale[d] = f"superseded on {end.isoformat()}"
            out["stale_hit_rate"] = Score(len(stale) / len(retrieved), detail={"stale": stale, "decision_date": date.isoformat(), **version})

        # access control
        tenant = case.get("tenant")
        if tenant in (None, ""):
            out["unauthorised_hit_rate"] = Score.unscored("case has no tenant")
        elif corpus is None:
            out["unauthorised_hit_rate"] = Score.unscored("no corpus snapshot (metadata.corpus or the corpus parameter)")
        elif not retrieved:
            out["unauthorised_hit_rate"] = Score.unscored("trace has no retrieved documents")
        else:
            denied = {}
            for d in retrieved:
                doc = _doc(corpus, d)
                if doc is None:
                    denied[d] = "not in corpus (fails closed)"
                    continue
                acl = doc.get("tenants", doc.get("acl", doc.get("tenant")))
                acl = [acl] if isinstance(acl, str) else list(acl or [])
                if doc.get("public") is True or "*" in acl or tenant in acl:
                    continue
                denied[d] = "no ACL (fails closed)" if not acl else f"tenants {acl}"
            out["unauthorised_hit_rate"] = Score(len(denied) / len(retrieved), detail={"unauthorised": denied, "tenant": tenant, **version})
        return out


def cited_ids(trace: Mapping[str, Any], answer: str) -> tuple[list[str], str]:
    """(distinct cited ids in order, source): ``trace.citations`` when present, else the
    answer's bracketed markers (``[doc-7]`` an id, ``[2]`` the 2nd document of the final
    prompt, else of the retrieved list; ``[a, b]`` two citations)."""
    if trace.get("citations") is not None:
        return _unique(_ids(trace.get("citations"))), "trace.citations"
    order = _context_order(trace)
    found = []
    for m in _MARKER.finditer(answer):
        for part in re.split(r"[,;]", m.group(1)):
            token = part.strip()
            if not token:
                continue
            if token.isdigit() and order:
                n = int(token)
                if 1 <= n <= len(order):
                    found.append(order[n - 1])
                continue
            found.append(token)
    return _unique(found), "answer markers"


def _sentences_with_markers(answer: str) -> list[tuple[str, list[str]]]:
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", answer):
        markers = [p.strip() for m in _MARKER.finditer(sentence) for p in re.split(r"[,;]", m.group(1)) if p.strip()]
        if markers:
            out.append((sentence, markers))
    return out


class CitationChecks(_CorpusMixin, Metric):
    """Citation support, precision and recall of one RAG answer (deterministic; in the
    spirit of ALCE's citation precision/recall, Gao et al., 2023, without an NLI model).

    - ``citation_support``: share of cited documents that support the answer: the
      document is in the corpus, was in the model's context (``trace.prompt_ids``, else
      ``trace.retrieved``, when the trace lists either) and its text contains every
      number stated in the sentences that cite it. Unscored when the answer cites
      nothing or there is no corpus.
    - ``citation_precision``: cited ids that are gold (``case.citations``) / cited ids;
      unscored when nothing is cited or the case lists no gold citations.
    - ``citation_recall``: gold citations cited / gold citations (0 when nothing is
      cited); unscored when the case lists none.
    """

    name = "rag_citations"
    aliases = ("citation_checks",)
    direction = Direction.MAXIMIZE
    score_directions = {
        "citation_support": Direction.MAXIMIZE,
        "citation_precision": Direction.MAXIMIZE,
        "citation_recall": Direction.MAXIMIZE,
    }
    dimension = "factual"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def score_one(self, sample: Sample, output: Any) -> dict[str, Score]:
        """The three scores for one sample."""
        case = _case(sample)
        trace, answer = extract_trace(sample, output)
        corpus = self.corpus_for(sample)
        cited, source = cited_ids(trace, answer)
        gold = _unique(_ids(case.get("citations"))) if case.get("citations") is not None else None
        out: dict[str, Score] = {}
        base = {"cited": cited, "source": source}

        if not cited:
            out["citation_support"] = Score.unscored("answer cites nothing", **base)
        elif corpus is None:
            out["citation_support"] = Score.unscored("no corpus snapshot (metadata.corpus or the corpus parameter)", **base)
        else:
            context = set(_context_order(trace)) if (trace.get("prompt_ids") is not None or trace.get("retrieved") is not None) else None
            order = _context_order(trace)
            numbers_by_doc: dict[str, list[dict[str, Any]]] = {}
            for sentence, markers in _sentences_with_markers(answer):
                nums = extract_numbers(sentence)
                for token in markers:
                    doc_id = order[int(token) - 1] if token.isdigit() and order and 1 <= int(token) <= len(order) else token
                    numbers_by_doc.setdefault(doc_id, []).extend(nums)
            unsupported = {}
            for d in cited:
                doc = _doc(corpus, d)
                if doc is None:
                    unsupported[d] = "not in corpus"
                    continue
                if context is not None and d not in context:
                    unsupported[d] = "not in the model's context"
                    continue
                text_numbers = [n["value"] for n in extract_numbers(str(doc.get("text") or ""))]
                missing = [
                    n["text"] for n in numbers_by_doc.get(d, []) if not any(number_matches(n, v) for v in text_numbers)
                ]
                if missing:
                    unsupported[d] = f"numbers not in the document: {missing}"
            out["citation_support"] = Score(1 - len(unsupported) / len(cited), detail={"unsupported": unsupported, **base})

        if gold is None or not gold:
            reason = "case has no citations (gold supporting ids)"
            out["citation_precision"] = Score.unscored(reason, **base)
            out["citation_recall"] = Score.unscored(reason, **base)
        else:
            hit = [d for d in cited if d in gold]
            out["citation_precision"] = (
                Score(len(hit) / len(cited), detail={"gold": gold, **base}) if cited else Score.unscored("answer cites nothing", **base)
            )
            out["citation_recall"] = Score(len(hit) / len(gold), detail={"gold": gold, "missed": [d for d in gold if d not in hit], **base})
        return out


class NumericAccuracy(_CorpusMixin, Metric):
    """Accuracy of the numbers an answer states (deterministic).

    A stated number (:func:`extract_numbers`; citation markers and unit words handled)
    is correct when it gives one of ``case.expected_numbers`` (:func:`number_matches`:
    within ``rel_tol`` or equal at the stated precision). Without expected numbers it is
    correct when it appears in the evidence the model saw (texts of the documents in
    ``trace.prompt_ids``/``trace.retrieved`` from the corpus, or ``trace.final_prompt``).
    Score in [0, 1]: correct / stated. An answer that states no number scores 0 when
    numbers were expected, and is unscored otherwise; unscored too when there is
    neither an expected number nor any evidence text to check against.
    ``detail.expected_found`` gives the share of expected numbers the answer states.
    """

    name = "numeric_accuracy"
    direction = Direction.MAXIMIZE
    dimension = "factual"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def __init__(self, rel_tol: float = 0.0, corpus: Mapping[str, Any] | None = None) -> None:
        if not (isinstance(rel_tol, (int, float)) and 0 <= rel_tol < 1):
            raise ValueError(f"rel_tol must be in [0, 1), got {rel_tol!r}")
        super().__init__(corpus=corpus, rel_tol=rel_tol)
        self.rel_tol = float(rel_tol)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [{self.name: self.score_one(s, o)} for s, o in zip(samples, outputs)]

    def score_one(self, sample: Sample, output: Any) -> Score:
        """The score for one sample."""
        case = _case(sample)
        trace, answer = extract_trace(sample, output)
        raw_expected = case.get("expected_numbers")
        expected = None
        if raw_expected is not None:
            values = [_to_number(v) for v in (raw_expected if isinstance(raw_expected, list) else [raw_expected])]
            if any(v is None for v in values):
                raise ValueError(f"expected_numbers must be numbers, got {raw_expected!r}")
            expected = [float(v) for v in values if v is not None]
        stated = extract_numbers(answer)
        detail: dict[str, Any] = {"stated": [n["text"] for n in stated]}
        if expected:
            found = [e for e in expected if any(number_matches(n, e, self.rel_tol) for n in stated)]
            detail["expected_found"] = len(found) / len(expected)
            if not stated:
                return Score(0.0, detail={**detail, "reason": "answer states none of the expected numbers"})
            wrong = [n["text"] for n in stated if not any(number_matches(n, e, self.rel_tol) for e in expected)]
            return Score(1 - len(wrong) / len(stated), detail={**detail, "wrong": wrong, "against": "expected_numbers"})
        evidence = self._evidence_numbers(sample, trace)
        if evidence is None:
            return Score.unscored("no expected_numbers and no evidence text (corpus or trace.final_prompt) to check numbers against")
        if not stated:
            return Score.unscored("answer states no number and none was expected", **detail)
        wrong = [n["text"] for n in stated if not any(number_matches(n, e, self.rel_tol) for e in evidence)]
        return Score(1 - len(wrong) / len(stated), detail={**detail, "wrong": wrong, "against": "evidence"})

    def _evidence_numbers(self, sample: Sample, trace: Mapping[str, Any]) -> list[float] | None:
        texts = []
        corpus = self.corpus_for(sample)
        for d in _context_order(trace):
            doc = _doc(corpus, d)
            if doc is not None and doc.get("text"):
                texts.append(str(doc["text"]))
        if isinstance(trace.get("final_prompt"), str):
            texts.append(trace["final_prompt"])
        if not texts:
            return None
        return [alt[0] for t in texts for n in extract_numbers(t) for alt in n["alternatives"]]


class AbstentionAccuracy(Metric):
    """Abstention exactly when the question is unanswerable (SelfAware, Yin et al., 2023:
    recognising unanswerable questions).

    Answerability: ``case.answerable`` or ``sample.metadata["answerable"]`` (the
    SelfAware loader sets it). Abstained: ``trace.abstained`` when the trace says so,
    else :func:`detect_abstention` on the answer (a fixed phrase list; SelfAware's own
    evaluation uses sentence similarity to reference uncertain phrasings instead).
    Score 1.0 for a correct abstention or a correct attempt to answer, 0.0 for an
    over-abstention (answerable, abstained) or an under-abstention (unanswerable,
    answered); ``detail.outcome`` names which. Unscored without answerability.
    Whether the answer itself is right is left to the answer metrics.
    """

    name = "abstention_accuracy"
    binary = True
    aliases = ("abstention",)
    direction = Direction.MAXIMIZE
    dimension = "epistemic"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [{self.name: self.score_one(s, o)} for s, o in zip(samples, outputs)]

    def score_one(self, sample: Sample, output: Any) -> Score:
        """The score for one sample."""
        case = _case(sample)
        answerable = case.get("answerable")
        if not isinstance(answerable, bool):
            return Score.unscored("case has no answerable flag (metadata.answerable)")
        trace, answer = extract_trace(sample, output)
        if isinstance(trace.get("abstained"), bool):
            abstained, why = trace["abstained"], "trace.abstained"
        else:
            abstained, why = detect_abstention(answer)
        outcome = {
            (False, True): "correct_abstention",
            (True, False): "answered",
            (True, True): "over_abstention",
            (False, False): "under_abstention",
        }[(answerable, abstained)]
        return Score(float(abstained != answerable), detail={"abstained": abstained, "answerable": answerable, "evidence": why, "outcome": outcome})
