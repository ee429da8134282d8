"""Retrieval-augmented generation checks without a judge: evidence and citation checks,
numeric accuracy, abstention (:mod:`~metric_ops.rag.checks`, helpers in
:mod:`~metric_ops.rag.support`) and retrieval ranking metrics (:mod:`~metric_ops.rag.retrieval`).
"""

from metric_ops.rag.checks import EvidenceChecks, cited_ids, CitationChecks, NumericAccuracy, AbstentionAccuracy
from metric_ops.rag.support import parse_date, extract_numbers, number_matches, ABSTENTION_PHRASES, detect_abstention
from metric_ops.rag.retrieval import (
    TRACE_KEYS,
    item_id,
    extract_trace,
    retrieved_ids,
    relevance_grades,
    ranking_scores,
    RetrievalMetrics,
)

__all__ = [
    "EvidenceChecks",
    "cited_ids",
    "CitationChecks",
    "NumericAccuracy",
    "AbstentionAccuracy",
    "parse_date",
    "extract_numbers",
    "number_matches",
    "ABSTENTION_PHRASES",
    "detect_abstention",
    "TRACE_KEYS",
    "item_id",
    "extract_trace",
    "retrieved_ids",
    "relevance_grades",
    "ranking_scores",
    "RetrievalMetrics",
]
