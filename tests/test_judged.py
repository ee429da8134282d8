"""Judged metrics with scripted judge replies: every parse case, G-Eval probability
weighting, faithfulness per-claim verdicts and zero claims, answer and context relevance,
jury consensus / agreement / outliers / ties, pairwise position bias and topologies, and
caching by call count. (The wire path against a real HTTP server is in
test_judge_wire.py.)"""

from __future__ import annotations

import math
import threading
import unicodedata

import pytest

from metric_ops.base import Sample
from metric_ops.judged.rag_triad import AnswerRelevance, ContextRelevance, Faithfulness, auroc
from metric_ops.judged.geval_jury import GEval, Jury, outlier_jurors, rwg_agreement, split_tie
from metric_ops.judged.replies import (
    JudgeParseError, JudgeReply, TokenLogprob, extract_json, parse_scale_score, probability_weighted_score,
)
from metric_ops.judged.judging import MemoryJudgeCache, load_prompt, use_cache
from metric_ops.judged.pairwise import judge_models, position_bias, round_robin_pairs, win_rates
from metric_ops.scoring.frame import score_rows


class ScriptedJudge:
    """A test double for a remote judge: ``script(messages) -> str | JudgeReply`` or a list
    of replies served in order; counts calls."""

    def __init__(self, script, identity: str = "scripted:judge", locality: str = "local") -> None:
        self.identity = identity
        self.locality = locality
        self.script = script
        self.calls: list[list[dict[str, str]]] = []
        self._lock = threading.Lock()

    def complete(self, messages, *, purpose, sample_id=None, **decoding):
        with self._lock:
            self.calls.append(messages)
            n = len(self.calls)
        reply = self.script(messages) if callable(self.script) else self.script[min(n - 1, len(self.script) - 1)]
        return reply if isinstance(reply, JudgeReply) else JudgeReply(reply)


def user_text(messages) -> str:
    return messages[-1]["content"]


SAMPLE = Sample("s1", input="Where is the Eiffel Tower?", context=("The Eiffel Tower is in Paris. It was completed in 1889.",))
STEPS = ["Check correctness.", "Check completeness."]


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "text, lo, hi, expected",
    [
        ("Score: 9", 0, 10, 0.9),
        ("The answer is fine. Rating = 4/5", 1, 5, 0.75),
        ('{"reasoning": "ok", "score": 3}', 1, 5, 0.5),
        ('```json\n{"reasoning": "fine", "score": 5}\n```', 1, 5, 1.0),
        ("In 2023 the tower was repainted. Score: 4", 1, 5, 0.75),
        ('Here is my verdict: {"score": "2", "reasoning": "weak"} Thanks.', 1, 5, 0.25),
    ],
)
def test_parse_readable_scores(text, lo, hi, expected):
    assert parse_scale_score(text, lo, hi).normalised == pytest.approx(expected)


@pytest.mark.parametrize(
    "text, lo, hi, why",
    [
        ("The response is accurate and well written.", 1, 5, "no labelled score"),
        ("In 2023 the tower was repainted.", 0, 10, "no labelled score"),  # a year is not a score
        ("Score: 2023", 0, 10, "outside"),
        ('{"reasoning": "great", "score": 7}', 1, 5, "outside"),
        ('{"reasoning": "good", "sco', 1, 5, "no complete JSON"),  # truncated
        ('```json\n{"reasoning": "good", "score": 4', 1, 5, "unclosed"),  # fenced and truncated
        ('{"reasoning": "no score here"}', 1, 5, "no 'score'"),
        ("Score: 3\nScore: 4", 1, 5, "several different scores"),  # two verdicts that disagree
        ("Final score: 3. Final rating: 4", 1, 5, "several different scores"),
        ("Score: 4/10", 1, 5, "out of 10"),
        ('{"score": true}', 1, 5, "not a number"),
    ],
)
def test_parse_unreadable_scores_raise(text, lo, hi, why):
    with pytest.raises(JudgeParseError, match=why):
        parse_scale_score(text, lo, hi)


def test_extract_json_refuses_two_objects_and_prose():
    with pytest.raises(JudgeParseError, match="more than one"):
        extract_json('{"a": 1} and also {"b": 2}')
    with pytest.raises(JudgeParseError, match="prose only"):
        extract_json("I think it is good.")
    obj, offset = extract_json('prefix {"a": [1, 2]} suffix')
    assert obj == {"a": [1, 2]} and offset == 7


def _tokens(pieces, alternatives):
    """TokenLogprob records spelling ``pieces``; ``alternatives[i]`` = top list at piece i."""
    return tuple(TokenLogprob(p, math.log(0.9), tuple(alternatives.get(i, ()))) for i, p in enumerate(pieces))


def test_geval_probability_weighting_reads_the_score_token_and_sums_duplicates():
    pieces = ['{"reasoning": "Step ', "1", " found ", "2", ' issues", "score": ', "4", "}"]
    text = "".join(pieces)
    top = [("4", math.log(0.5)), (" 4", math.log(0.1)), ("3", math.log(0.3)), ("5", math.log(0.1)), ("x", math.log(0.2))]
    reply = JudgeReply(text, _tokens(pieces, {5: top, 1: [("1", 0.0)], 3: [("2", 0.0)]}))
    parsed = parse_scale_score(text, 1, 5)
    assert parsed.raw == 4  # the score, not "1" (first number) nor "2"
    weighted, probs, how = probability_weighted_score(reply.logprobs, parsed.offset, text, 1, 5)
    # p(4) = 0.5 + 0.1 (duplicate " 4" summed), p(3) = 0.3, p(5) = 0.1; mass 1.0
    assert probs == pytest.approx({"3": 0.3, "4": 0.6, "5": 0.1})
    assert weighted == pytest.approx(3 * 0.3 + 4 * 0.6 + 5 * 0.1)
    judge = ScriptedJudge(lambda m: reply)
    metric = GEval(judge=judge, criteria=[{"name": "correctness", "description": "is it right", "steps": STEPS}], concurrency=1)
    score = metric.score_batch([SAMPLE], ["Paris."])[0]["g_eval"]
    assert score.status == "scored"
    assert score.value == pytest.approx((3.8 - 1) / 4)
    assert score.detail["criteria"][0]["parsed_score"] == 4
    assert "probability-weighted" in score.detail["criteria"][0]["weighting"]
    assert judge.calls[0][-1]["content"].count("Check correctness.") == 1
    assert "logprobs:yes" not in metric.signature() and "logprobs=True" in metric.signature()


def test_geval_without_logprobs_uses_the_form_filled_score_and_weights_criteria():
    def script(messages):
        return '{"reasoning": "r", "score": 5}' if "Criterion: fluency" in user_text(messages) else "Score: 2"

    metric = GEval(judge=ScriptedJudge(script), scale=[1, 5], concurrency=1, criteria=[
        {"name": "fluency", "description": "reads well", "weight": 1, "steps": STEPS},
        {"name": "accuracy", "description": "is right", "weight": 3, "steps": STEPS}])
    score = metric.score_batch([SAMPLE], ["Paris."])[0]["g_eval"]
    assert score.value == pytest.approx((1 * 1.0 + 3 * 0.25) / 4)
    assert [c["raw_score"] for c in score.detail["criteria"]] == [5, 2]


def test_geval_auto_cot_steps_are_generated_once_and_kept():
    def script(messages):
        if "Write the evaluation steps" in user_text(messages):
            return '{"steps": ["Read it.", "Judge it."]}'
        return '{"reasoning": "fine", "score": 4}'

    judge = ScriptedJudge(script)
    metric = GEval(judge=judge, concurrency=1)
    samples = [Sample(f"s{i}", input="q") for i in range(3)]
    out = metric.score_batch(samples, ["a", "b", "c"])
    assert [o["g_eval"].value for o in out] == [0.75] * 3
    assert len(judge.calls) == 4  # one steps call + one per sample
    assert out[0]["g_eval"].detail["evaluation_steps"] == {"overall quality": ["Read it.", "Judge it."]}


def test_unparseable_reply_is_an_error_with_raw_text_after_bounded_retries():
    judge = ScriptedJudge(lambda m: "This answer is quite good overall, I would say 2023 was a fine year.")
    metric = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}], max_attempts=3, concurrency=1)
    rows = score_rows(metric, [SAMPLE], ["Paris."])
    assert len(judge.calls) == 3  # bounded: max_attempts
    row = rows[0]
    assert row["status"] == "error" and row["value"] is None  # never a zero
    import json

    detail = json.loads(row["detail"])
    assert detail["raw_reply"].startswith("This answer is quite good")
    assert len(detail["raw_replies"]) == 3 and "after 3 attempts" in detail["error"]


def test_a_retry_that_parses_is_scored():
    judge = ScriptedJudge(["no idea", '{"reasoning": "ok", "score": 5}'])
    metric = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}], max_attempts=2, concurrency=1)
    score = metric.score_batch([SAMPLE], ["Paris."])[0]["g_eval"]
    assert score.value == 1.0 and len(judge.calls) == 2


def test_transport_failure_is_an_error_row_not_a_crash():
    def boom(messages):
        raise ConnectionError("judge endpoint unreachable")

    metric = GEval(judge=ScriptedJudge(boom), criteria=[{"name": "c", "description": "", "steps": STEPS}])
    score = metric.score_batch([SAMPLE, SAMPLE], ["a", "b"])
    assert all(s["g_eval"].status == "error" and "unreachable" in s["g_eval"].detail["error"] for s in score)


# ------------------------------------------------------------------ faithfulness


def faith_script(claims_json: str, verdicts_json: str):
    def script(messages):
        return claims_json if "atomic claims" in user_text(messages) else verdicts_json
    return script


def test_faithfulness_per_claim_verdicts_and_hallucination():
    claims = ('{"claims": [{"sentence": 1, "claim": "The Eiffel Tower is in Paris."}, '
              '{"sentence": 2, "claim": "The Eiffel Tower was completed in 1900."}, '
              '{"sentence": 2, "claim": "The Eiffel Tower is painted gold."}]}')
    verdicts = ('{"verdicts": [{"claim": 1, "verdict": "supported", "evidence": "The Eiffel Tower is in Paris."}, '
                '{"claim": 2, "verdict": "contradicted", "evidence": "It was completed in 1889."}, '
                '{"claim": 3, "verdict": "Unsupported", "evidence": ""}]}')
    metric = Faithfulness(judge=ScriptedJudge(faith_script(claims, verdicts)), concurrency=1)
    out = metric.score_batch([SAMPLE], ["It is in Paris. It was finished in 1900 and is painted gold."])[0]
    assert out["faithfulness"].value == pytest.approx(1 / 3)
    assert out["hallucination"].value == pytest.approx(2 / 3)
    rows = out["faithfulness"].detail["claims"]
    assert [r["verdict"] for r in rows] == ["supported", "contradicted", "unsupported"]
    assert rows[1]["sentence"] == 2 and rows[1]["sentence_text"] == "It was finished in 1900 and is painted gold."
    assert "sentence 2: contradicted" in out["faithfulness"].detail["reasoning"]
    assert Faithfulness.emitted()["hallucination"].value == "minimize"


def test_zero_claims_is_unscored_not_zero():
    metric = Faithfulness(judge=ScriptedJudge(faith_script('{"claims": []}', "unused")), concurrency=1)
    rows = score_rows(metric, [SAMPLE], ["Hello! How can I help you today?"])
    assert {r["metric"]: (r["status"], r["value"]) for r in rows} == {
        "faithfulness": ("unscored", None), "hallucination": ("unscored", None)}


@pytest.mark.parametrize("verdicts, why", [
    ('{"verdicts": [{"claim": 1, "verdict": "supported"}]}', "no verdict for claims \\[2\\]"),
    ('{"verdicts": [{"claim": 1, "verdict": "true"}, {"claim": 2, "verdict": "supported"}]}', "not one of"),
    ('{"verdicts": [{"claim": 1, "verdict": "supported"}, {"claim": 7, "verdict": "supported"}]}', "unknown claim"),
])
def test_incomplete_verdicts_are_errors_with_raw_reply(verdicts, why):
    claims = '{"claims": [{"sentence": 1, "claim": "A."}, {"sentence": 1, "claim": "B."}]}'
    metric = Faithfulness(judge=ScriptedJudge(faith_script(claims, verdicts)), max_attempts=1, concurrency=1)
    out = metric.score_batch([SAMPLE], ["A and B."])[0]
    assert out["faithfulness"].status == "error" and out["hallucination"].status == "error"
    assert out["faithfulness"].detail["raw_reply"] == verdicts
    assert __import__("re").search(why, out["faithfulness"].detail["error"])


def test_faithfulness_open_knowledge_needs_no_context():
    metric = Faithfulness(judge=ScriptedJudge(faith_script('{"claims": [{"sentence": 1, "claim": "X."}]}',
                                                           '{"verdicts": [{"claim": 1, "verdict": "supported"}]}')),
                          knowledge="judge")
    assert "context" not in metric.requires and "faithfulness_verdicts_open" in metric.signature()
    out = metric.score_batch([Sample("q", input="Q?")], ["X."])[0]
    assert out["faithfulness"].value == 1.0


# ------------------------------------------------------------------ context / answer relevance


def test_context_relevance_per_sentence():
    sample = Sample("c", input="When was the Eiffel Tower completed?",
                    context=("The Eiffel Tower is in Paris. It was completed in 1889.", "Bananas are yellow."))
    reply = '{"sentences": [{"index": 1, "relevant": false}, {"index": 2, "relevant": true}, {"index": 3, "relevant": false}]}'
    out = ContextRelevance(judge=ScriptedJudge(lambda m: reply)).score_batch([sample], ["1889"])[0]["context_relevance"]
    assert out.value == pytest.approx(1 / 3)
    assert out.detail["context_sentences"] == [
        {"sentence": "The Eiffel Tower is in Paris.", "relevant": False, "passage": 1},
        {"sentence": "It was completed in 1889.", "relevant": True, "passage": 1},
        {"sentence": "Bananas are yellow.", "relevant": False, "passage": 2}]
    missing = '{"sentences": [{"index": 1, "relevant": false}]}'
    bad = ContextRelevance(judge=ScriptedJudge(lambda m: missing), max_attempts=1).score_batch([sample], ["x"])[0]
    assert bad["context_relevance"].status == "error" and bad["context_relevance"].detail["raw_reply"] == missing


@pytest.mark.slow
def test_answer_relevance_mean_cosine_with_local_embeddings():
    q = "Where is the Eiffel Tower?"
    metric = AnswerRelevance(judge=ScriptedJudge(lambda m: '{"questions": ["%s", "What colour are bananas?"], '
                                                           '"noncommittal": false}' % q), n=2)
    out = metric.score_batch([Sample("a", input=q)], ["It is in Paris."])[0]["answer_relevance"]
    cos = [g["cosine"] for g in out.detail["generated_questions"]]
    assert cos[0] == pytest.approx(1.0, abs=1e-5) and cos[1] < 0.5
    assert out.value == pytest.approx(sum(cos) / 2)
    evasive = AnswerRelevance(judge=ScriptedJudge(lambda m: '{"questions": ["%s"], "noncommittal": true}' % q), n=2)
    assert evasive.score_batch([Sample("a", input=q)], ["I don't know."])[0]["answer_relevance"].value == 0.0
    none = AnswerRelevance(judge=ScriptedJudge(lambda m: '{"questions": []}'), max_attempts=1)
    assert none.score_batch([Sample("a", input=q)], ["x"])[0]["answer_relevance"].status == "error"


# ------------------------------------------------------------------ jury


def fixed(score, identity="scripted:judge"):
    return ScriptedJudge(lambda m: '{"reasoning": "because", "score": %s}' % score, identity=identity)


def test_jury_consensus_sigma_agreement_outlier():
    jury = Jury(judges=[fixed(3), fixed(3), fixed(5)], consensus="median", scale=[1, 5], concurrency=1)
    out = jury.score_batch([SAMPLE], ["Paris."])[0]["jury"]
    assert out.value == pytest.approx(0.5)  # median of 0.5, 0.5, 1.0
    d = out.detail
    assert [j["score"] for j in d["jurors"]] == [0.5, 0.5, 1.0]
    assert d["mean"] == pytest.approx(2 / 3) and d["outliers"] == [2] and d["tie"] is False
    assert d["agreement"] == pytest.approx(1 - (4 / 3) / 2.0)  # r_wg: 1 - var([3,3,5]) / ((25-1)/12)
    assert d["sigma"] == pytest.approx(0.288675, abs=1e-5)
    assert all(j["reasoning"] == "because" for j in d["jurors"])


def test_jury_flags_a_split_tie_and_same_model_counts_twice():
    same = fixed(2, identity="api:same-model@http://x/v1")
    jury = Jury(judges=[same, same], consensus="mean", concurrency=1)
    out = jury.score_batch([SAMPLE], ["Paris."])[0]["jury"]
    assert len(same.calls) == 2 and len(out.detail["jurors"]) == 2  # two votes, two calls
    assert out.detail["tie"] is False
    split = Jury(judges=[fixed(2), fixed(4)], concurrency=1).score_batch([SAMPLE], ["x"])[0]["jury"]
    assert split.value == pytest.approx(0.5) and split.detail["tie"] is True
    assert split_tie([0.0, 0.0, 1.0, 1.0], 0.5) and not split_tie([0.0, 0.5, 1.0], 0.5)


def test_jury_weighted_trimmed_and_failed_juror():
    jury = Jury(judges=[fixed(1), fixed(5)], consensus="weighted", weights=[3, 1], concurrency=1)
    assert jury.score_batch([SAMPLE], ["x"])[0]["jury"].value == pytest.approx(0.25)
    broken = ScriptedJudge(lambda m: "cannot decide")
    partial = Jury(judges=[fixed(5), broken], max_attempts=1, concurrency=1).score_batch([SAMPLE], ["x"])[0]["jury"]
    assert partial.status == "error" and partial.detail["raw_reply"] == "cannot decide"
    assert partial.detail["jurors"][0]["score"] == 1.0
    lenient = Jury(judges=[fixed(5), broken], max_attempts=1, min_jurors=1).score_batch([SAMPLE], ["x"])[0]["jury"]
    assert lenient.value == 1.0 and lenient.detail["n_valid"] == 1
    trimmed = Jury(judges=[fixed(1), fixed(3), fixed(3), fixed(3), fixed(5)], consensus="trimmed_mean", trim=0.2)
    assert trimmed.score_batch([SAMPLE], ["x"])[0]["jury"].value == pytest.approx(0.5)


def test_jury_statistics_helpers():
    assert rwg_agreement([3, 3, 3], (1, 5)) == 1.0 and rwg_agreement([1, 5], (1, 5)) == 0.0
    assert rwg_agreement([4], (1, 5)) is None
    assert outlier_jurors([0.5, 0.55, 0.5, 0.52, 0.0]) == [4] and outlier_jurors([0.0, 1.0]) == []


def test_jury_locality_follows_its_judges():
    assert Jury(judges=[fixed(3)]).locality == "local"
    assert Jury(judges=[fixed(3), fixed(3, identity="api:m@https://x/v1")]).locality == "local"
    remote = ScriptedJudge(lambda m: "", identity="api:m@https://x/v1", locality="external")
    assert Jury(judges=[fixed(3), remote]).locality == "external"
    assert GEval(judge=remote).locality == "external" and GEval(judge=fixed(3)).locality == "local"


# ------------------------------------------------------------------ caching and signatures


def test_judge_calls_are_cached_by_signature_inputs():
    judge = fixed(4)
    metric = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}], concurrency=2)
    samples = [Sample(f"s{i}", input=f"q{i}") for i in range(4)]
    cache = MemoryJudgeCache()
    with use_cache(cache):
        first = metric.score_batch(samples, ["a"] * 4)
        assert len(judge.calls) == 4
        again = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}]).score_batch(samples, ["a"] * 4)
        assert len(judge.calls) == 4  # nothing paid twice
        other = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}], temperature=0.7)
        other.score_batch(samples[:1], ["a"])
        assert len(judge.calls) == 5  # decoding is part of the key
    assert [a["g_eval"].value for a in again] == [f["g_eval"].value for f in first]
    with use_cache(None):
        metric.score_batch(samples[:1], ["a"])
    assert len(judge.calls) == 6  # no cache: paid


def test_signature_has_judge_prompt_hash_decoding_and_version():
    metric = Faithfulness(judge=fixed(1, identity="api:gpt-x@https://example.invalid/v1"))
    sig = metric.signature()
    for part in ("faithfulness", "v:1", "judge:api:gpt-x@https://example.invalid/v1",
                 load_prompt("faithfulness_claims").tag, load_prompt("faithfulness_verdicts").tag, "temperature=0.0"):
        assert part in sig
    assert Faithfulness(judge=fixed(1, identity="api:gpt-y@https://example.invalid/v1")).signature() != sig


# ------------------------------------------------------------------ pairwise


def pair_script(prefer: str | None):
    """Prefer the response containing ``prefer``; None = always the first shown."""
    def script(messages):
        text = user_text(messages)
        first = text.split("[Response 1]")[1].split("[Response 2]")[0]
        if prefer is None:
            return '{"reasoning": "first looks better", "winner": "1"}'
        return '{"reasoning": "r", "winner": "%s"}' % ("1" if prefer in first else "2")
    return script


SAMPLES3 = [Sample(f"p{i}", input=f"question {i}") for i in range(3)]


def outputs_for(models):
    return {m: {s.sample_id: f"answer by {m}" for s in SAMPLES3} for m in models}


def _caller(judge):
    from metric_ops.judged.judging import JudgeCaller

    return JudgeCaller(judge, {"temperature": 0.0}, "pairwise", 1, None)


def test_pairwise_position_biased_judge_flips_every_pair():
    judge = ScriptedJudge(pair_script(None))
    result = judge_models(_caller(judge), load_prompt("pairwise"), SAMPLES3, outputs_for(["a", "b"]), concurrency=1)
    assert len(judge.calls) == 6  # 3 samples x both orders
    assert all(v.winner == "tie" and v.position_flip for v in result["verdicts"])
    bias = result["position_bias"]
    assert bias["flip_rate"] == 1.0 and bias["first_position_preference"] == 1.0
    assert {r["model"]: r["win_rate"] for r in result["win_rates"]} == {"a": 0.5, "b": 0.5}


def test_pairwise_consistent_judge_round_robin_win_rates():
    judge = ScriptedJudge(pair_script("answer by b"))
    result = judge_models(_caller(judge), load_prompt("pairwise"), SAMPLES3, outputs_for(["a", "b", "c"]), concurrency=2)
    assert len(round_robin_pairs(["a", "b", "c"])) == 3 and len(result["verdicts"]) == 9
    rates = {r["model"]: r for r in result["win_rates"]}
    assert rates["b"]["win_rate"] == 1.0 and rates["b"]["wins"] == 6
    assert rates["a"]["win_rate"] == 0.25 and rates["a"]["ties"] == 3  # a vs c: the judge cannot decide -> flips
    assert result["position_bias"]["flip_rate"] == pytest.approx(3 / 9)


def test_pairwise_tournament_bracket_and_seeded_tie():
    judge = ScriptedJudge(pair_script("answer by d"))
    result = judge_models(_caller(judge), load_prompt("pairwise"), SAMPLES3, outputs_for(["a", "b", "c", "d"]),
                          topology="tournament", concurrency=1)
    assert result["champion"] == "d"
    first_round = result["rounds"][0]
    assert [(m["model_a"], m["model_b"]) for m in first_round] == [("a", "d"), ("b", "c")]
    bc = first_round[1]
    assert bc["tie"] is True and bc["winner"] == "b" and bc["advanced_by"] == "seed"  # flagged, not silent
    assert result["rounds"][1][0]["winner"] == "d"


def test_pairwise_unreadable_order_is_an_error_pair():
    judge = ScriptedJudge(lambda m: '{"winner": "both"}')
    result = judge_models(_caller(judge), load_prompt("pairwise"), SAMPLES3[:1], outputs_for(["a", "b"]), concurrency=1)
    v = result["verdicts"][0]
    assert v.status == "error" and v.winner is None and v.detail["raw_reply_ab"] == '{"winner": "both"}'
    assert win_rates([v])[0]["win_rate"] is None and position_bias([v])["flip_rate"] is None


def test_auroc():
    assert auroc([1, 1, 0, 0], [0.9, 0.8, 0.1, 0.2]) == 1.0
    assert auroc([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auroc([1, 1], [0.2, 0.3]) is None


def test_weighting_uses_backend_character_offsets_when_tokens_do_not_spell_the_reply():
    text = 'Score: 4'
    # byte-level pieces that do not concatenate to the text, but carry offsets
    toks = (TokenLogprob("Score", -0.1, (), 0), TokenLogprob(":", -0.1, (), 5), TokenLogprob("Ġ4", -0.2, (("Ġ4", math.log(0.8)), ("Ġ5", math.log(0.2))), 6))
    weighted, probs, _ = probability_weighted_score(toks, 7, text, 1, 5)
    assert weighted is None  # "Ġ4" is not the digits "4": refused rather than guessed
    toks = (TokenLogprob("Score:", -0.1, (), 0), TokenLogprob(" 4", -0.2, ((" 4", math.log(0.8)), (" 5", math.log(0.2))), 6))
    weighted, probs, _ = probability_weighted_score(toks, 7, text, 1, 5)
    assert weighted == pytest.approx(4.2) and probs == pytest.approx({"4": 0.8, "5": 0.2})
    assert JudgeReply.from_json(JudgeReply(text, toks).to_json()) == JudgeReply(text, toks)


def test_a_reask_carries_the_unreadable_reply_and_the_parse_error():
    judge = ScriptedJudge(["Looks fine to me.", '{"reasoning": "ok", "score": 4}'])
    caller_metric = GEval(judge=judge, criteria=[{"name": "c", "description": "", "steps": STEPS}], concurrency=1)
    assert caller_metric.score_batch([SAMPLE], ["Paris."])[0]["g_eval"].value == 0.75
    second = judge.calls[1]
    assert second[:-2] == judge.calls[0]
    assert second[-2] == {"role": "assistant", "content": "Looks fine to me."}
    assert "could not be read" in second[-1]["content"] and "no labelled score" in second[-1]["content"]


# ------------------------------------------------------------------ issue 15 kind 5: cleaned replies, final verdict
@pytest.mark.parametrize(
    "text, raw",
    [
        # the case: a mention in the reasoning, then the verdict behind a zero-width space
        ("At first a score of 2 looked fair, but the answer is complete.\nScore:\u200b 5", 5),
        ("Score:\u200b\u200c\u2060 4", 4),  # several format characters
        ("\ufeffScore: 3", 3),  # byte-order mark
        ("Ｓｃｏｒｅ：５", 5),  # fullwidth letters, colon and digit (NFKC)
        ("Score: ４/５", 4),  # fullwidth digits with a denominator
        ("Score: 4/5", 4),
        ("**Score:** 4", 4),  # bold markdown
        ("**Score**: 2", 2),
        ("__Rating__ = 3", 3),
        ("Rating - 3", 3),
        ("Rating — 1", 1),
        ("The score is 3 out of 5.", 3),  # a mention alone is read
        ("A score of 1 would be harsh; a score of 2 too. Rating: 4", 4),  # mentions never outvote a verdict
        ("Score: 3. Final rating: 4", 4),  # a verdict labelled final wins
        ("Score: 4\nAfter checking again, Score: 4", 4),  # verdicts that agree
        ("Score:\u00a05", 5),  # no-break space
    ],
)
def test_judge_reply_is_cleaned_and_the_final_verdict_wins(text, raw):
    parsed = parse_scale_score(text, 1, 5)
    assert parsed.raw == raw
    assert parsed.normalised == pytest.approx((raw - 1) / 4)
    # the offset points at the verdict's digit in the raw reply (for log-probability lookup)
    assert unicodedata.normalize("NFKC", text[parsed.offset]) == str(raw)


@pytest.mark.parametrize(
    "text",
    [
        "Score: 2\nScore: 5",
        "Score: 2\n**Score:** 5",
        "Ｓｃｏｒｅ：２\nScore:\u200b 5",  # equal only after cleaning would they agree; they do not
        "Rating = 4. Score - 2",
        "The score is 2. Later the score is 4.",  # disagreeing mentions and no verdict
    ],
)
def test_conflicting_verdicts_are_an_error_never_the_first_number(text):
    with pytest.raises(JudgeParseError, match="several different scores"):
        parse_scale_score(text, 1, 5)


def test_normalise_reply_maps_every_clean_character_to_its_raw_position():
    from metric_ops.judged.replies import normalise_reply

    raw = "a\u200bＢ\ufb01c"  # zero-width space, fullwidth B, the ligature fi
    clean, where = normalise_reply(raw)
    assert clean == "aBfic"
    assert where == [0, 2, 3, 3, 4]


def test_geval_reads_the_verdict_behind_a_zero_width_space():
    text = "At first a score of 2 looked fair, but the answer is complete.\nScore:\u200b 5"
    judge = ScriptedJudge(lambda m: JudgeReply(text))
    metric = GEval(judge=judge, criteria=[{"name": "completeness", "description": "complete?", "steps": STEPS}], concurrency=1)
    score = metric.score_batch([SAMPLE], ["Paris."])[0]["g_eval"]
    assert score.status == "scored" and score.value == 1.0


def test_json_verdicts_are_read_after_cleaning_too():
    from metric_ops.judged.replies import JudgeReply as Reply
    from metric_ops.judged.pairwise import parse_pairwise

    obj, offset = extract_json('Verdict\u200b: {"verdict": "supported\u200b", "claim": "１"}')
    assert obj == {"verdict": "supported", "claim": "1"} and offset == 10  # offset into the raw reply
    assert parse_pairwise(Reply('{"reasoning": "A is better", "winner": "\uff11"}'))[0] == "first"
    assert parse_pairwise(Reply('{"reasoning": "tie", "winner": "t\u200bie"}'))[0] == "tie"
    with pytest.raises(JudgeParseError):
        parse_pairwise(Reply('{"reasoning": "?", "winner": "3"}'))
