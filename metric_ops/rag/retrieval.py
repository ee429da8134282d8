"""Retrieval metrics over ranked document ids: hit rate, precision@k, recall@k, MRR,
average precision and nDCG, plus the trace reader shared with the RAG checks.

Inputs
------
Gold: ``sample.metadata["relevant"]``: ``{doc_id: grade}`` (grade > 0 is relevant; a
grade of 0 or less is judged non-relevant) or a list of ids (grade 1 each).

Retrieved: what the pipeline actually retrieved, in rank order, taken from the first of

1. the trace in the output: ``outputs[i]`` as JSON, either the trace itself
   (``{"retrieved": [...], ...}``) or ``{"trace": {...}, "answer": "..."}``;
2. ``sample.metadata["trace"]["retrieved"]``;
3. ``sample.metadata["retrieved"]`` (the dataset's own list).

A retrieved item is an id string or an object with ``id``/``doc_id``/``chunk_id``.

Conventions (trec_eval's, Voorhees & Harman 2005): the cut-off k counts ranks, so a list
shorter than k is padded with non-relevant items (precision@k divides by k); a duplicate
id earns credit only at its first rank (its later ranks count as non-relevant), so no
score exceeds 1; average precision divides by all relevant items, so a gold item never
retrieved lowers it; nDCG uses linear gains (the grade) with ``log2(rank + 1)``
discounts (Järvelin & Kekäläinen, 2002) and the ideal DCG from the gold grades sorted
high to low over ``min(|relevant|, k)`` ranks.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths

_ID_KEYS = ("id", "doc_id", "chunk_id", "document_id")
TRACE_KEYS: tuple[str, ...] = (
    "retrieved",
    "final_prompt",
    "prompt_ids",
    "answer",
    "citations",
    "abstained",
    "tool_calls",
)


def item_id(item: Any) -> str | None:
    """The id of a retrieved item: the string itself, or the ``id``/``doc_id``/
    ``chunk_id``/``document_id`` field of an object; None when there is none."""
    if isinstance(item, str):
        return item
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        return str(item)
    if isinstance(item, Mapping):
        for key in _ID_KEYS:
            if item.get(key) is not None:
                return str(item[key])
    return None


def extract_trace(sample: Sample, output: Any) -> tuple[dict[str, Any], str]:
    """``(trace, answer_text)`` for one sample.

    The trace merges ``sample.metadata["trace"]`` (the dataset's) with the one carried by
    the output, the output's keys winning. The output is read as JSON when it is a JSON
    object: ``{"trace": {...}, "answer": str}`` or a bare trace with any of
    :data:`TRACE_KEYS`; otherwise the whole output is the answer text. The answer is
    ``trace["answer"]`` when the output gave none.
    """
    trace: dict[str, Any] = {}
    meta_trace = sample.metadata.get("trace")
    if isinstance(meta_trace, str):
        try:
            meta_trace = json.loads(meta_trace)
        except ValueError:
            meta_trace = None
    if isinstance(meta_trace, Mapping):
        trace.update(meta_trace)
    answer = output if isinstance(output, str) else ""
    value: Any = output
    if isinstance(output, str):
        text = output.strip()
        value = None
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
    if isinstance(value, Mapping):
        if isinstance(value.get("trace"), Mapping):
            trace.update(value["trace"])
            answer = str(value.get("answer") or value.get("output") or value["trace"].get("answer") or "")
        elif any(k in value for k in TRACE_KEYS):
            trace.update(value)
            answer = str(value.get("answer") or value.get("output") or "")
    if not answer and isinstance(trace.get("answer"), str):
        answer = trace["answer"]
    return trace, answer


def retrieved_ids(sample: Sample, output: Any) -> tuple[list[str] | None, str]:
    """(ids in rank order, where they came from) or (None, reason) when no retrieved
    list exists; see the module docstring for the order of sources."""
    out_trace: dict[str, Any] = {}
    if isinstance(output, str) and output.strip().startswith("{"):
        try:
            value = json.loads(output)
        except ValueError:
            value = None
        if isinstance(value, Mapping):
            out_trace = dict(value["trace"]) if isinstance(value.get("trace"), Mapping) else dict(value)
    elif isinstance(output, Mapping):
        out_trace = dict(output)
    meta_trace = sample.metadata.get("trace") if isinstance(sample.metadata.get("trace"), Mapping) else {}
    for source, holder, key in (
        ("output trace", out_trace, "retrieved"),
        ("metadata.trace", meta_trace, "retrieved"),
        ("metadata.retrieved", sample.metadata, "retrieved"),
    ):
        raw = holder.get(key) if isinstance(holder, Mapping) else None
        if raw is None:
            continue
        if not isinstance(raw, (list, tuple)):
            raise ValueError(f"{source} must be a list of ids or objects with an id, got {type(raw).__name__}")
        ids = []
        for rank, item in enumerate(raw, start=1):
            doc = item_id(item)
            if doc is None:
                raise ValueError(f"{source}: item at rank {rank} has no id ({item!r})")
            ids.append(doc)
        return ids, source
    return None, "no retrieved list (output trace 'retrieved', metadata.trace.retrieved or metadata.retrieved)"


def relevance_grades(raw: Any) -> dict[str, float]:
    """``{doc_id: grade}`` from a mapping or a list of ids (grade 1). Raises
    ``ValueError`` for a non-numeric grade."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        grades = {}
        for key, grade in raw.items():
            if isinstance(grade, bool) or not isinstance(grade, (int, float)):
                raise ValueError(f"relevance grade of {key!r} must be a number, got {grade!r}")
            grades[str(key)] = float(grade)
        return grades
    if isinstance(raw, (list, tuple, set)):
        return {str(item_id(x) or x): 1.0 for x in raw}
    raise ValueError(f"metadata.relevant must be {{doc_id: grade}} or a list of ids, got {type(raw).__name__}")


def ranking_scores(retrieved: Sequence[str], grades: Mapping[str, float], k: int) -> dict[str, float]:
    """Hit rate, precision@k, recall@k, MRR, AP and nDCG of one ranked list.

    ``retrieved``: ids in rank order (duplicates allowed, credited once); ``grades``:
    gold ``{id: grade}`` with at least one grade > 0; ``k`` >= 1. Every value is in
    [0, 1]. Raises ``ValueError`` when k < 1 or nothing is relevant.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    relevant = {d: g for d, g in grades.items() if g > 0}
    if not relevant:
        raise ValueError("no relevant item (every grade <= 0)")
    seen: set[str] = set()
    hits = 0
    first_hit_rank = 0
    ap_sum = 0.0
    dcg = 0.0
    for rank, doc in enumerate(retrieved[:k], start=1):
        if doc in seen or doc not in relevant:
            seen.add(doc)
            continue
        seen.add(doc)
        hits += 1
        if not first_hit_rank:
            first_hit_rank = rank
        ap_sum += hits / rank
        dcg += relevant[doc] / math.log2(rank + 1)
    ideal = sorted(relevant.values(), reverse=True)[: min(len(relevant), k)]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return {
        "hit_rate": float(hits > 0),
        "precision_at_k": hits / k,
        "recall_at_k": hits / len(relevant),
        "mrr": 1.0 / first_hit_rank if first_hit_rank else 0.0,
        "average_precision": ap_sum / len(relevant),
        "ndcg": dcg / idcg,
    }


class RetrievalMetrics(Metric):
    """Retrieval quality at cut-off ``k`` (Manning et al., *Introduction to Information
    Retrieval*, ch. 8; trec_eval conventions; nDCG: Järvelin & Kekäläinen, 2002).

    Emits ``retrieval_hit_rate`` (1 when a relevant item is in the top k),
    ``retrieval_precision_at_k`` (distinct relevant in top k / k),
    ``retrieval_recall_at_k`` (distinct relevant in top k / all relevant),
    ``retrieval_mrr`` (1 / rank of the first relevant item within k, else 0),
    ``retrieval_average_precision`` (sum of precision@rank at each relevant rank within
    k, divided by all relevant items) and ``retrieval_ndcg`` (linear gains, ideal DCG
    over min(|relevant|, k) ranks), each in [0, 1]. The cut-off is in the signature.

    Inputs: see the module docstring. An empty retrieved list scores 0 everywhere;
    a sample without ``metadata.relevant`` (or with no grade > 0) or without any
    retrieved list is ``unscored``, the reason naming what is missing.
    """

    name = "retrieval"
    binary_scores = ("retrieval_hit_rate",)
    aliases = ("retrieval_metrics",)
    direction = Direction.MAXIMIZE
    score_directions = {
        "retrieval_hit_rate": Direction.MAXIMIZE,
        "retrieval_precision_at_k": Direction.MAXIMIZE,
        "retrieval_recall_at_k": Direction.MAXIMIZE,
        "retrieval_mrr": Direction.MAXIMIZE,
        "retrieval_average_precision": Direction.MAXIMIZE,
        "retrieval_ndcg": Direction.MAXIMIZE,
    }
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("metadata",)

    def __init__(self, k: int = 10) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        super().__init__(k=k)
        self.k = k

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [self.score_one(s, o) for s, o in zip(samples, outputs)]

    def score_one(self, sample: Sample, output: Any) -> dict[str, Score]:
        """The six scores for one sample."""
        grades = relevance_grades(sample.metadata.get("relevant"))
        if not any(g > 0 for g in grades.values()):
            reason = "sample has no metadata.relevant" if not grades else "metadata.relevant has no grade > 0"
            return {n: Score.unscored(reason) for n in self.score_directions}
        ids, source = retrieved_ids(sample, output)
        if ids is None:
            return {n: Score.unscored(source) for n in self.score_directions}
        values = ranking_scores(ids, grades, self.k)
        detail = {"k": self.k, "source": source, "retrieved": ids[: self.k], "n_relevant": sum(g > 0 for g in grades.values())}
        return {f"retrieval_{key}": Score(value, detail=detail) for key, value in values.items()}
