"""Known-answer tests for the deterministic RAG evidence checks (metric_ops.rag.checks)."""

from __future__ import annotations

import json

import pytest

from metric_ops.base import Sample
from metric_ops.rag.checks import AbstentionAccuracy, CitationChecks, EvidenceChecks, NumericAccuracy
from metric_ops.rag.support import detect_abstention, extract_numbers, number_matches
from resources.datasets import SelfAwareDataset

CORPUS = {
    "d1": {"text": "Q3 revenue was 5.2 million dollars.", "valid_from": "2024-01-01", "tenants": ["acme"]},
    "d2": {"text": "Headcount is 120.", "valid_from": "2023-01-01", "valid_to": "2024-06-01", "tenants": ["acme"]},
    "d3": {"text": "Globex margin was 31%.", "tenants": ["globex"]},
    "d4": {"text": "Forecast for 2025.", "valid_from": "2025-01-01", "public": True},
    "d5": {"text": "An orphan page."},
}
CASE = {
    "evidence_sets": [["d1", "d2"], ["d6"]],
    "citations": ["d1"],
    "tenant": "acme",
    "decision_date": "2024-07-01",
    "expected_numbers": [5200000],
}
ANSWER = "Q3 revenue was 5.2 million [1]. Headcount is 120 [d2]."
TRACE = {"retrieved": ["d1", "d3", "d2", "d1", "d9"], "prompt_ids": ["d1", "d3"], "answer": ANSWER}


def sample(case=CASE, corpus=CORPUS, trace=None, **extra):
    md = {"case": case, "corpus_version": "2024-07-01T00:00Z", **extra}
    if corpus is not None:
        md["corpus"] = corpus
    if trace is not None:
        md["trace"] = trace
    return Sample("c1", "What were Q3 revenue and headcount?", metadata=md)


def test_evidence_checks_known_values():
    s = EvidenceChecks().score_batch([sample()], [json.dumps(TRACE)])[0]
    assert s["evidence_set_recall"].value == 1.0 and s["evidence_set_recall"].detail["best_set"] == 0
    assert s["context_retention"].value == 0.5 and s["context_retention"].detail["dropped"] == ["d2"]
    # distinct retrieved: d1 fresh, d3 fresh (no dates), d2 superseded, d9 unknown
    assert s["stale_hit_rate"].value == 0.5
    assert set(s["stale_hit_rate"].detail["stale"]) == {"d2", "d9"}
    assert s["stale_hit_rate"].detail["corpus_version"] == "2024-07-01T00:00Z"
    # d3 belongs to another tenant, d9 is unknown: fails closed
    assert s["unauthorised_hit_rate"].value == 0.5
    assert set(s["unauthorised_hit_rate"].detail["unauthorised"]) == {"d3", "d9"}
    assert EvidenceChecks.emitted()["stale_hit_rate"].value == "minimize"


def test_evidence_partial_sets_future_docs_and_acl_defaults():
    trace = {"retrieved": ["d2", "d4", "d5"], "final_prompt": "Context: Headcount is 120. Q?"}
    s = EvidenceChecks().score_batch([sample()], [json.dumps(trace)])[0]
    assert s["evidence_set_recall"].value == 0.5 and s["evidence_set_recall"].detail["missing"] == ["d1"]
    assert s["context_retention"].value == 1.0  # d2's text is in the final prompt
    assert s["stale_hit_rate"].value == pytest.approx(2 / 3)  # d2 superseded, d4 not yet valid
    assert s["unauthorised_hit_rate"].value == pytest.approx(1 / 3)  # d5 has no ACL: fails closed; d4 public


def test_evidence_unscored_reasons():
    s = EvidenceChecks().score_batch([sample(case={}, corpus=None)], [json.dumps({"retrieved": ["d1"]})])[0]
    assert "evidence_sets" in s["evidence_set_recall"].detail["reason"]
    assert "decision_date" in s["stale_hit_rate"].detail["reason"]
    assert "tenant" in s["unauthorised_hit_rate"].detail["reason"]
    s2 = EvidenceChecks().score_batch([sample(corpus=None)], [json.dumps({"retrieved": ["d1"]})])[0]
    assert "corpus" in s2["stale_hit_rate"].detail["reason"]
    assert "final_prompt" in s2["context_retention"].detail["reason"]
    s3 = EvidenceChecks().score_batch([sample()], ["plain answer, no trace"])[0]
    assert "retrieved" in s3["evidence_set_recall"].detail["reason"]
    s4 = EvidenceChecks(corpus=CORPUS).score_batch([sample(corpus=None)], [json.dumps({"retrieved": []})])[0]
    assert s4["evidence_set_recall"].value == 0.0
    assert s4["stale_hit_rate"].status == "unscored"
    assert "corpus_sha256" in EvidenceChecks(corpus=CORPUS).signature()


def test_trace_from_sample_metadata():
    s = EvidenceChecks().score_batch([sample(trace=TRACE)], ["The answer."])[0]
    assert s["evidence_set_recall"].value == 1.0


def test_citation_checks_known_values():
    s = CitationChecks().score_batch([sample()], [json.dumps(TRACE)])[0]
    # [1] -> first prompt document d1; [d2] names d2
    assert s["citation_precision"].detail["cited"] == ["d1", "d2"]
    assert s["citation_precision"].value == 0.5
    assert s["citation_recall"].value == 1.0
    # d1 was in the prompt and states 5.2 million; d2 was not in the prompt
    assert s["citation_support"].value == 0.5
    assert s["citation_support"].detail["unsupported"] == {"d2": "not in the model's context"}


def test_citation_support_checks_numbers_and_unknown_docs():
    trace = {"retrieved": ["d1", "d2"], "citations": ["d1", "d2", "d7"], "answer": "Revenue was 6.1 million [d1]. Headcount is 120 [d2]."}
    s = CitationChecks().score_batch([sample()], [json.dumps(trace)])[0]
    assert s["citation_support"].value == pytest.approx(1 / 3)
    assert set(s["citation_support"].detail["unsupported"]) == {"d1", "d7"}
    none = CitationChecks().score_batch([sample()], ["Revenue grew."])[0]
    assert none["citation_support"].status == "unscored" and none["citation_precision"].status == "unscored"
    assert none["citation_recall"].value == 0.0
    no_gold = CitationChecks().score_batch([sample(case={})], [json.dumps(TRACE)])[0]
    assert "citations" in no_gold["citation_recall"].detail["reason"]


def test_numbers_extraction_and_matching():
    nums = extract_numbers("Revenue was 5.2 million [3], margin 12.5% and 1,234 units; Q3 2024-05-01")
    assert [n["text"] for n in nums] == ["5.2 million", "12.5%", "1,234", "2024", "05", "01"]
    assert number_matches(nums[0], 5_234_000)  # equal at the stated precision
    assert not number_matches(nums[0], 5_300_000)
    assert number_matches(nums[1], 0.125) and number_matches(nums[1], 12.5)
    assert number_matches(extract_numbers("pi is 3.14")[0], 3.14159)
    assert not number_matches(extract_numbers("pi is 3")[0], 3.14159)  # integers match exactly
    assert number_matches(extract_numbers("about 98")[0], 100, rel_tol=0.05)


def test_numeric_accuracy_known_values():
    m = NumericAccuracy()
    s = m.score_batch([sample()], [json.dumps(TRACE)])[0]["numeric_accuracy"]
    assert s.value == 0.5 and s.detail["wrong"] == ["120"] and s.detail["expected_found"] == 1.0
    none = m.score_batch([sample()], ["Revenue was strong."])[0]["numeric_accuracy"]
    assert none.value == 0.0
    # without expected numbers: grounded in the prompt documents d1 and d3
    grounded = m.score_batch([sample(case={})], [json.dumps({**TRACE, "answer": "Revenue 5.2 million, margin 31%, staff 120."})])[0]
    assert grounded["numeric_accuracy"].value == pytest.approx(2 / 3)
    nothing = m.score_batch([sample(case={}, corpus=None)], ["It was 5."])[0]["numeric_accuracy"]
    assert nothing.status == "unscored" and "expected_numbers" in nothing.detail["reason"]


def test_abstention_on_selfaware_real_cases():
    rows = SelfAwareDataset().load()
    unanswerable = next(s for s in rows if not s.metadata["answerable"])
    answerable = next(s for s in rows if s.metadata["answerable"])
    m = AbstentionAccuracy()
    got = m.score_batch(
        [unanswerable, unanswerable, answerable, answerable],
        ["Nobody knows; it cannot be determined.", "The answer is 42.", answerable.references[0], "I don't know."],
    )
    outcomes = [g["abstention_accuracy"].detail["outcome"] for g in got]
    assert [g["abstention_accuracy"].value for g in got] == [1.0, 0.0, 1.0, 0.0]
    assert outcomes == ["correct_abstention", "under_abstention", "answered", "over_abstention"]
    traced = m.score_batch([unanswerable], [json.dumps({"answer": "42", "abstained": True})])[0]
    assert traced["abstention_accuracy"].value == 1.0
    assert m.score_batch([Sample("x", "q")], ["hi"])[0]["abstention_accuracy"].status == "unscored"
    assert detect_abstention("I\u2019m not sure about that.") == (True, "i'm not sure")
    assert detect_abstention("Paris.") == (False, None)
