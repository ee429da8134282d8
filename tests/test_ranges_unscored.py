"""Issue 15 kinds 1 and 2: declared value ranges, and "nothing to measure" is unscored.

Kind 1: every metric declares its range in the contract; a value outside by float
rounding (<= 1e-6 relative) is clamped with the raw value in ``detail``, anything further
out is an ``error``; applied centrally by the runner where values become rows.
Kind 2: empty / whitespace-only references behave like null ones (unscored), an empty
BERTScore candidate is unscored, and token log-probabilities of -inf are values (never
dropped at ingestion or in the metric).
"""

from __future__ import annotations

import json
import math

import pytest

import metric_ops  # noqa: F401  (registers every metric)
from metric_ops import REGISTRY, Sample, get_metric
from metric_ops.base import RANGE_RTOL, Direction, Metric, MetricDefinitionError, Score, check_range
from metric_ops.scoring.frame import score_rows


def _rows(name, refs, outputs, **params):
    samples = [Sample(str(i), "q", tuple(r)) for i, r in enumerate(refs)]
    return score_rows(get_metric(name, **params), samples, outputs)


def _detail(row):
    return json.loads(row["detail"])


# ------------------------------------------------------------------------- kind 1: ranges
@pytest.mark.parametrize("text", ["the cat sat", "a b c d e", "the quick brown fox jumps over the lazy dog", "Paris"])
def test_sentence_bleu_of_identical_texts_is_exactly_100(text):
    row = _rows("bleu", [[text]], [text])[0]
    assert row["status"] == "scored" and row["value"] == 100.0
    raw = _detail(row).get("raw_value", row["value"])
    assert abs(raw - 100.0) <= RANGE_RTOL * 100  # sacrebleu's own number differs by float rounding only


@pytest.mark.parametrize("name", ["chrf", "chrf_pp"])
@pytest.mark.parametrize("text", ["the cat sat", "a b c d e"])
def test_chrf_of_identical_texts_is_exactly_100(name, text):
    row = _rows(name, [[text]], [text])[0]
    assert row["status"] == "scored" and row["value"] == 100.0


@pytest.mark.parametrize(
    "value,expected",
    [
        (1.0 + 2.4e-7, 1.0),  # BERTScore's 1.000000238
        (1.0 + 1e-6, 1.0),  # exactly at the tolerance
        (-3e-17, 0.0),  # residue below 0
        (0.5, 0.5),  # inside: unchanged
        (1.0, 1.0),
    ],
)
def test_rounding_outside_the_range_is_clamped_with_the_raw_value_kept(value, expected):
    checked = check_range(Score(value, detail={"k": 1}), (0.0, 1.0))
    assert checked.status == "scored" and checked.value == expected
    if value != expected:
        assert checked.detail["raw_value"] == value and checked.detail["clamped"] is True and checked.detail["k"] == 1
    else:
        assert "raw_value" not in checked.detail


@pytest.mark.parametrize(
    "value,rng",
    [(1.0 + 2e-6, (0.0, 1.0)), (1.5, (0.0, 1.0)), (-0.01, (0.0, 1.0)), (100.001, (0.0, 100.0)),
     (math.inf, (0.0, 1.0)), (-math.inf, (0.0, 1.0)), (0.5, (1.0, math.inf))],
)
def test_further_outside_the_range_is_an_error(value, rng):
    checked = check_range(Score(value), rng, "m")
    assert checked.status == "error" and checked.value is None
    assert checked.detail["raw_value"] == value and "outside its declared range" in checked.detail["error"]


def test_unbounded_ranges_accept_infinite_values():
    assert check_range(Score(-math.inf), (-math.inf, 0.0)).value == -math.inf
    assert check_range(Score(math.inf), (1.0, math.inf)).value == math.inf


def _probe(values, probe_name: str = "test_probe", register: bool = False):
    class Probe(Metric, register=register):
        name = probe_name
        direction = Direction.MAXIMIZE
        dimension = "baseline_grounding"
        value_range = (0.0, 1.0)

        def score_batch(self, samples, outputs):
            return [{self.name: Score(values[int(s.sample_id)])} for s in samples]

    return Probe()


def test_the_runner_applies_the_range_to_every_row():
    values = [0.3, 1.0 + 5e-8, 1.2, -1e-9]
    samples = [Sample(str(i), "q", ("r",)) for i in range(4)]
    rows = score_rows(_probe(values), samples, ["o"] * 4)
    assert [r["status"] for r in rows] == ["scored", "scored", "error", "scored"]
    assert [r["value"] for r in rows] == [0.3, 1.0, None, 0.0]
    assert _detail(rows[1])["raw_value"] == 1.0 + 5e-8 and _detail(rows[2])["raw_value"] == 1.2


def test_a_metric_without_a_declared_range_fails_at_definition():
    with pytest.raises(MetricDefinitionError, match="value_range"):
        class NoRange(Metric, register=False):  # noqa: F841
            name = "test_no_range"
            direction = Direction.MAXIMIZE
            dimension = "baseline_grounding"
    with pytest.raises(MetricDefinitionError, match="lo < hi"):
        class Backwards(Metric, register=False):  # noqa: F841
            name = "test_backwards"
            direction = Direction.MAXIMIZE
            dimension = "baseline_grounding"
            value_range = (1.0, 0.0)
    with pytest.raises(MetricDefinitionError, match="does not emit"):
        class Stray(Metric, register=False):  # noqa: F841
            name = "test_stray"
            direction = Direction.MAXIMIZE
            dimension = "baseline_grounding"
            value_range = (0.0, 1.0)
            score_ranges = {"other": (0.0, 2.0)}


def test_every_registered_metric_declares_a_range_for_every_score():
    for cls in REGISTRY:
        for score_name in cls.emitted():
            lo, hi = cls.declared_range(score_name)
            assert lo < hi, (cls.name, score_name)
    assert get_metric("bleu").range_of("bleu") == (0.0, 100.0)
    assert get_metric("perplexity").range_of("perplexity") == (1.0, math.inf)
    assert get_metric("mean_token_logprob").range_of("mean_token_logprob") == (-math.inf, 0.0)


@pytest.mark.slow
def test_bertscore_and_semantic_similarity_of_identical_texts_are_exactly_1():
    texts = ["the cat sat on the mat", "Paris is the capital of France.", "a b c"]
    rows = _rows("bertscore", [[t] for t in texts], texts)
    assert {r["metric"] for r in rows} == {"bertscore_precision", "bertscore_recall", "bertscore_f1"}
    # the same tokens as the reference: exactly 1.0 (issue 26; bert-score's float32 sums give
    # 1 +- 3e-7, which reordered ties in rank correlations)
    assert all(r["status"] == "scored" and r["value"] == 1.0 and _detail(r)["identical_to_reference"] for r in rows)
    # a near-identical candidate is still computed (below 1)
    near = _rows("bertscore", [["the cat sat on the mat"]], ["the cat sat on the mat ."])
    assert all(r["status"] == "scored" and r["value"] < 1.0 and "identical_to_reference" not in _detail(r) for r in near)
    sims = _rows("semantic_similarity", [[t] for t in texts], texts)
    assert all(r["status"] == "scored" and 1.0 - RANGE_RTOL <= r["value"] <= 1.0 for r in sims)
    # rescaling with a baseline moves the lower bound: (-1 - b) / (1 - b)
    assert get_metric("bertscore", baseline=[0.5, 0.5, 0.8]).range_of("bertscore_f1") == pytest.approx((-9.0, 1.0))


# ------------------------------------------------------------------------- kind 2: blank references
def _reference_metrics():
    return [c.name for c in REGISTRY if c.__module__.startswith("metric_ops.") and "references" in c.requires
            and c.name not in ("bertscore", "semantic_similarity")]


@pytest.mark.parametrize("blank", ["", " ", "\t\n "])
def test_blank_reference_is_unscored_like_a_null_one_for_every_reference_metric(blank):
    for name in _reference_metrics():
        metric = get_metric(name)
        null = score_rows(metric, [Sample("0", "q", ())], ["the cat sat"])
        empty = score_rows(metric, [Sample("0", "q", (blank,))], ["the cat sat"])
        if getattr(metric, "blank_reference_is_answer", False):
            # SQuAD v2: an empty gold is the "no answer" gold, so a non-empty answer is wrong (0), not unscored
            assert all(r["status"] == "scored" and r["value"] == 0.0 for r in empty), name
            continue
        assert all(r["status"] == "unscored" for r in null), name
        for r in empty:
            assert r["status"] == "unscored" and r["value"] is None, (name, r)
            d = _detail(r)
            assert "empty or whitespace-only" in d["reason"] and d["blank_references_dropped"] == 1


@pytest.mark.parametrize("name", ["bleu", "chrf", "rouge_1", "rouge_l", "meteor", "nltk_bleu", "rouge_su"])
def test_a_blank_reference_beside_a_real_one_is_dropped_not_scored(name):
    metric = get_metric(name)
    alone = score_rows(metric, [Sample("0", "q", ("the cat sat on the mat",))], ["the cat sat"])
    mixed = score_rows(metric, [Sample("0", "q", (" ", "the cat sat on the mat", ""))], ["the cat sat"])
    assert [r["value"] for r in mixed] == [r["value"] for r in alone]
    assert all(_detail(r)["blank_references_dropped"] == 2 for r in mixed)


def test_squad_no_answer_gold_still_matches_an_empty_answer():
    for name in ("exact_match", "token_f1", "quasi_exact_match"):
        row = score_rows(get_metric(name), [Sample("0", "q", ("",))], [""])[0]
        assert row["status"] == "scored" and row["value"] == 1.0, name


def test_corpus_metrics_leave_blank_reference_segments_out():
    samples = [Sample("0", "q", ("the cat sat on the mat",)), Sample("1", "q", ("  ",))]
    rows = score_rows(get_metric("corpus_bleu"), samples, ["the cat sat on the mat", "anything"])
    corpus = [r for r in rows if r["sample_id"] is None]
    segment = [r for r in rows if r["sample_id"] == "1"]
    assert corpus[0]["value"] == 100.0 and _detail(corpus[0])["n_unscored_segments"] == 1
    assert segment[0]["status"] == "unscored"


@pytest.mark.slow
@pytest.mark.parametrize("candidate", ["", " ", "\n\t"])
def test_bertscore_of_an_empty_candidate_is_unscored(candidate):
    rows = _rows("bertscore", [["the cat sat"]], [candidate])
    assert all(r["status"] == "unscored" and r["value"] is None for r in rows)
    assert all(_detail(r)["empty"] == ["candidate"] for r in rows)
    blank_ref = _rows("bertscore", [[" "]], ["the cat sat"])
    assert all(r["status"] == "unscored" for r in blank_ref)
    sim = _rows("semantic_similarity", [["the cat sat"]], [candidate])
    assert sim[0]["status"] == "unscored"


# ------------------------------------------------------------------------- kind 2: token logprobs
def _lp_rows(name, logprobs):
    s = Sample("s", "q", metadata={"token_logprobs": [{"token": "t", "logprob": lp} for lp in logprobs]})
    return score_rows(get_metric(name), [s], ["Paris"])[0]


def test_minus_infinity_logprob_is_probability_zero_not_dropped():
    lps = [-0.1, -math.inf]
    assert _lp_rows("min_token_probability", lps)["value"] == 0.0
    assert _lp_rows("low_confidence_share", lps)["value"] == 0.5
    ppl = _lp_rows("perplexity", lps)
    assert ppl["status"] == "scored" and ppl["value"] == math.inf
    d = _detail(ppl)
    assert d["infinite"] is True and d["n_tokens"] == 2 and d["zero_probability_positions"] == [1]
    assert _lp_rows("mean_token_logprob", lps)["value"] == -math.inf
    assert _lp_rows("confidence_tiers", lps)["value"] == 0.5


@pytest.mark.parametrize(
    "lps,min_p,low_share",
    [
        ([-math.inf], 0.0, 1.0),
        ([-math.inf, -math.inf, math.log(0.9)], 0.0, 2 / 3),
        ([math.log(0.5), math.log(0.9), -math.inf, math.log(0.95)], 0.0, 0.25),
        ([math.log(0.5), math.log(0.9)], 0.5, 0.0),
    ],
)
def test_logprob_values_over_several_inputs(lps, min_p, low_share):
    assert _lp_rows("min_token_probability", lps)["value"] == pytest.approx(min_p)
    assert _lp_rows("low_confidence_share", lps)["value"] == pytest.approx(low_share)
    ppl = _lp_rows("perplexity", lps)
    expected = math.inf if -math.inf in lps else math.exp(-sum(lps) / len(lps))
    assert ppl["value"] == pytest.approx(expected)
    assert _detail(ppl)["n_tokens"] == len(lps)


def test_missing_invalid_and_overflowing_logprobs_are_never_silent():
    missing = _lp_rows("perplexity", [-0.1, None, -0.2])
    assert missing["status"] == "unscored" and _detail(missing)["missing_positions"] == [1]
    for bad in (math.nan, math.inf, 0.5):
        row = _lp_rows("min_token_probability", [-0.1, bad])
        assert row["status"] == "error" and "position 1" in _detail(row)["error"]
    assert _lp_rows("min_token_probability", [1e-9, -0.1])["value"] == pytest.approx(math.exp(-0.1))  # rounding of 0
    huge = _lp_rows("perplexity", [-800.0, -800.0])  # exp(800) overflows a float: +inf flagged, never capped
    assert huge["value"] == math.inf and _detail(huge)["overflow"] is True


def test_minus_infinity_travels_through_ingestion_delta_and_the_metric_inputs(tmp_path):
    from resources.lake.resource import LakeStore
    from resources.backends.logprobs import make_records, table_rows
    from resources.scoring.metric_inputs import MetricInputs

    lake = LakeStore(root=str(tmp_path / "lake"))
    records = make_records([" Par", "is"], [-0.1, -math.inf], None, " Paris")
    assert [r["logprob"] for r in records] == [-0.1, -math.inf]
    lake.append("token_logprobs", table_rows(records, model="m", fingerprint="f" * 16, sample_id="s1", run_id="r"))
    assert lake.read("token_logprobs").sort("position")["logprob"].to_list() == [-0.1, -math.inf]
    inputs = MetricInputs(lake, "m", "f" * 16, [Sample("s1", "q", ("Paris",))], [" Paris"])
    for name, expected in (("min_token_probability", 0.0), ("low_confidence_share", 0.5), ("perplexity", math.inf)):
        metric, samples, outputs = inputs.prepare(name, {})
        row = score_rows(metric, samples, outputs)[0]
        assert row["value"] == expected and _detail(row)["n_tokens"] == 2, name


def test_docs_state_every_metrics_range_and_unscored_meaning():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    section = text.split("## Value ranges and `unscored`", 1)[1].split("\n## ", 1)[0]

    def fmt(v):
        return "+inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:g}"

    for cls in (c for c in REGISTRY if c.__module__.startswith("metric_ops.")):  # built-ins, not test metrics
        line = next((ln for ln in section.splitlines() if ln.startswith(f"| `{cls.name}` |")), None)
        assert line is not None, f"docs/metrics.md has no range row for {cls.name}"
        for score_name in cls.emitted():
            lo, hi = cls.declared_range(score_name)
            assert f"[{fmt(lo)}, {fmt(hi)}]" in line, (cls.name, score_name, line)
        assert line.rstrip().split("|")[-2].strip(), f"{cls.name}: no unscored meaning"


def test_score_suite_applies_the_range_like_the_runner():
    from metric_ops.scoring.suite import score_suite

    values = [0.3, 1.0 + 5e-8, 1.2, -1e-9]

    _probe(values, "test_suite_range_probe", register=True)  # registered by name: score_suite builds its metrics by name
    try:
        samples = [Sample(str(i), "q", ("r",)) for i in range(4)]
        out = score_suite({"p": ("test_suite_range_probe", {})}, samples, ["o"] * 4, workers=1, progress=False)["p"]
    finally:
        REGISTRY.pop("test_suite_range_probe", None)  # other tests list every registered metric
    scores = [row["test_suite_range_probe"] for row in out]
    assert [s.status for s in scores] == ["scored", "scored", "error", "scored"]
    assert [s.value for s in scores] == [0.3, 1.0, None, 0.0]
    assert scores[1].detail["raw_value"] == 1.0 + 5e-8 and scores[2].detail["raw_value"] == 1.2
