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

Trace: :func:`metric_ops.rag.retrieval.extract_trace` (the output as JSON, else
``sample.metadata["trace"]``): ``retrieved`` (ids in rank order), ``prompt_ids`` (ids of
the documents placed in the final prompt) and/or ``final_prompt`` (its text),
``citations`` (ids the answer cites), ``abstained`` (bool), ``answer`` (text). When the
trace has no ``citations``, bracketed markers in the answer are read: ``[doc-7]`` names an
id, ``[2]`` the second document of the final prompt (or of the retrieved list).

The case/corpus helpers, number extraction and abstention detection live in
:mod:`metric_ops.rag.support`; the metrics are defined here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.rag.retrieval import extract_trace
from metric_ops.rag.support import (
    _CorpusMixin,
    _MARKER,
    _case,
    _context_order,
    _corpus_version,
    _doc,
    _ids,
    _to_number,
    _unique,
    detect_abstention,
    extract_numbers,
    number_matches,
    parse_date,
)


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
