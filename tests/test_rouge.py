"""ROUGE correctness (issue 15): ROUGE-1.5.5 parity of every ROUGE variant (kind 8),
the Unicode tokenizer's combining marks and tokenizer options on every variant (kind 3),
and ``unscored`` where there is nothing to measure (kind 2).

Known answers: ``pipelines/crossval/rouge155_known_answers.json``, the values the ROUGE-1.5.5 Perl
script printed (``-a -n 2 -w 1.2 -2 4 -U -f A -d -z SPL``: no stemming, stopwords kept) on
412 real and hand-made pairs plus 42 two-reference pairs and 2 multi-line cases; regenerate with
``scripts/rouge155_known_answers.py`` (the Perl script is not shipped)."""

from __future__ import annotations

import unicodedata

import pytest

import metric_ops  # noqa: F401  (registers every metric)
from metric_ops import Sample, get_metric
from pipelines.crossval.rouge import PERL_METRICS, POOLED, as_printed, known_answer_comparison, load_known_answers
from metric_ops.registry import MetricParamError

ROUGES = ["rouge_1", "rouge_2", "rouge_l", "rouge_lsum", "rouge_w", "rouge_s", "rouge_su"]
PARTS = ("precision", "recall", "f")
KNOWN = load_known_answers()


def score(name: str, reference, candidate: str, **params):
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    row = get_metric(name, **params).score_batch([Sample("s", "", refs)], [candidate])[0]
    return [row[f"{name}_{p}"] for p in PARTS]


def values(name: str, reference, candidate: str, **params) -> list[float]:
    scores = score(name, reference, candidate, **params)
    assert all(s.status == "scored" for s in scores), [dict(s.detail) for s in scores]
    return [s.value for s in scores]


# --------------------------------------------------------------------------- kind 8: ROUGE-1.5.5


def test_known_answers_cover_300_real_pairs_and_all_six_metrics():
    real = [p for p in KNOWN["pairs"] if not p["id"].startswith("edge")]
    assert len(real) >= 300
    assert KNOWN["options"] == "-a -n 2 -w 1.2 -2 4 -U -f A -d -z SPL"
    assert all(set(p["rouge155"]) == set(PERL_METRICS) for p in KNOWN["pairs"] + KNOWN["multi_reference_pairs"])
    assert sum(len(p["references"]) == 2 for p in KNOWN["multi_reference_pairs"]) >= 40
    assert sum("\n" in p["candidate"] for p in KNOWN["multi_reference_pairs"]) == 2  # multi-line texts


@pytest.mark.parametrize("perl_name", list(PERL_METRICS))
def test_every_pair_matches_rouge155_at_printed_precision(perl_name):
    metric, params = PERL_METRICS[perl_name]
    pairs = KNOWN["pairs"] + (KNOWN["multi_reference_pairs"] if metric in POOLED else [])
    samples = [Sample(p["id"], "", tuple(p.get("references") or [p["reference"]])) for p in pairs]
    rows = get_metric(metric, **params).score_batch(samples, [p["candidate"] for p in pairs])
    compared = 0
    for pair, row in zip(pairs, rows):
        expected = pair["rouge155"][perl_name]
        scores = [row[f"{metric}_{p}"] for p in PARTS]
        if scores[0].status == "unscored":
            # nothing to measure: the script prints 0 there; facetlake says why instead
            assert all(s.status == "unscored" and s.detail["reason"] for s in scores)
            assert expected == [0.0, 0.0, 0.0], pair["id"]
            continue
        compared += 1
        got = as_printed(scores[0].value, scores[1].value)
        assert got == pytest.approx(expected, abs=5e-6), (pair["id"], got, expected)
    assert compared >= len(pairs) - 3


def test_comparison_reports_zero_difference_and_counts_left_out_pairs():
    result = known_answer_comparison(KNOWN)
    for perl_name, c in result.items():
        assert c["max_abs_error"] <= 5e-6, perl_name
        assert c["nonzero_left_out"] == []
    assert result["ROUGE-2"]["left_out"] == 2 and result["ROUGE-1"]["left_out"] == 0
    assert result["ROUGE-W-1.2"]["pairs"] == len(KNOWN["pairs"]) + len(KNOWN["multi_reference_pairs"])


def test_comparison_fails_on_a_wrong_known_answer():
    import copy

    bad = copy.deepcopy(KNOWN)
    bad["pairs"][0]["rouge155"]["ROUGE-W-1.2"][1] += 0.001
    assert known_answer_comparison(bad)["ROUGE-W-1.2"]["max_abs_error"] == pytest.approx(0.001, abs=1e-9)


@pytest.mark.parametrize(
    "reference,candidate,expected",
    [
        ("a b", "a b", [1.0, 0.87055, 0.93080]),  # recall over f(f(m))
        ("the cat", "cat", [1.0, 0.43528, 0.60654]),
        ("a b c d e f g", "a b c d h i k", [0.57143, 0.38721, 0.46162]),
        # a h b k c i d: its matches are consecutive in the reference -> one run, as above
        ("a b c d e f g", "a h b k c i d", [0.57143, 0.38721, 0.46162]),
    ],
)
def test_rouge_w_default_is_rouge155(reference, candidate, expected):
    p, r, _ = values("rouge_w", reference, candidate)
    assert list(as_printed(p, r)) == pytest.approx(expected, abs=5e-6)


def test_rouge_w_lin2004_variant_keeps_the_paper_formula():
    w = 1.2
    assert values("rouge_w", "a b", "a b", variant="lin2004") == pytest.approx([1.0, 1.0, 1.0])
    p, r, _ = values("rouge_w", "a b c d e f g", "a h b k c i d", variant="lin2004")
    assert r == pytest.approx((4 / 7**w) ** (1 / w)) and p == pytest.approx(r)  # four runs of 1


@pytest.mark.parametrize(
    "reference,candidate,rouge155,lin2004",
    [
        ("the cat", "cat", [0.0, 0.0, 0.0], [1.0, 1 / 3, 0.5]),
        # 1.5.5: candidate {black, black cat} (no "cat"), reference {the, the black, the cat, black, black cat}
        ("the black cat", "black cat", [1.0, 2 / 5, 0.8 / 1.4], [1.0, 3 / 6, 2 / 3]),
        ("a b", "a b", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
    ],
)
def test_rouge_su_last_unigram(reference, candidate, rouge155, lin2004):
    assert values("rouge_su", reference, candidate) == pytest.approx(rouge155, abs=1e-9)
    assert values("rouge_su", reference, candidate, variant="lin2004") == pytest.approx(lin2004, abs=1e-9)


def test_rouge_su_cat_vs_the_cat_is_zero_as_rouge155_prints():
    p, r, f = score("rouge_su", "the cat", "cat")
    assert (p.status, r.status, f.status) == ("scored",) * 3
    assert (p.value, r.value, f.value) == (0.0, 0.0, 0.0)
    assert "last token" in p.detail["note"]


def test_variant_is_checked_and_recorded_in_the_signature():
    for name in ("rouge_w", "rouge_s", "rouge_su"):
        assert "variant:rouge155" in get_metric(name).signature()
        assert "variant:lin2004" in get_metric(name, variant="lin2004").signature()
        with pytest.raises((ValueError, MetricParamError), match="variant must be one of"):
            get_metric(name, variant="paper")


def test_rouge155_pools_references_like_f_a():
    # two references: hits and counts summed, the candidate count once per reference
    p, r, _ = values("rouge_s", ["a b c", "a c d"], "a b c", max_skip=4)
    # ref1 {ab, ac, bc} 3 hits of 3; ref2 {ac, ad, cd} 1 hit (ac) of 3; candidate 3 units per ref
    assert (p, r) == pytest.approx((4 / 6, 4 / 6))
    lin = values("rouge_s", ["a b c", "a c d"], "a b c", max_skip=4, variant="lin2004")
    assert lin == pytest.approx([1.0, 1.0, 1.0])  # best-F reference


# --------------------------------------------------------------------------- kind 3: Unicode tokenizer

MARK_PAIRS = [
    # (reference, candidate with one word differing only by combining marks), 3 words each
    ("मुझे पानी चाहिए", "मुझे पान चाहिए"),  # Devanagari vowel sign II (Mc)
    ("நான் கல் பார்த்தேன்", "நான் கல பார்த்தேன்"),  # Tamil virama (Mn)
    ("ฉัน กิน ไก่", "ฉัน กิน ไก"),  # Thai tone mark (Mn)
    ("هو كَتَبَ الدرس", "هو كُتُب الدرس"),  # Arabic harakat (Mn): kataba vs kutub
    (unicodedata.normalize("NFD", "le café noir"), "le cafe noir"),  # Latin NFD accent (Mn)
]


@pytest.mark.parametrize("reference,candidate", MARK_PAIRS)
def test_unicode_tokenizer_keeps_combining_marks_with_their_word(reference, candidate):
    p, r, f = values("rouge_1", reference, candidate, tokenizer="unicode")
    assert (p, r, f) == pytest.approx((2 / 3, 2 / 3, 2 / 3), abs=1e-9)
    assert values("rouge_1", reference, reference, tokenizer="unicode") == pytest.approx([1.0, 1.0, 1.0])


def test_unicode_tokenizer_normalises_nfd_to_nfc():
    nfd, nfc = unicodedata.normalize("NFD", "crème brûlée"), unicodedata.normalize("NFC", "crème brûlée")
    assert nfd != nfc
    assert values("rouge_1", nfc, nfd, tokenizer="unicode") == pytest.approx([1.0, 1.0, 1.0])
    from metric_ops.lexical.rouge.text import UnicodeTokenizer

    assert UnicodeTokenizer().tokenize("मुझे पानी, 我爱 ok!") == ["मुझे", "पानी", "我", "爱", "ok"]
    # a zero-width non-joiner inside a Persian word keeps it one token (UAX #29)
    assert UnicodeTokenizer().tokenize("من می\u200cخواهم") == ["من", "می\u200cخواهم"]


@pytest.mark.parametrize("name", ROUGES)
def test_every_rouge_variant_takes_the_tokenizer_options(name):
    ref, cand = MARK_PAIRS[0]
    m = get_metric(name, tokenizer="unicode", use_stemmer=True)
    assert "tokenizer:unicode" in m.signature() and "use_stemmer:yes" in m.signature()
    same = values(name, ref + " अभी", ref + " अभी", tokenizer="unicode")
    assert same[0] == pytest.approx(1.0)  # precision 1 (ROUGE-1.5.5's ROUGE-W recall of identical text is < 1)
    assert values(name, ref + " अभी", cand + " अभी", tokenizer="unicode")[2] < same[2] - 0.05
    with pytest.raises((ValueError, MetricParamError), match="tokenizer must be one of"):
        get_metric(name, tokenizer="whitespace")


# --------------------------------------------------------------------------- kind 2: nothing to measure


def test_rouge_l_of_chinese_under_default_tokenizer_is_unscored_with_rouge_score_value():
    for s in score("rouge_l", "今天天气很好", "今天天气很好"):
        assert s.status == "unscored" and s.value is None
        assert "no token" in s.detail["reason"] and "tokenizer=unicode" in s.detail["reason"]
        assert s.detail["rouge_score"] == 0.0
    assert values("rouge_l", "今天天气很好", "今天天气很好", tokenizer="unicode") == pytest.approx([1.0, 1.0, 1.0])


def test_rouge_2_without_bigrams_is_unscored():
    for s in score("rouge_2", "eight", "eight"):
        assert s.status == "unscored" and "bigram" in s.detail["reason"]
    assert score("rouge_2", "the number eight", "eight")[2].status == "unscored"  # candidate side
    assert score("rouge_2", "eight", "the number eight")[2].status == "unscored"  # reference side
    assert values("rouge_1", "eight", "eight") == [1.0, 1.0, 1.0]  # unigrams exist


EMPTY_CASES = [("", "the cat sat"), ("   ", "the cat sat"), ("the cat sat", ""), ("the cat sat", " \n "), ("!!!", "..."), ("the cat", "¿¡")]


@pytest.mark.parametrize("name", ROUGES)
@pytest.mark.parametrize("reference,candidate", EMPTY_CASES)
def test_no_tokens_on_either_side_is_unscored_for_every_variant(name, reference, candidate):
    scores = score(name, reference, candidate)
    assert all(s.status == "unscored" and "no token" in s.detail["reason"] for s in scores)


@pytest.mark.parametrize("name,unit", [("rouge_2", "bigram"), ("rouge_s", "skip-bigram")])
def test_one_token_texts_have_no_pair_units(name, unit):
    assert all(s.status == "unscored" and unit in s.detail["reason"] for s in score(name, "cat", "cat"))
    assert score(name, "the cat", "the cat")[2].value == 1.0


def test_rouge_su_one_token_reference_is_unscored_and_no_reference_is_unscored():
    assert score("rouge_su", "cat", "the cat")[0].status == "unscored"
    row = get_metric("rouge_1").score_batch([Sample("s", "")], ["the cat"])[0]
    assert row["rouge_1_f"].status == "unscored" and "no reference" in row["rouge_1_f"].detail["reason"]


def test_a_reference_without_tokens_is_skipped_among_several():
    p, r, f = score("rouge_l", ["", "the cat sat"], "the cat sat")
    assert f.value == 1.0 and f.detail["references_skipped"] == 1
    p, r, f = score("rouge_w", ["   ", "the cat sat"], "the cat sat", variant="lin2004")
    assert f.value == 1.0


# --------------------------------------------------------------------------- rouge-score rules without rouge-score (issue 14)


def _real_text_pairs() -> list[tuple[str, str]]:
    """SF-RES (reference, output) pairs, QAGS (article head, summary) pairs as multi-line
    texts, and edge cases: every kind of input the rouge-score rules branch on."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data" / "unieval"
    sfres = json.loads((root / "sfres.json").read_text())
    qags = json.loads((root / "qags_cnndm.json").read_text())
    pairs = [(d["reference"], d["system_output"]) for d in sfres[:600]]
    pairs += [(q["source"][:1500].replace(". ", ".\n"), q["system_output"].replace(". ", ".\n")) for q in qags[:120]]
    return pairs + [("", "a"), ("a", ""), ("!!!", "a b"), ("The the THE", "the"), ("x\n\ny", "y\nx"), ("a b a b", "b a b a")]


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_n_l_lsum_equal_rouge_score_bit_for_bit(use_stemmer):
    """metric_ops.lexical.rouge.ngram_lcs against rouge-score 0.1.2 itself, two references per
    pair (best F kept): tolerance 0, every P, R and F equal as floats."""
    from rouge_score import rouge_scorer

    from metric_ops.lexical.rouge.ngram_lcs import DefaultTokenizer, RougeScorer

    tokenizer = DefaultTokenizer(use_stemmer)
    pairs = _real_text_pairs()
    for rouge_type in ("rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum"):
        reference = rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer)
        mine = RougeScorer(rouge_type, tokenizer)
        for ref, out in pairs:
            refs = [ref, out[: len(out) // 2] or "z"]
            expected = reference.score_multi(refs, out)[rouge_type]
            assert tuple(mine.score_multi(refs, out)) == (expected.precision, expected.recall, expected.fmeasure), (rouge_type, ref, out)


def test_rouge_without_stemming_imports_neither_nltk_nor_rouge_score():
    """Importing NLTK (which rouge-score does at module level) costs 1-2 s per process:
    unstemmed ROUGE loads neither; stemmed ROUGE loads NLTK's Porter stemmer."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from metric_ops import Sample, get_metric\n"
        "for name in ('rouge_1', 'rouge_2', 'rouge_l', 'rouge_lsum', 'rouge_w', 'rouge_su'):\n"
        "    get_metric(name).score_batch([Sample('1', '', ('the cat sat',))], ['a cat sat'])\n"
        "print('nltk' in sys.modules, 'rouge_score' in sys.modules)\n"
        "get_metric('rouge_l', use_stemmer=True).score_batch([Sample('1', '', ('cats sitting',))], ['cat sits'])\n"
        "print('nltk' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True"]
