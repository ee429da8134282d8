"""Unit tests of the metric suite (issue 3): BLEU variants, chrF, ROUGE, METEOR, SQuAD
rules, BERTScore edge cases. Values are checked against the reference library called
in the test, or against hand-worked values (ROUGE-W/S/SU, which have no Python
reference). Tolerance: 1e-9 unless stated."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

import metric_ops  # noqa: F401  (registers every metric)
from metric_ops import REGISTRY, Sample, get_metric
from metric_ops.lexical.bleu import corpus_bleu, reference_streams
from pipelines.crossval.rouge import ROUGE_WORKED_EXAMPLES
from metric_ops.lexical.rouge import rouge_s_prf, skip_bigrams, wlcs

TOL = 1e-9

SUITE = [
    "bleu", "corpus_bleu", "nltk_bleu", "chrf", "chrf_pp", "rouge_1", "rouge_2", "rouge_l", "rouge_lsum",
    "rouge_w", "rouge_s", "rouge_su", "meteor", "bertscore", "exact_match", "quasi_exact_match", "token_f1",
    "semantic_similarity",
]


def _s(*refs: str) -> Sample:
    return Sample("s", "", tuple(refs))


@pytest.mark.parametrize("name", SUITE)
def test_registered_as_local_baseline_grounding(name):
    cls = REGISTRY.get_class(name)
    assert cls.name == name
    assert cls.dimension == "baseline_grounding"
    assert cls.locality == "local"
    assert all(d.value == "maximize" for d in cls.emitted().values())
    assert cls.__doc__ and len(cls.__doc__) > 100


# --------------------------------------------------------------------------- BLEU


def test_corpus_bleu_issue_example_matches_sacrebleu():
    import sacrebleu

    hyps = ["the cat sat on the mat", "a dog barked loudly", ""]
    refs = [["the cat sat on the mat"], ["the dog barked loudly"], ["birds fly south"]]
    ours = corpus_bleu(hyps, refs).score
    streams = [[r[0] for r in refs]]
    assert abs(ours - sacrebleu.corpus_bleu(hyps, streams).score) <= TOL
    assert round(ours, 2) == 62.05
    rows = get_metric("corpus_bleu").score_batch([_s(*r) for r in refs], hyps)
    assert all(abs(r["corpus_bleu"].value - ours) <= TOL for r in rows)


def test_corpus_bleu_rejects_streams_passed_as_per_sample_references():
    hyps = ["the cat sat on the mat", "a dog barked loudly", ""]
    streams = [["the cat sat on the mat", "the dog barked loudly", "birds fly south"]]  # sacrebleu shape
    with pytest.raises(ValueError, match="3 hypotheses but 1 reference"):
        corpus_bleu(hyps, streams)
    with pytest.raises(ValueError, match="no reference"):
        reference_streams(2, [["a"], []])
    with pytest.raises(TypeError):
        reference_streams(1, "a bare string")


def test_corpus_bleu_variable_reference_counts_match_sacrebleu_none_padding():
    import sacrebleu

    hyps = ["the cat sat on the mat", "a dog barked loudly"]
    refs = [["the cat sat on the mat", "a cat sat on a mat"], ["the dog barked loudly"]]
    streams = [["the cat sat on the mat", "the dog barked loudly"], ["a cat sat on a mat", None]]
    assert abs(corpus_bleu(hyps, refs).score - sacrebleu.corpus_bleu(hyps, streams).score) <= TOL


@pytest.mark.parametrize("name", ["bleu", "nltk_bleu", "chrf", "chrf_pp"])
@pytest.mark.parametrize("hyp,ref,status", [("", "the cat", "scored"), ("   ", "the cat", "scored"),
                                            ("the cat", "", "unscored"), ("the cat", "  \n ", "unscored")])
def test_empty_output_scores_zero_and_empty_reference_is_unscored(name, hyp, ref, status):
    # an empty output is measured (it matches nothing); an empty reference is no reference (issue 15 kind 2)
    from metric_ops.scoring.frame import score_rows

    row = score_rows(get_metric(name), [_s(ref)], [hyp])[0]
    assert row["status"] == status
    assert row["value"] == (0.0 if status == "scored" else None)


@pytest.mark.parametrize("smoothing", range(8))
def test_nltk_bleu_each_smoothing_matches_nltk(smoothing):
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = Tokenizer13a()
    hyp = "the quick brown fox jumped over the lazy dog ."
    refs = ["the quick brown fox jumps over the lazy dog.", "a fast brown fox leapt over a lazy dog"]
    expected = sentence_bleu([tok(r).split() for r in refs], tok(hyp).split(), smoothing_function=getattr(SmoothingFunction(), f"method{smoothing}"))
    got = get_metric("nltk_bleu", smoothing=smoothing).score_batch([_s(*refs)], [hyp])[0]["nltk_bleu"].value
    assert abs(got - expected) <= TOL
    assert f"smoothing:{smoothing}" in get_metric("nltk_bleu", smoothing=smoothing).signature()


def test_nltk_bleu_method6_without_bigram_match_is_an_error_not_a_number():
    row = get_metric("nltk_bleu", smoothing=6).score_batch([_s("alpha beta gamma delta")], ["delta gamma beta alpha"])[0]
    assert row["nltk_bleu"].status == "error"


def test_bleu_signature_records_sacrebleu_signature():
    sig = get_metric("bleu", tokenize="intl", lowercase=True).signature()
    assert "tok:intl" in sig and "case:lc" in sig and "sacrebleu:" in sig


# --------------------------------------------------------------------------- ROUGE


@pytest.mark.parametrize("example", ROUGE_WORKED_EXAMPLES, ids=lambda e: f"{e['metric']}-{e['source']}")
def test_rouge_w_s_su_hand_worked_examples(example):
    m = get_metric(example["metric"], **example["params"])
    row = m.score_batch([_s(example["reference"])], [example["candidate"]])[0]
    scores = [row[f"{example['metric']}_{p}"] for p in ("precision", "recall", "f")]
    if example["expected"] is None:  # nothing to measure
        assert all(s.status == "unscored" for s in scores)
    else:
        assert [s.value for s in scores] == pytest.approx(list(example["expected"]), abs=TOL)


def test_wlcs_rewards_consecutive_matches_lin_example():
    x, y1, y2 = "ABCDEFG", "ABCDHIK", "AHBKCID"
    assert abs(wlcs(list(x), list(y1), 2.0) - 16.0) <= TOL  # f(k)=k^2: one run of 4
    assert abs(wlcs(list(x), list(y2), 2.0) - 4.0) <= TOL  # four runs of 1


def test_skip_bigram_counts_follow_skip_distance():
    toks = "a b c d e".split()
    assert sum(skip_bigrams(toks, -1).values()) == 10  # C(5, 2)
    assert sum(skip_bigrams(toks, 0).values()) == 4  # plain bigrams
    assert sum(skip_bigrams(toks, 1).values()) == 7  # 4 + 3
    assert rouge_s_prf([], toks) == (0.0, 0.0, 0.0)


def test_rouge_lsum_punctuation_split_matches_rouge_score_on_pre_split_text():
    from rouge_score import rouge_scorer

    hyp = "The cat sat. It was happy! Then it left?"
    ref = "A cat sat down. The cat was happy. It left."
    scorer = rouge_scorer.RougeScorer(["rougeLsum"])
    expected = scorer.score("A cat sat down.\nThe cat was happy.\nIt left.", "The cat sat.\nIt was happy!\nThen it left?")["rougeLsum"]
    row = get_metric("rouge_lsum", sentence_split="punctuation").score_batch([_s(ref)], [hyp])[0]
    assert abs(row["rouge_lsum_f"].value - expected.fmeasure) <= TOL
    # without the split, one-line texts score as ROUGE-L
    plain = get_metric("rouge_lsum").score_batch([_s(ref)], [hyp])[0]["rouge_lsum_f"].value
    assert abs(plain - scorer.score(ref, hyp)["rougeLsum"].fmeasure) <= TOL


def test_rouge_unicode_tokenizer_scores_cjk_where_default_keeps_no_token():
    default = get_metric("rouge_1").score_batch([_s("我爱北京")], ["我爱北京"])[0]["rouge_1_f"]
    uni = get_metric("rouge_1", tokenizer="unicode").score_batch([_s("我爱北京")], ["我爱北京"])[0]["rouge_1_f"].value
    assert default.status == "unscored" and default.detail["rouge_score"] == 0.0 and uni == 1.0


# --------------------------------------------------------------------------- SQuAD rules


@pytest.mark.parametrize(
    "pred,golds,em,qem",
    [
        ("", ("",), 1.0, 1.0),  # both empty: a match (SQuAD v2)
        ("", ("Paris",), 0.0, 0.0),
        ("The Paris!", ("paris",), 1.0, 1.0),
        ("It is Paris, I think.", ("paris",), 0.0, 1.0),
        ("Parisian", ("paris",), 0.0, 0.0),  # whole tokens only
        ("cane corso", ("Japanese Terrier", "cane corso"), 1.0, 1.0),  # max over golds
    ],
)
def test_squad_v2_rules(pred, golds, em, qem):
    s = _s(*golds)
    assert get_metric("exact_match").score_batch([s], [pred])[0]["exact_match"].value == em
    assert get_metric("quasi_exact_match").score_batch([s], [pred])[0]["quasi_exact_match"].value == qem


# --------------------------------------------------------------------------- METEOR


def test_meteor_matches_nltk_with_wordnet_synonyms():
    from nltk.translate.meteor_score import meteor_score

    from metric_ops.lexical.meteor import load_wordnet, meteor_tokens

    wordnet = load_wordnet()  # NLTK's own reader, found through NLTK_DATA or ./.nltk_data

    hyp, ref = "The feline rested upon the rug.", "The cat sat on the mat."
    expected = meteor_score([meteor_tokens(ref)], meteor_tokens(hyp), wordnet=wordnet)
    got = get_metric("meteor").score_batch([_s(ref)], [hyp])[0]["meteor"].value
    assert abs(got - expected) <= TOL
    assert "wordnet:3.0" in get_metric("meteor").signature()


def test_meteor_without_wordnet_says_how_to_install(tmp_path):
    code = textwrap.dedent(
        f"""
        import nltk, pathlib
        import metric_ops.lexical.meteor as m
        m.DEFAULT_NLTK_DATA = pathlib.Path({str(tmp_path)!r})
        nltk.data.path[:] = [{str(tmp_path)!r}]
        try:
            m.Meteor()
        except m.WordNetMissingError as exc:
            print("MISSING:", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"NLTK_DATA": str(tmp_path), "PATH": ""})
    assert "MISSING:" in out.stdout, out.stderr
    assert "setup_wordnet.sh" in out.stdout and "nltk.downloader wordnet" in out.stdout


# --------------------------------------------------------------------------- BERTScore


@pytest.mark.slow
def test_bertscore_idf_refused_with_a_single_reference():
    from metric_ops.neural.bertscore import IdfUndefinedError

    with pytest.raises(IdfUndefinedError, match="at least 2 reference"):
        get_metric("bertscore", idf=True).score_batch([_s("the cat sat")], ["a cat sat"])


@pytest.mark.slow
def test_bertscore_empty_candidate_and_truncation_are_flagged():
    m = get_metric("bertscore")
    long_text = "word " * 700
    rows = m.score_batch([_s("the cat sat"), _s(long_text)], ["", "word word word"])
    # an empty candidate leaves nothing to measure: unscored, never bert-score's placeholder 0 (issue 15)
    assert all(rows[0][n].status == "unscored" and rows[0][n].value is None for n in m.emitted())
    assert rows[0]["bertscore_f1"].detail["empty"] == ["candidate"]
    trunc = rows[1]["bertscore_f1"].detail["truncated"]
    assert trunc["max_length"] == 512 and trunc["reference_tokens_dropped"] == [700 - 510]
    sig = m.signature()
    assert "all-MiniLM-L6-v2" in sig and "num_layers:6" in sig and "idf:no" in sig


@pytest.mark.slow
def test_bertscore_layer_is_configurable_and_changes_the_number():
    a = get_metric("bertscore", num_layers=3).score_batch([_s("the cat sat on the mat")], ["a dog lay on a rug"])[0]
    b = get_metric("bertscore", num_layers=6).score_batch([_s("the cat sat on the mat")], ["a dog lay on a rug"])[0]
    assert a["bertscore_f1"].value != b["bertscore_f1"].value
    with pytest.raises(ValueError, match="num_layers"):
        get_metric("bertscore", num_layers=7)
    assert math.isfinite(a["bertscore_f1"].value)


def test_padded_references_follow_bert_scores_chunks():
    from metric_ops.neural.bertscore import padded_references

    assert padded_references([5]) == [False]
    assert padded_references([4, 6, 6, 3]) == [True, False, False, True]
    # bert-score pads each chunk of batch_size (64) references to that chunk's longest
    lengths = [3] * 64 + [5, 4]
    assert padded_references(lengths) == [False] * 64 + [False, True]


def test_f1_condition_is_the_error_magnification_of_the_harmonic_mean():
    from metric_ops.neural.bertscore import f1_condition

    assert f1_condition(0.5, 0.5) == pytest.approx(1.0)
    assert f1_condition(1.0, 0.0) == pytest.approx(2.0)
    assert f1_condition(0.02, -0.025) == pytest.approx(2 * (0.02**2 + 0.025**2) / 0.005**2)
    assert math.isnan(f1_condition(0.1, -0.1))
    # first order: F(P + d) - F(P) ~ dF/dP * d, bounded by kappa * d
    p, r, d = 0.02, -0.025, 1e-9
    f = lambda p, r: 2 * p * r / (p + r)  # noqa: E731
    assert abs(f(p + d, r) - f(p, r)) <= f1_condition(p, r) * d * 1.001


# Real SelfAware pairs (data/selfaware, answerable questions; stand-in answers as in
# pipelines.crossval.run.selfaware_prediction: another question's gold answer).
TRINDER = ("tommy trinder", ("teacher salaries", "average teacher salaries"))
PREY = (
    "detection of prey",
    ("magnesium ribbon", "magnessium", "magnesium compounds", "mg²⁺", "magnesium threonate", "c8h14mgo10",
     "magnesium l threonate", "element 12", "magnesium", "mg2", "⚩"),
)


@pytest.mark.slow
def test_bertscore_reproduces_bert_scores_multi_reference_padding():
    """bert-score pads a sample's references to the longest; against the shorter one a
    candidate token's best cosine is floored at 0. pad_references=True equals bert-score
    called on the sample; False equals the textbook definition (bert-score on each
    (candidate, reference) pair alone, where nothing is padded, max over references).
    Tolerance 1e-6 (float32 embeddings computed in different batches)."""
    from pipelines.crossval.compare import Case
    from pipelines.crossval.harness import bert_score_reference
    from metric_ops.neural.embeddings import get_encoder

    pred, refs = TRINDER
    enc = get_encoder(None)
    per_sample = bert_score_reference([Case(pred, refs, "selfaware")], enc.path, enc.num_layers)[0]
    per_pair = bert_score_reference([Case(pred, (r,), "selfaware") for r in refs], enc.path, enc.num_layers)
    definition = [max(v[k] for v in per_pair) for k in range(3)]
    names = ("bertscore_precision", "bertscore_recall", "bertscore_f1")

    padded = get_metric("bertscore").score_batch([_s(*refs)], [pred])[0]
    plain = get_metric("bertscore", pad_references=False).score_batch([_s(*refs)], [pred])[0]
    assert [padded[n].value for n in names] == pytest.approx(per_sample, abs=1e-6)
    assert [plain[n].value for n in names] == pytest.approx(definition, abs=1e-6)
    # the two differ on this pair (the test can fail): P 0.0269 vs 0.0222
    assert padded["bertscore_precision"].value - plain["bertscore_precision"].value > 4e-3
    assert padded["bertscore_f1"].detail["bert_score_padding"] == [0]
    assert "bert_score_padding" not in plain["bertscore_f1"].detail
    assert "pad_references:yes" in get_metric("bertscore").signature()
    assert "pad_references:no" in get_metric("bertscore", pad_references=False).signature()


@pytest.mark.slow
def test_bertscore_flags_an_ill_conditioned_f1():
    # P and R of the best-F reference have opposite signs: F (0.213) exceeds both P and R
    from pipelines.crossval.compare import Case
    from pipelines.crossval.harness import bert_score_reference
    from metric_ops.neural.embeddings import get_encoder

    pred, refs = PREY
    enc = get_encoder(None)
    ref = bert_score_reference([Case(pred, refs, "selfaware")], enc.path, enc.num_layers)[0]
    row = get_metric("bertscore").score_batch([_s(*refs)], [pred])[0]
    p, r, f = (row[n].value for n in ("bertscore_precision", "bertscore_recall", "bertscore_f1"))
    assert f > max(p, r)
    kappa = row["bertscore_f1"].detail["f1_condition"]
    assert kappa > 100
    assert "f1_condition" not in row["bertscore_precision"].detail
    assert [p, r] == pytest.approx(ref[:2], abs=1e-6)
    assert f == pytest.approx(ref[2], abs=1e-6 * kappa)


@pytest.mark.slow
def test_bertscore_without_references_is_unscored_not_minus_infinity():
    row = get_metric("bertscore").score_batch([Sample("q", "question")], ["an answer"])[0]
    assert {s.status for s in row.values()} == {"unscored"}
    assert all(s.value is None for s in row.values())


@pytest.mark.slow
def test_bertscore_idf_undefined_precision_is_an_error_and_recall_stays():
    # "the" occurs in every reference document: its idf is ln(5/5) = 0, so the candidate's
    # weights sum to 0 and precision is undefined (bert-score: NaN); recall is defined.
    from pipelines.crossval.compare import Case
    from pipelines.crossval.harness import bert_score_reference
    from metric_ops.neural.embeddings import get_encoder

    cases = [Case("the", ("the cat", "the dog"), "edge", real=False), Case("a bird", ("the bird", "the fish"), "edge", real=False)]
    enc = get_encoder(None)
    ref = bert_score_reference(cases, enc.path, enc.num_layers, idf=True)
    rows = get_metric("bertscore", idf=True).score_batch([_s(*c.references) for c in cases], [c.prediction for c in cases])
    assert math.isnan(ref[0][0]) and ref[0][2] == 0.0  # bert-score: P NaN, F filled with 0
    assert rows[0]["bertscore_precision"].status == "error"
    assert "idf weight 0" in rows[0]["bertscore_precision"].detail["error"]
    assert rows[0]["bertscore_recall"].value == pytest.approx(ref[0][1], abs=1e-6)
    assert rows[0]["bertscore_f1"].status == "error"  # undefined, never a filled-in 0
    assert [rows[1][n].value for n in ("bertscore_precision", "bertscore_recall", "bertscore_f1")] == pytest.approx(ref[1], abs=1e-6)


def test_metric_parameters_are_checked_and_converted():
    from metric_ops.registry import MetricParamError

    assert get_metric("nltk_bleu", smoothing="3").params["smoothing"] == 3
    assert get_metric("rouge_l", use_stemmer="yes").params["use_stemmer"] is True
    with pytest.raises(MetricParamError, match="use_stemmer must be true or false, got 'maybe'"):
        get_metric("rouge_l", use_stemmer="maybe")
    with pytest.raises(MetricParamError, match="smoothing must be a whole number"):
        get_metric("nltk_bleu", smoothing="abc")
    with pytest.raises(MetricParamError, match=r"takes no parameter 'nosuch'; its parameters: .*smoothing"):
        get_metric("nltk_bleu", nosuch=1)


@pytest.mark.slow
def test_bertscore_baseline_parameter_forms():
    from metric_ops.registry import MetricParamError

    for form in ("0.8,0.8,0.8", "(0.8,0.8,0.8)", "[0.8, 0.8, 0.8]", [0.8, 0.8, 0.8]):
        assert "baseline:0.8,0.8,0.8" in get_metric("bertscore", baseline=form).signature()
    with pytest.raises(ValueError, match="three numbers"):
        get_metric("bertscore", baseline="1,2")
    with pytest.raises(MetricParamError, match="baseline must be a list"):
        get_metric("bertscore", baseline=100)
    with pytest.raises(MetricParamError, match="idf must be true or false"):
        get_metric("bertscore", idf="maybe")


# ----------------------------------------------------------------- issue 15 kind 9: METEOR tokenizer
METEOR_TOL = 1e-12  # same NLTK function on the same tokens: only float summation order could differ


@pytest.mark.parametrize(
    "hyp, ref, nltk_value, whitespace_value",
    [
        ("'' no", "no ''", 0.25, 0.5),  # QAGS-XSum: NLTK rewrites and splits the quotes differently
    ],
)
def test_meteor_tokenizer_qags_case(hyp, ref, nltk_value, whitespace_value):
    nltk_row = get_metric("meteor").score_batch([_s(ref)], [hyp])[0]["meteor"]
    ws_row = get_metric("meteor", tokenizer="whitespace").score_batch([_s(ref)], [hyp])[0]["meteor"]
    assert nltk_row.value == pytest.approx(nltk_value, abs=1e-9)
    assert ws_row.value == pytest.approx(whitespace_value, abs=1e-9)


@pytest.mark.parametrize(
    "hyp, refs",
    [
        ("'' no", ("no ''",)),
        ("The cat, it sat.", ("the cat sat on the mat.",)),
        ("don't stop", ("do not stop",)),
        ("\"quoted\" words (here)", ("quoted words here", "other words")),
        ("a dog barked loudly", ("the dog barks", "a dog barked")),
    ],
)
def test_meteor_matches_nltk_on_the_same_pretokenised_input(hyp, refs):
    from nltk.corpus import wordnet
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.meteor_score import meteor_score

    for tokenizer, split in (("nltk", NLTKWordTokenizer().tokenize), ("whitespace", str.split)):
        ours = get_metric("meteor", tokenizer=tokenizer).score_batch([_s(*refs)], [hyp])[0]["meteor"].value
        theirs = meteor_score([split(r) for r in refs], split(hyp), wordnet=wordnet)
        assert abs(ours - theirs) <= METEOR_TOL, (tokenizer, ours, theirs)


def test_meteor_tokenizer_is_recorded_in_the_signature_and_checked():
    from metric_ops.registry import MetricParamError

    assert get_metric("meteor").signature().endswith("|tok:nltk_word")
    assert get_metric("meteor", tokenizer="whitespace").signature().endswith("|tok:whitespace")
    with pytest.raises(ValueError, match="tokenizer must be one of nltk, whitespace"):
        get_metric("meteor", tokenizer="spacy")
    with pytest.raises(MetricParamError):
        get_metric("meteor", tokenise="whitespace")
