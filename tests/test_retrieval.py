"""Known-answer tests for RetrievalMetrics (metric_ops.rag.retrieval)."""

from __future__ import annotations

import json
import math

import pytest

from metric_ops.base import Sample
from metric_ops.registry import get_metric
from metric_ops.rag.retrieval import RetrievalMetrics, extract_trace, ranking_scores, retrieved_ids


def run(k, relevant, retrieved=None, output="", trace=None):
    md = {}
    if relevant is not None:
        md["relevant"] = relevant
    if retrieved is not None:
        md["retrieved"] = retrieved
    if trace is not None:
        md["trace"] = trace
    scores = RetrievalMetrics(k=k).score_batch([Sample("s", "q", metadata=md)], [output])[0]
    return {name.removeprefix("retrieval_"): s for name, s in scores.items()}


def vals(scores):
    return {k: s.value for k, s in scores.items()}


def test_binary_relevance_known_values():
    got = vals(run(3, {"d1": 1, "d3": 1, "d5": 1}, ["d1", "d2", "d3", "d4"]))
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got == pytest.approx(
        {
            "hit_rate": 1.0,
            "precision_at_k": 2 / 3,
            "recall_at_k": 2 / 3,
            "mrr": 1.0,
            "average_precision": (1 / 1 + 2 / 3) / 3,  # the missed d5 lowers it
            "ndcg": (1 + 1 / math.log2(4)) / idcg,
        }
    )


def test_duplicates_never_push_a_score_above_one():
    got = vals(run(3, {"d1": 1}, ["d1", "d1", "d1"]))
    assert got == pytest.approx(
        {"hit_rate": 1.0, "precision_at_k": 1 / 3, "recall_at_k": 1.0, "mrr": 1.0, "average_precision": 1.0, "ndcg": 1.0}
    )
    got2 = vals(run(4, {"a": 2, "b": 1}, ["a", "a", "b", "b"]))
    assert all(0.0 <= v <= 1.0 for v in got2.values())
    assert got2["precision_at_k"] == 0.5 and got2["recall_at_k"] == 1.0
    assert got2["ndcg"] == pytest.approx((2 + 1 / math.log2(4)) / (2 + 1 / math.log2(3)))


def test_k_larger_than_the_list():
    got = vals(run(10, {"d1": 1, "d9": 1}, ["d2", "d1"]))
    assert got == pytest.approx(
        {
            "hit_rate": 1.0,
            "precision_at_k": 1 / 10,  # trec_eval: divides by k
            "recall_at_k": 1 / 2,
            "mrr": 1 / 2,
            "average_precision": (1 / 2) / 2,
            "ndcg": (1 / math.log2(3)) / (1 + 1 / math.log2(3)),  # ideal over min(|relevant|, k) = 2 ranks
        }
    )


def test_graded_ndcg_and_cutoff():
    got = vals(run(2, {"a": 3, "b": 1, "c": 2}, ["b", "a", "c"]))
    dcg = 1 + 3 / math.log2(3)
    idcg = 3 + 2 / math.log2(3)
    assert got["ndcg"] == pytest.approx(dcg / idcg)
    assert got["recall_at_k"] == pytest.approx(2 / 3)  # c is past the cut-off
    # grade 0 is judged non-relevant
    assert vals(run(2, {"a": 0, "b": 1}, ["a", "b"]))["mrr"] == 0.5


def test_empty_lists_and_missing_inputs():
    assert vals(run(5, {"d1": 1}, [])) == {k: 0.0 for k in vals(run(5, {"d1": 1}, []))}
    no_gold = run(5, None, ["d1"])
    assert all(s.status == "unscored" and "metadata.relevant" in s.detail["reason"] for s in no_gold.values())
    zero_gold = run(5, {"d1": 0}, ["d1"])
    assert all(s.status == "unscored" for s in zero_gold.values())
    no_list = run(5, {"d1": 1})
    assert all(s.status == "unscored" and "retrieved" in s.detail["reason"] for s in no_list.values())
    assert vals(run(5, [], ["d1"])) == {k: None for k in no_gold}


def test_scored_items_come_from_the_trace_first():
    output = json.dumps({"trace": {"retrieved": [{"doc_id": "d2"}, {"id": "d1"}]}, "answer": "x"})
    got = run(1, {"d1": 1}, ["d1"], output=output, trace={"retrieved": ["d1"]})
    assert got["hit_rate"].value == 0.0 and got["hit_rate"].detail["source"] == "output trace"
    got2 = run(1, {"d1": 1}, ["d2"], trace={"retrieved": ["d1"]})
    assert got2["hit_rate"].value == 1.0 and got2["hit_rate"].detail["source"] == "metadata.trace"
    got3 = run(1, {"d1": 1}, ["d1"], output="plain answer")
    assert got3["hit_rate"].detail["source"] == "metadata.retrieved"


def test_trace_reader_and_errors():
    s = Sample("s", "q", metadata={"trace": {"retrieved": ["a"], "answer": "old"}})
    trace, answer = extract_trace(s, json.dumps({"retrieved": ["b"], "answer": "new"}))
    assert trace["retrieved"] == ["b"] and answer == "new"
    assert extract_trace(s, "free text") == ({"retrieved": ["a"], "answer": "old"}, "free text")
    with pytest.raises(ValueError):
        retrieved_ids(Sample("s", "q", metadata={"retrieved": "d1"}), "")
    with pytest.raises(ValueError):
        RetrievalMetrics(k=0)
    with pytest.raises(ValueError):
        ranking_scores(["a"], {"a": 1}, 0)
    assert "k:5" in RetrievalMetrics(k=5).signature()
    assert isinstance(get_metric("retrieval_ndcg", k=3), RetrievalMetrics)
