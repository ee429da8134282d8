"""Pure tests: adapters, annotators, token-confidence metrics, specs (no model, no lake)."""

import math

import pytest

from metric_ops.base import Sample
from metric_ops.confidence import (
    ConfidenceTiers,
    LowConfidenceShare,
    MeanTokenLogprob,
    MinTokenProbability,
    Perplexity,
    confidence_tier,
)
from resources.prompting.adapters import AdapterError, adapter_fingerprint_inputs, make_adapter
from resources.prompting.annotators import AnnotatorError, make_annotators, run_annotators
from resources.backends import GenerationRequest, GenerationResult, ModelSpecError, parse_model_spec
from resources.catalog.spec import EvaluationSpec, SpecError, fingerprint_of
from resources.backends.planning import performance, price_for
from resources.backends.logprobs import align_pieces

SAMPLES = [
    Sample("a", "2+2?", references=("4",), context=("alpha " * 10, "beta " * 10), metadata={"choices": ["3", "4"], "topic": "math"}),
    Sample("b", "3+3?", references=("6",), metadata={"choices": ["6", "7"], "topic": "math"}),
    Sample("c", "capital of France?", references=("Paris",), metadata={"choices": ["Paris", "Rome"], "topic": "geo"}),
]


# ----------------------------------------------------------------------------- adapters
def test_generation_template_and_metadata_placeholders():
    req = make_adapter({"kind": "generation", "template": "[{topic}] Q: {input} A:"}).request(SAMPLES[0])
    assert req.prompt == "[math] Q: 2+2? A:" and req.messages is None


def test_unknown_placeholder_names_known_ones():
    with pytest.raises(AdapterError, match=r"\{nope\}.*\{input\}"):
        make_adapter({"kind": "generation", "template": "{nope}"}).request(SAMPLES[0])


def test_chat_adapter_messages():
    req = make_adapter({"kind": "chat", "system": "Be brief.", "template": "Q: {input}"}).request(SAMPLES[1])
    assert req.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q: 3+3?"}]


def test_few_shot_excludes_the_sample_and_takes_count():
    adapter = make_adapter({"kind": "few_shot", "count": 2}, SAMPLES)
    prompt = adapter.request(SAMPLES[0]).prompt
    assert prompt == "Q: 3+3?\nA: 6\n\nQ: capital of France?\nA: Paris\n\nQ: 2+2?\nA:"
    chat = make_adapter({"kind": "few_shot", "count": 1, "chat": True}, SAMPLES).request(SAMPLES[2])
    assert [m["role"] for m in chat.messages] == ["user", "assistant", "user"] and chat.messages[1]["content"] == "4"
    r1 = make_adapter({"kind": "few_shot", "count": 1, "select": "random", "seed": 1}, SAMPLES).request(SAMPLES[0]).prompt
    r2 = make_adapter({"kind": "few_shot", "count": 1, "select": "random", "seed": 1}, SAMPLES).request(SAMPLES[0]).prompt
    assert r1 == r2 and "2+2?\nA: 4" not in r1


def test_few_shot_pool_file_enters_the_fingerprint(tmp_path):
    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"id": "p1", "input": "1+1?", "answer": "2"}\n', encoding="utf-8")
    config = {"kind": "few_shot", "count": 1, "pool": {"kind": "file", "path": str(pool), "mapping": {"sample_id": "id", "references": "answer"}}}
    first = adapter_fingerprint_inputs(config)["few_shot_pool_sha256"]
    assert make_adapter(config, SAMPLES).request(SAMPLES[0]).prompt.startswith("Q: 1+1?\nA: 2")
    pool.write_text('{"id": "p1", "input": "1+1?", "answer": "two"}\n', encoding="utf-8")
    assert adapter_fingerprint_inputs(config)["few_shot_pool_sha256"] != first


def test_rag_context_budget():
    req = make_adapter({"kind": "rag", "template": "{context}|{input}", "context_budget": 70}).request(SAMPLES[0])
    context = req.prompt.split("|")[0]
    assert len(context) == 70 and context.startswith("alpha ") and "beta" in context


def test_multiple_choice_joint_and_loglikelihood_pick():
    joint = make_adapter({"kind": "multiple_choice"}).request(SAMPLES[0])
    assert joint.prompt == "2+2?\nA. 3\nB. 4\nAnswer:" and joint.continuations is None
    adapter = make_adapter({"kind": "multiple_choice", "mode": "loglikelihood", "normalize": "length"})
    req = adapter.request(SAMPLES[2])
    assert req.continuations == [" Paris", " Rome"] and req.labels == ["A", "B"]
    # raw sums prefer B (-5.5 > -6.0); per character A wins (-1.0 > -1.1)
    result = GenerationResult("c", None, extra={"choice_logprobs": [
        {"label": "A", "logprob": -6.0, "n_chars": 6}, {"label": "B", "logprob": -5.5, "n_chars": 5}]})
    assert adapter.finalize(req, result).output == "A"  # -1.0/char beats -1.1/char
    raw = make_adapter({"kind": "multiple_choice", "mode": "loglikelihood", "answer_format": "text"})
    result = GenerationResult("c", None, extra={"choice_logprobs": [
        {"label": "A", "logprob": -6.0, "n_chars": 6}, {"label": "B", "logprob": -5.5, "n_chars": 5}]})
    assert raw.finalize(req, result).output == "Rome"
    with pytest.raises(AdapterError, match="choices"):
        make_adapter({"kind": "multiple_choice", "choices_field": "options"}).request(SAMPLES[0])


def test_unknown_adapter_kind_and_key():
    with pytest.raises(AdapterError, match="known: .*few_shot"):
        make_adapter({"kind": "fewshot"})
    with pytest.raises(AdapterError, match="unknown keys"):
        make_adapter({"kind": "chat", "sytem": "x"})


# ----------------------------------------------------------------------------- annotators
def _annotate(configs, outputs):
    samples = [Sample(str(i), "q") for i in range(len(outputs))]
    return run_annotators(make_annotators(configs), samples, outputs)


def test_regex_group_cast_span_and_no_match_policies():
    out = "I think... the answer is 042, final answer is 7"
    got = _annotate([
        {"name": "first", "kind": "regex", "pattern": r"answer is (\d+)", "cast": "int"},
        {"name": "last", "kind": "regex", "pattern": r"ANSWER IS (\d+)", "flags": ["IGNORECASE"], "select": "last"},
        {"name": "none", "kind": "regex", "pattern": r"option ([A-D])"},
        {"name": "empty", "kind": "regex", "pattern": r"option ([A-D])", "on_no_match": "empty"},
        {"name": "dflt", "kind": "regex", "pattern": r"option ([A-D])", "on_no_match": {"default": "[invalid]"}},
    ], [out, None])
    first = got["first"][0]
    assert (first.value, first.matched, first.span) == ("42", True, "042")
    assert out[first.span_start:first.span_end] == "042"
    assert got["last"][0].value == "7"
    assert got["none"][0].value is None and not got["none"][0].matched
    assert got["empty"][0].value == "" and got["dflt"][0].value == "[invalid]"
    assert got["first"][1].value is None and "no text" in got["first"][1].error


def test_strip_reasoning_then_regex_via_source():
    outputs = ["<think>maybe B? no</think>The answer is C", "<think>truncated reasoning about D", "plain A"]
    got = _annotate([
        {"name": "visible", "kind": "strip_reasoning"},
        {"name": "letter", "kind": "regex", "pattern": r"\b([A-D])\b", "source": "visible"},
    ], outputs)
    assert [a.value for a in got["visible"]] == ["The answer is C", "", "plain A"]
    assert [a.matched for a in got["visible"]] == [True, True, False]
    assert got["visible"][0].span == "<think>maybe B? no</think>"
    assert [a.value for a in got["letter"]] == ["C", None, "A"]


def test_annotator_config_errors():
    with pytest.raises(AnnotatorError, match="source"):
        make_annotators([{"name": "x", "kind": "regex", "pattern": "a", "source": "later"}])
    with pytest.raises(AnnotatorError, match="twice"):
        make_annotators([{"name": "x", "kind": "strip_reasoning"}, {"name": "x", "kind": "strip_reasoning"}])
    with pytest.raises(AnnotatorError, match="invalid pattern"):
        make_annotators([{"name": "x", "kind": "regex", "pattern": "("}])
    with pytest.raises(AnnotatorError, match="known: .*regex"):
        make_annotators([{"name": "x", "kind": "regexp"}])


# ----------------------------------------------------------------------------- confidence
def _sample(logprobs):
    return Sample("s", "q", metadata={"token_logprobs": [{"logprob": lp} for lp in logprobs]})


def test_confidence_metrics_known_values():
    lps = [math.log(0.9), math.log(0.5), math.log(0.1), math.log(0.3)]
    s = [_sample(lps)]
    assert MeanTokenLogprob().score_batch(s, ["x"])[0]["mean_token_logprob"].value == pytest.approx(sum(lps) / 4)
    assert Perplexity().score_batch(s, ["x"])[0]["perplexity"].value == pytest.approx(math.exp(-sum(lps) / 4))
    assert MinTokenProbability().score_batch(s, ["x"])[0]["min_token_probability"].value == pytest.approx(0.1)
    assert LowConfidenceShare().score_batch(s, ["x"])[0]["low_confidence_share"].value == pytest.approx(0.5)
    tiers = ConfidenceTiers().score_batch(s, ["x"])[0]["confidence_tiers"]
    assert tiers.value == pytest.approx(0.25)
    assert tiers.detail["tiers"] == ["very_high", "medium", "very_low", "low"]


def test_confidence_tier_thresholds_and_missing_logprobs():
    assert [confidence_tier(p) for p in (0.0, 0.199, 0.2, 0.399, 0.4, 0.6, 0.8, 1.0)] == [
        "very_low", "very_low", "low", "low", "medium", "high", "very_high", "very_high"]
    with pytest.raises(ValueError):
        confidence_tier(1.5)
    no_lp = Perplexity().score_batch([Sample("s", "q")], ["x"])[0]["perplexity"]
    empty = Perplexity().score_batch([_sample([])], [""])[0]["perplexity"]
    assert no_lp.status == "unscored" and no_lp.value is None and empty.status == "unscored"


# ----------------------------------------------------------------------------- specs, offsets, cost
def test_spec_errors_show_a_right_example():
    with pytest.raises(ModelSpecError, match="api:gpt-4o-mini@https://"):
        parse_model_spec("api:gpt-4o-mini")
    from resources.backends import ModelBackends

    with pytest.raises(ModelSpecError, match=r"http\(s\) URL"):
        ModelBackends().backend_for("api:gpt-4o-mini@localhost:8000")
    base = {"name": "x", "dataset": {"kind": "sfres"}, "models": {"m": "precomputed:column=system_output"}, "metrics": ["bleu"]}
    with pytest.raises(SpecError, match="api_key_env"):
        EvaluationSpec.from_mapping({**base, "runtime": {"api_key": "sk-123"}})
    spec = EvaluationSpec.from_mapping({**base, "runtime": {"batch_size": 4}})
    other = EvaluationSpec.from_mapping({**base, "runtime": {"batch_size": 32}})
    assert fingerprint_of(spec.fingerprint_inputs("h")) == fingerprint_of(other.fingerprint_inputs("h"))
    annotated = EvaluationSpec.from_mapping({**base, "annotators": [{"name": "a", "kind": "strip_reasoning"}]})
    assert fingerprint_of(annotated.fingerprint_inputs("h")) != fingerprint_of(spec.fingerprint_inputs("h"))


def test_align_pieces_offsets():
    assert align_pieces(["He", "llo", " wor", "ld"], "Hello world") == [(0, 2), (2, 5), (5, 9), (9, 11)]
    assert align_pieces(["\ufffd", "é"], "é") == [(0, 0), (0, 1)]


def test_cost_from_price_table():
    results = [GenerationResult("a", "x", tokens_in=1000, tokens_out=500, latency_s=0.5),
               GenerationResult("b", "y", tokens_in=3000, tokens_out=1500, latency_s=1.5)]
    price = price_for({"gpt-x": {"input_per_1m": 2.0, "output_per_1m": 8.0, "currency": "EUR"}}, "slug", "gpt-x")
    perf = performance(results, generate_s=2.0, wall_s=2.5, identity={"n_parameters": 7}, price=price)
    assert perf["cost"]["total"] == pytest.approx(4000 / 1e6 * 2.0 + 2000 / 1e6 * 8.0)
    assert perf["cost"]["currency"] == "EUR" and perf["tokens_per_s"] == pytest.approx(1000.0)
    assert perf["latency_s"]["mean"] == pytest.approx(1.0) and perf["model_parameters"] == 7
    assert price_for({}, "x") is None


def test_generation_request_default_fields():
    req = GenerationRequest(sample=SAMPLES[0], prompt="p")
    assert req.continuations is None and req.labels is None
