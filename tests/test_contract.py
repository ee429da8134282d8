"""The Metric contract, the registry and the runner's unscored/error rules."""

from __future__ import annotations

import json

import pytest
import sacrebleu

from metric_ops import Direction, Metric, MetricDefinitionError, Sample, Score, get_metric
from metric_ops.registry import REGISTRY, UnknownMetricError
from metric_ops.scoring.rows import human_rating_rows
from metric_ops.scoring.frame import score_rows


def test_metric_without_direction_fails_at_class_definition():
    with pytest.raises(MetricDefinitionError, match="declares no direction"):

        class NoDirection(Metric, register=False):  # noqa: F841
            name = "no_direction"
            dimension = "factual"


def test_metric_with_unknown_dimension_or_locality_fails():
    with pytest.raises(MetricDefinitionError, match="dimension must be one of"):

        class BadDim(Metric, register=False):  # noqa: F841
            name = "bad_dim"
            direction = Direction.MAXIMIZE
            dimension = "vibes"

    with pytest.raises(MetricDefinitionError, match="locality must be one of"):

        class BadLoc(Metric, register=False):  # noqa: F841
            name = "bad_loc"
            direction = Direction.MAXIMIZE
            dimension = "factual"
            locality = "cloud"


def test_registry_resolves_names_aliases_and_emitted_scores_and_suggests():
    assert REGISTRY.resolve("em") == "exact_match"
    assert REGISTRY.resolve("rouge_l_f") == "rouge_l"
    assert REGISTRY.resolve("BLEU") == "bleu"
    with pytest.raises(UnknownMetricError, match="did you mean.*rouge_l"):
        REGISTRY.resolve("rouge_lx")


def test_defining_a_metric_registers_it_with_no_other_wiring():
    class LengthRatio(Metric):
        """Output length / reference length (test metric)."""

        name = "test_length_ratio"
        direction = Direction.MAXIMIZE
        dimension = "baseline_grounding"
        value_range = (0.0, float("inf"))

        def score_batch(self, samples, outputs):
            return [{self.name: Score(len(o) / max(1, len(s.references[0])))} for s, o in zip(samples, outputs)]

    assert get_metric("test_length_ratio").score_batch([Sample("1", "q", ("abcd",))], ["ab"])[0]["test_length_ratio"].value == 0.5


def test_signature_records_parameters_and_library_versions():
    sig = get_metric("bleu", lowercase=True).signature()
    assert "lowercase:yes" in sig and f"sacrebleu:{sacrebleu.__version__}" in sig
    assert sig != get_metric("bleu").signature()


def test_score_validation():
    with pytest.raises(ValueError):
        Score(None, "scored")
    with pytest.raises(ValueError):
        Score(float("nan"))
    with pytest.raises(ValueError):
        Score(0.0, "unscored")
    assert Score.unscored("no context").detail["reason"] == "no context"


def test_missing_references_is_unscored_not_zero():
    rows = score_rows(get_metric("token_f1"), [Sample("1", "q", ())], ["an answer"])
    assert rows[0]["status"] == "unscored" and rows[0]["value"] is None
    assert "references" in json.loads(rows[0]["detail"])["reason"]


def test_empty_prediction_gets_bleu_zero_and_empty_reference_is_unscored():
    rows = score_rows(get_metric("bleu"), [Sample("1", "q", ("the cat sat",)), Sample("2", "q", ("",))], ["", "a cat"])
    # an empty output is measured (it matches nothing); an empty reference leaves nothing to measure
    assert [r["value"] for r in rows] == [0.0, None]
    assert [r["status"] for r in rows] == ["scored", "unscored"]
    assert "empty or whitespace-only" in json.loads(rows[1]["detail"])["reason"]


def test_a_row_that_breaks_a_metric_is_an_error_and_the_others_are_scored():
    class Fragile(Metric, register=False):
        name = "test_fragile"
        direction = Direction.MAXIMIZE
        dimension = "baseline_grounding"
        value_range = (0.0, 1.0)

        def score_batch(self, samples, outputs):
            out = []
            for s, o in zip(samples, outputs):
                if "boom" in o:
                    raise ValueError(f"cannot score sample {s.sample_id}")
                out.append({self.name: Score(1.0)})
            return out

    samples = [Sample(str(i), "q", ("r",)) for i in range(4)]
    rows = score_rows(Fragile(), samples, ["ok", "boom", "ok", "ok"])
    assert [r["status"] for r in rows] == ["scored", "error", "scored", "scored"]
    assert "cannot score sample 1" in json.loads(rows[1]["detail"])["error"]
    assert rows[1]["value"] is None


def test_bleu_matches_sacrebleu_sentence_bleu_on_real_sfres_rows():
    from resources.datasets import make_dataset

    samples = make_dataset({"kind": "sfres", "limit": 200}).load()
    outputs = [s.metadata["system_output"] for s in samples]
    rows = score_rows(get_metric("bleu"), samples, outputs)
    for row, sample, output in zip(rows, samples, outputs):
        expected = sacrebleu.sentence_bleu(output, list(sample.references)).score
        assert abs(row["value"] - expected) <= 1e-9  # tolerance: 1e-9 (same library, same settings)


def test_rouge_l_matches_rouge_score_on_real_sfres_rows():
    from rouge_score import rouge_scorer

    from resources.datasets import make_dataset

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    samples = make_dataset({"kind": "sfres", "limit": 200}).load()
    outputs = [s.metadata["system_output"] for s in samples]
    rows = [r for r in score_rows(get_metric("rouge_l"), samples, outputs) if r["metric"] == "rouge_l_f"]
    for row, sample, output in zip(rows, samples, outputs):
        assert abs(row["value"] - scorer.score(sample.references[0], output)["rougeL"].fmeasure) <= 1e-9


@pytest.mark.parametrize(
    "gold,pred,em,f1",
    [
        ("The Eiffel Tower", "eiffel tower!", 1.0, 1.0),  # articles, case, punctuation
        ("", "", 1.0, 1.0),  # SQuAD v2: both empty is a match
        ("Paris", "", 0.0, 0.0),
        ("New York City", "new york", 0.0, 0.8),
    ],
)
def test_squad_v2_rules(gold, pred, em, f1):
    sample = Sample("1", "q", (gold,))
    assert get_metric("exact_match").score_batch([sample], [pred])[0]["exact_match"].value == em
    assert abs(get_metric("token_f1").score_batch([sample], [pred])[0]["token_f1"].value - f1) < 1e-12


def test_max_over_gold_answers():
    sample = Sample("1", "q", ("Denver Broncos", "Broncos"))
    assert get_metric("exact_match").score_batch([sample], ["the Broncos"])[0]["exact_match"].value == 1.0


def test_human_ratings_become_score_rows():
    rows = human_rating_rows([Sample("1", "q", ratings={"naturalness": 4.5, "overall": float("nan")})])
    by_metric = {r["metric"]: r for r in rows}
    assert by_metric["human:naturalness"]["value"] == 4.5 and by_metric["human:naturalness"]["status"] == "scored"
    assert by_metric["human:overall"]["status"] == "unscored"


def test_corpus_level_metrics_are_never_split_into_batches():
    import sacrebleu

    hyps = ["the cat sat on the mat", "a dog barked loudly", ""]
    refs = ["the cat sat on the mat", "the dog barked loudly", "birds fly south"]
    samples = [Sample(str(i), "q", (r,)) for i, r in enumerate(refs)]
    rows = score_rows(get_metric("corpus_bleu"), samples, hyps, batch_size=1)
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert abs(expected - 62.05) < 0.005
    assert all(abs(r["value"] - expected) <= 1e-9 for r in rows)
