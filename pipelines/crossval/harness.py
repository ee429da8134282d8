"""Cross-validation of facetlake's metrics against the field's reference implementations.

Pure functions (no Dagster, no Delta, no file reading): the caller supplies the cases
(``pipelines/crossval/run.py`` builds them from the real data in ``data/``). The reference
libraries (sacrebleu, nltk, rouge-score, bert-score, sentence-transformers) are imported
lazily inside the reference functions: ``bert_score`` is a test-only dependency and is
never needed to *use* facetlake.

:func:`crossvalidate` scores every case with facetlake and with the reference and returns
one row per variant: ``variant, cases, real_cases, sources, max_abs_error,
max_scaled_error, tolerance, passed, reference, reference_version``. :func:`report_markdown` renders those rows.
ROUGE-W/S/SU have no Python reference: they are checked against the ROUGE-1.5.5 Perl
script's known answers and hand-worked examples (pipelines/crossval/rouge.py), and the
report says so.
"""

from __future__ import annotations

import collections
import contextlib
import io
import math
import re
import string
import sys
import warnings
from typing import Any, Callable, Sequence

from pipelines.crossval.rouge import known_answer_rows, known_answer_section, worked_example_rows
from pipelines.crossval.compare import LEXICAL_TOLERANCE, NEURAL_TOLERANCE, Case, Variant, _left_out, compare

# --------------------------------------------------------------------------- edge cases


def edge_cases(long_text: str = "") -> list[Case]:
    """Hand-made edge cases: empty and whitespace-only sides, a single token, identical
    strings, CJK and accented text, punctuation only, multi-line text, several
    references, and a very long text (``long_text`` repeated past 512 model tokens)."""
    long = (long_text or "The quick brown fox jumps over the lazy dog near the river bank. ") * 1
    while len(long.split()) < 1200:
        long = long + " " + long
    pairs: list[tuple[str, tuple[str, ...]]] = [
        ("", ("the cat sat on the mat",)),
        ("   ", ("the cat sat on the mat",)),
        ("the cat sat on the mat", ("",)),
        ("the cat sat on the mat", ("   ",)),
        ("", ("",)),
        ("yes", ("yes",)),
        ("yes", ("no",)),
        ("Paris", ("paris", "Paris, France")),
        ("the cat sat on the mat", ("the cat sat on the mat",)),
        ("我爱北京天安门", ("我爱北京天安门",)),
        ("我爱北京天安门", ("我爱北京",)),
        ("café crème brûlée à la française", ("cafe creme brulee a la francaise",)),
        ("Ça va très bien, merci.", ("Ça va bien, merci beaucoup.",)),
        ("!!!", ("...",)),
        ("First sentence here.\nSecond one follows.", ("First sentence.\nThe second one follows here.",)),
        ("It was the best of times. It was the worst of times.", ("It was the best of times, it was the worst.",)),
        ("a b c d e f g", ("a b c d h i k", "a h b k c i d")),
        ("The answer is 42.", ("42", "forty-two")),
        (long, (long[: len(long) // 3],)),
        (long[: len(long) // 2], (long,)),
    ]
    return [Case(p, r, "edge", real=False) for p, r in pairs]


# --------------------------------------------------------------------------- SQuAD v2 reference

# The official SQuAD v2.0 evaluation script (evaluate-v2.0.py, Rajpurkar et al., 2018),
# functions copied verbatim; used only as the reference for cross-validation.


def _official_normalize_answer(s: str) -> str:
    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def _official_get_tokens(s: str) -> list[str]:
    if not s:
        return []
    return _official_normalize_answer(s).split()


def _official_compute_exact(a_gold: str, a_pred: str) -> int:
    return int(_official_normalize_answer(a_gold) == _official_normalize_answer(a_pred))


def _official_compute_f1(a_gold: str, a_pred: str) -> float:
    gold_toks = _official_get_tokens(a_gold)
    pred_toks = _official_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def _official_golds(references: Sequence[str]) -> list[str]:
    # get_raw_scores: gold answers that normalise to nothing are dropped; none -> ['']
    golds = [a for a in references if _official_normalize_answer(a)]
    return golds or [""]


def _reference_contains(gold: str, pred: str) -> float:
    g, p = _official_normalize_answer(gold), _official_normalize_answer(pred)
    if not g or not p:
        return float(g == p)
    return float(f" {g} " in f" {p} ")


# --------------------------------------------------------------------------- variants


def _sacrebleu_sentence(kind: str, **opts: Any) -> Callable[[Sequence[Case]], list[list[float]]]:
    def run(cases: Sequence[Case]) -> list[list[float]]:
        import sacrebleu

        fn = {"bleu": sacrebleu.sentence_bleu, "chrf": sacrebleu.sentence_chrf}[kind]
        return [[fn(c.prediction, list(c.references), **opts).score] for c in cases]

    return run


def _sacrebleu_corpus(cases: Sequence[Case]) -> list[list[float]]:
    import sacrebleu

    width = max(len(c.references) for c in cases)
    streams = [[c.references[k] if k < len(c.references) else None for c in cases] for k in range(width)]
    return [[sacrebleu.corpus_bleu([c.prediction for c in cases], streams).score]]


def _sacrebleu_corpus_chrf(word_order: int) -> Callable[[Sequence[Case]], list[list[float]]]:
    def run(cases: Sequence[Case]) -> list[list[float]]:
        from sacrebleu.metrics import CHRF

        width = max(len(c.references) for c in cases)
        streams = [[c.references[k] if k < len(c.references) else None for c in cases] for k in range(width)]
        return [[CHRF(word_order=word_order).corpus_score([c.prediction for c in cases], streams).score]]

    return run


def _nltk_bleu(smoothing: int) -> Callable[[Sequence[Case]], list[list[float]]]:
    def run(cases: Sequence[Case]) -> list[list[float]]:
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

        tok = Tokenizer13a()
        smooth = getattr(SmoothingFunction(), f"method{smoothing}")
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for c in cases:
                hyp = tok(c.prediction.strip()).split()
                refs = [t for t in (tok(r.strip()).split() for r in c.references) if t]
                try:
                    out.append([float(sentence_bleu(refs, hyp, smoothing_function=smooth)) if hyp and refs else 0.0])
                except AssertionError:  # method6 without a bigram match
                    out.append([math.nan])
        return out

    return run


def _rouge_score(rouge_type: str, use_stemmer: bool = False, split: str = "newline") -> Callable[[Sequence[Case]], list[list[float]]]:
    def run(cases: Sequence[Case]) -> list[list[float]]:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer)
        prep = (lambda t: t) if split == "newline" else (lambda t: "\n".join(s for line in t.split("\n") for s in re.split(r"(?<=[.!?])\s+", line)))
        out = []
        for c in cases:
            s = scorer.score_multi([prep(r) for r in c.references], prep(c.prediction))[rouge_type]
            out.append([s.precision, s.recall, s.fmeasure])
        return out

    return run


def _nltk_meteor(cases: Sequence[Case], whitespace: bool = False) -> list[list[float]]:
    from nltk.corpus import wordnet
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.meteor_score import meteor_score

    from metric_ops.lexical.meteor import load_wordnet

    load_wordnet()  # puts the repository's .nltk_data on NLTK's path when needed
    split = str.split if whitespace else NLTKWordTokenizer().tokenize
    return [[float(meteor_score([split(r) for r in c.references], split(c.prediction), wordnet=wordnet))] for c in cases]


def _nltk_meteor_whitespace(cases: Sequence[Case]) -> list[list[float]]:
    return _nltk_meteor(cases, whitespace=True)


def _squad(kind: str) -> Callable[[Sequence[Case]], list[list[float]]]:
    fn = {"exact": _official_compute_exact, "f1": _official_compute_f1, "contains": _reference_contains}[kind]

    def run(cases: Sequence[Case]) -> list[list[float]]:
        return [[float(max(fn(g, c.prediction) for g in _official_golds(c.references)))] for c in cases]

    return run


def _with_specials(cls_id: int, sep_id: int, ids: Sequence[int]) -> list[int]:
    return [cls_id, *ids, sep_id]


def _patch_bert_score_tokenizer(tokenizer: Any) -> None:
    # bert_score 0.3.13 encodes an empty sentence with tokenizer.build_inputs_with_special_tokens([]),
    # which transformers 5 tokenizers no longer have. Give the reference the transformers 4
    # behaviour ([CLS] [SEP] for BERT) so its own empty-input path can run. A partial of a
    # module-level function stays picklable (bert_score's idf code pickles the tokenizer).
    import functools

    if not hasattr(tokenizer, "build_inputs_with_special_tokens"):
        object.__setattr__(
            tokenizer, "build_inputs_with_special_tokens", functools.partial(_with_specials, tokenizer.cls_token_id, tokenizer.sep_token_id)
        )


def bert_score_reference(
    cases: Sequence[Case], model_path: str, num_layers: int, idf: bool = False, baseline: Sequence[float] | None = None
) -> list[list[float]]:
    """The reference library (bert-score, test-only) on the cases: (P, R, F) per case,
    best reference per component.

    One ``bert_score.BERTScorer`` (one model load, local model folder and layer) scores
    each case on its own -- ``scorer.score([prediction], [references])`` -- because that
    is the value facetlake reproduces: bert-score called on a whole corpus also pads
    across cases, and for pairs with negative token cosines its numbers then depend on
    which cases share a batch. With ``idf`` the idf table comes from bert-score's own
    ``compute_idf`` over every case's references (what facetlake computes over the
    cases scored together). With ``baseline`` it is written to a temporary bert-score
    baseline file (row = layer) and ``rescale_with_baseline=True, lang="en"`` is used.
    """
    import os
    import tempfile

    from bert_score import BERTScorer

    tmp = None
    try:
        kwargs: dict[str, Any] = {}
        if baseline is not None:
            fd, tmp = tempfile.mkstemp(suffix=".tsv")
            with os.fdopen(fd, "w") as fh:
                fh.write("LAYER,P,R,F\n")
                for layer in range(num_layers + 1):
                    fh.write(f"{layer},{baseline[0]},{baseline[1]},{baseline[2]}\n")
            kwargs = {"rescale_with_baseline": True, "lang": "en", "baseline_path": tmp}
        with contextlib.redirect_stderr(io.StringIO()):
            # nthreads=0: idf counting without bert-score's fork Pool (forking a process
            # that holds torch/tokenizer threads can deadlock; seen hanging in the suite)
            scorer = BERTScorer(model_type=model_path, num_layers=num_layers, idf=idf, nthreads=0, device="cpu", **kwargs)
        _patch_bert_score_tokenizer(scorer._tokenizer)
        if idf:
            scorer.compute_idf([r for c in cases for r in c.references])
        out = []
        for c in cases:
            with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p, r, f = scorer.score([c.prediction], [list(c.references)])
            out.append([float(p[0]), float(r[0]), float(f[0])])
        return out
    finally:
        if tmp:
            os.unlink(tmp)


def _bert_score(idf: bool = False, baseline: Sequence[float] | None = None) -> Callable[[Sequence[Case]], list[list[float]]]:
    def run(cases: Sequence[Case]) -> list[list[float]]:
        from metric_ops.neural.embeddings import get_encoder

        enc = get_encoder(None)
        return bert_score_reference(cases, enc.path, enc.num_layers, idf=idf, baseline=baseline)

    return run


def _sentence_transformers(cases: Sequence[Case]) -> list[list[float]]:
    from sentence_transformers import SentenceTransformer

    from metric_ops.neural.embeddings import default_model_path

    model = SentenceTransformer(default_model_path(), device="cpu")
    texts = list(dict.fromkeys([*(c.prediction for c in cases), *(r for c in cases for r in c.references)]))
    emb = model.encode(texts, batch_size=64, convert_to_tensor=True, normalize_embeddings=False, show_progress_bar=False)
    index = {t: i for i, t in enumerate(texts)}
    return [[max(float(emb[index[c.prediction]] @ emb[index[r]]) for r in c.references)] for c in cases]


EXAMPLE_BASELINE = (0.25, 0.25, 0.25)


def variants() -> list[Variant]:
    """Every cross-validated variant with its reference."""
    prf = lambda n: (f"{n}_precision", f"{n}_recall", f"{n}_f")  # noqa: E731
    v = [
        Variant("bleu (sacrebleu sentence)", "bleu", {}, ("bleu",), _sacrebleu_sentence("bleu"), "sacrebleu", "sacrebleu.sentence_bleu"),
        Variant("corpus_bleu (sacrebleu corpus)", "corpus_bleu", {}, ("corpus_bleu",), _sacrebleu_corpus, "sacrebleu", "sacrebleu.corpus_bleu", corpus=True),
    ]
    for k in range(8):
        v.append(
            Variant(f"nltk_bleu smoothing={k}", "nltk_bleu", {"smoothing": k}, ("nltk_bleu",), _nltk_bleu(k), "nltk", "nltk.translate.bleu_score.sentence_bleu")
        )
    v += [
        Variant("chrf", "chrf", {}, ("chrf",), _sacrebleu_sentence("chrf"), "sacrebleu", "sacrebleu.sentence_chrf"),
        Variant("chrf_pp (chrF++)", "chrf_pp", {}, ("chrf_pp",), _sacrebleu_sentence("chrf", word_order=2), "sacrebleu", "sacrebleu.sentence_chrf(word_order=2)"),
        Variant("corpus_chrf (sacrebleu corpus)", "corpus_chrf", {}, ("corpus_chrf",), _sacrebleu_corpus_chrf(0), "sacrebleu",
                "sacrebleu CHRF().corpus_score", corpus=True),
        Variant("corpus_chrf_pp (sacrebleu corpus chrF++)", "corpus_chrf_pp", {}, ("corpus_chrf_pp",), _sacrebleu_corpus_chrf(2),
                "sacrebleu", "sacrebleu CHRF(word_order=2).corpus_score", corpus=True),
        Variant("rouge_1", "rouge_1", {}, prf("rouge_1"), _rouge_score("rouge1"), "rouge-score", "RougeScorer(['rouge1']).score_multi"),
        Variant("rouge_2", "rouge_2", {}, prf("rouge_2"), _rouge_score("rouge2"), "rouge-score", "RougeScorer(['rouge2']).score_multi"),
        Variant("rouge_l", "rouge_l", {}, prf("rouge_l"), _rouge_score("rougeL"), "rouge-score", "RougeScorer(['rougeL']).score_multi"),
        Variant("rouge_l use_stemmer", "rouge_l", {"use_stemmer": True}, prf("rouge_l"), _rouge_score("rougeL", True), "rouge-score", "RougeScorer(['rougeL'], use_stemmer=True)"),
        Variant("rouge_lsum", "rouge_lsum", {}, prf("rouge_lsum"), _rouge_score("rougeLsum"), "rouge-score", "RougeScorer(['rougeLsum']).score_multi"),
        Variant(
            "rouge_lsum sentence_split=punctuation",
            "rouge_lsum",
            {"sentence_split": "punctuation", "use_stemmer": True},
            prf("rouge_lsum"),
            _rouge_score("rougeLsum", True, "punctuation"),
            "rouge-score",
            "RougeScorer(['rougeLsum'], use_stemmer=True) on pre-split text",
        ),
        Variant("meteor", "meteor", {}, ("meteor",), _nltk_meteor, "nltk", "nltk.translate.meteor_score.meteor_score + WordNet 3.0"),
        Variant("meteor tokenizer=whitespace", "meteor", {"tokenizer": "whitespace"}, ("meteor",), _nltk_meteor_whitespace, "nltk",
                "nltk meteor_score on str.split() tokens + WordNet 3.0"),
        Variant("exact_match", "exact_match", {}, ("exact_match",), _squad("exact"), "squad-v2", "evaluate-v2.0.py compute_exact, max over golds"),
        Variant("token_f1", "token_f1", {}, ("token_f1",), _squad("f1"), "squad-v2", "evaluate-v2.0.py compute_f1, max over golds"),
        Variant(
            "quasi_exact_match", "quasi_exact_match", {}, ("quasi_exact_match",), _squad("contains"), "squad-v2",
            "evaluate-v2.0.py normalize_answer + padded substring test",
        ),
        Variant("bertscore", "bertscore", {}, ("bertscore_precision", "bertscore_recall", "bertscore_f1"), _bert_score(), "bert-score",
                "BERTScorer(model_type=<packaged MiniLM>, num_layers=6).score, one case per call", neural=True),
        Variant("bertscore idf rescaled", "bertscore", {"idf": True, "baseline": EXAMPLE_BASELINE},
                ("bertscore_precision", "bertscore_recall", "bertscore_f1"), _bert_score(idf=True, baseline=EXAMPLE_BASELINE),
                "bert-score", "BERTScorer(..., idf=True, rescale_with_baseline=True, baseline_path=<file>), compute_idf(all references), one case per call", neural=True,
                note=f"idf over all references; baseline {EXAMPLE_BASELINE} (illustrative; bert-score ships none for MiniLM)"),
        Variant("semantic_similarity", "semantic_similarity", {}, ("semantic_similarity",), _sentence_transformers, "sentence-transformers",
                "SentenceTransformer(<packaged MiniLM>).encode + dot of normalised embeddings", neural=True),
    ]
    return v


def crossvalidate(
    cases: Sequence[Case],
    neural_cases: Sequence[Case] | None = None,
    only: Sequence[str] | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Cross-validate every variant (or those whose name is in ``only``).

    Lexical variants run on ``cases``; neural variants (BERTScore, semantic similarity)
    on ``neural_cases`` (default: ``cases``), so long real inputs can be thinned for the
    neural models. Returns one row per variant plus the ROUGE-W/S/SU worked-example rows.
    """
    chosen = [v for v in variants() if only is None or v.name in only or v.metric in only]
    rows = []
    iterator: Any = chosen
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(chosen, desc="cross-validation (library references)", unit="variant", file=sys.stderr)
    for variant in iterator:
        subset = neural_cases if (variant.neural and neural_cases is not None) else cases
        rows.append(compare(variant, subset))
    if only is None or any(n in only for n in ("rouge_w", "rouge_s", "rouge_su")):
        rows += worked_example_rows()
        rows += known_answer_rows()  # ROUGE-1.5.5 (the Perl script's) known answers on real pairs
    return rows


def report_markdown(rows: Sequence[dict[str, Any]], command: str = "facetlake crossval") -> str:
    """The cross-validation report as Markdown (one table row per variant)."""
    ok = all(r["passed"] for r in rows)
    lines = [
        "# facetlake metric cross-validation",
        "",
        f"Regenerate with `{command}`. Every variant is scored by facetlake and by its reference",
        "implementation on the same cases; the table gives the largest absolute difference over all",
        f"cases and emitted scores. Tolerances: {LEXICAL_TOLERANCE:g} for lexical metrics, {NEURAL_TOLERANCE:g} for",
        "BERTScore and semantic similarity. ROUGE-W, ROUGE-S and ROUGE-SU have no Python reference",
        "implementation: they are checked against the ROUGE-1.5.5 Perl script's known answers on real pairs",
        "(the section at the end) and against hand-worked examples for both variants (rouge155, lin2004).",
        "The neural variants run on fewer QAGS articles than the lexical ones (see *sources*): an article",
        "(cut at 512 tokens, which these cases exercise) costs the CPU time of about 50 short pairs.",
        "",
        "BERTScore is compared with bert-score called on one case at a time (one candidate with its",
        "references), the value facetlake stores per sample; bert-score called on a whole corpus also pads",
        "across cases, which changes its numbers for pairs with negative token cosines. BERTScore P and R",
        "are held to the plain tolerance. F = 2PR/(P+R) magnifies float32 rounding in P and R by",
        "kappa = 2(P^2+R^2)/(P+R)^2 (at most 2 while P, R >= 0, unbounded when they have opposite signs);",
        "where kappa > 2 facetlake records it as the F score's `detail[\"f1_condition\"]` and that F is held to",
        "tolerance x kappa. *max scaled error* is the largest |difference| / kappa; *max abs error* the raw one.",
        "",
        "Values are compared only where both sides define one. *left out* counts the cases that were",
        "not compared and says why: facetlake records them `unscored` (nothing to measure, e.g. an empty",
        "or whitespace-only reference, where the library returns a placeholder 0), or the library's value",
        "is undefined (NaN) where facetlake records an error. A case where only one side is undefined is",
        "a mismatch, not left out.",
        "",
        f"Overall: **{'PASS' if ok else 'FAIL'}** ({sum(r['passed'] for r in rows)}/{len(rows)} variants within tolerance).",
        "",
        "| variant | cases | real cases | left out | sources | max abs error | max scaled error | tolerance | pass | reference | version |",
        "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | :---: | --- | --- |",
    ]
    for r in rows:
        note = f" ({r['note']})" if r.get("note") else ""
        lines.append(
            f"| {r['variant']} | {r['cases']} | {r['real_cases']} | {_left_out(r)} | {r['sources']} | {r['max_abs_error']:.3g} | {r['max_scaled_error']:.3g} | {r['tolerance']:g} | "
            f"{'yes' if r['passed'] else 'NO'} | {r['reference']}{note} | {r['reference_version']} |"
        )
    lines.append("")
    lines += known_answer_section(rows)
    return "\n".join(lines)
