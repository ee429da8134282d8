"""Benchmark: the whole metric suite on 5,000 real pairs, facetlake vs a naive loop.

    python benchmarks/bench_metrics.py            # 5,000 pairs
    python benchmarks/bench_metrics.py --n 500    # a quicker run
    python benchmarks/bench_metrics.py --metrics bertscore,semantic_similarity

facetlake side: :func:`metric_ops.scoring.suite.score_suite` (lexical metrics over a process
pool, one model load, de-duplicated length-sorted batches shared by BERTScore and
semantic similarity). Naive side: a per-pair loop over the reference libraries
(sacrebleu, nltk, rouge-score, bert-score's ``BERTScorer`` loaded once,
sentence-transformers loaded once, the official SQuAD v2 functions); ROUGE-W/S/SU have
no reference library, so both sides run facetlake's functions for them. Both run in this
process, one after the other; the table gives each metric's time on both sides, the
ratio and the largest absolute difference of the values.

Pairs (all real, from data/): SF-RES system output vs human reference (1,181), QAGS-CNNDM
summary vs source article (235), SelfAware stand-in answers vs gold answers (answerable
questions), HaluEval ChatGPT responses vs the user query (to fill up to --n).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metric_ops import Sample  # noqa: E402
from pipelines.crossval.compare import Case  # noqa: E402

SUITE = {
    "bleu": ("bleu", {}),
    "corpus_bleu": ("corpus_bleu", {}),
    "nltk_bleu": ("nltk_bleu", {"smoothing": 1}),
    "chrf": ("chrf", {}),
    "chrf_pp": ("chrf_pp", {}),
    "rouge_1": ("rouge_1", {}),
    "rouge_2": ("rouge_2", {}),
    "rouge_l": ("rouge_l", {}),
    "rouge_lsum": ("rouge_lsum", {}),
    "rouge_w": ("rouge_w", {}),
    "rouge_s": ("rouge_s", {}),
    "rouge_su": ("rouge_su", {}),
    "meteor": ("meteor", {}),
    "exact_match": ("exact_match", {}),
    "quasi_exact_match": ("quasi_exact_match", {}),
    "token_f1": ("token_f1", {}),
    "bertscore": ("bertscore", {}),
    "semantic_similarity": ("semantic_similarity", {}),
}


def load_pairs(n: int) -> list[Case]:
    from pipelines.crossval.run import DEFAULT_DATA_DIR, real_cases

    real = real_cases(selfaware_limit=100_000)
    cases = [*real["sfres"], *real["qags"], *real["selfaware"]]
    halu = DEFAULT_DATA_DIR / "halueval" / "general_data.jsonl"
    for line in halu.read_text(encoding="utf-8").splitlines():
        if len(cases) >= n:
            break
        row = json.loads(line)
        cases.append(Case(row["chatgpt_response"], (row["user_query"],), "halueval"))
    return cases[:n]


def naive(cases: list[Case]) -> tuple[dict[str, list[list[float]]], dict[str, float]]:
    """Per-pair loop over the reference libraries; returns (values, seconds) per metric."""
    import sacrebleu
    from bert_score import BERTScorer
    from nltk.corpus import wordnet
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import CHRF
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sentence_transformers import SentenceTransformer
    from tqdm.auto import tqdm

    from pipelines.crossval import crossval as cv
    from metric_ops.neural.embeddings import default_model_path
    from metric_ops.lexical.meteor import load_wordnet
    from metric_ops.lexical.rouge import make_tokenizer, rouge_s_pooled, rouge_w_155

    load_wordnet()
    path = default_model_path()
    tok13a, nltk_tok, rtok = Tokenizer13a(), NLTKWordTokenizer(), make_tokenizer()
    smooth = SmoothingFunction().method1
    chrfpp = CHRF(word_order=2)
    scorers = {t: rouge_scorer.RougeScorer([t]) for t in ("rouge1", "rouge2", "rougeL", "rougeLsum")}
    with contextlib.redirect_stderr(io.StringIO()):
        bert = BERTScorer(model_type=path, num_layers=6, device="cpu")
    cv._patch_bert_score_tokenizer(bert._tokenizer)
    st = SentenceTransformer(path, device="cpu")

    def lines(text):
        return [t for t in (rtok.tokenize(line) for line in text.split("\n")) if t]

    def bleu_nltk(h, refs):
        hyp = tok13a(h.strip()).split()
        rr = [t for t in (tok13a(r.strip()).split() for r in refs) if t]
        return float(sentence_bleu(rr, hyp, smoothing_function=smooth)) if hyp and rr else 0.0

    def bscore(h, refs):
        with contextlib.redirect_stderr(io.StringIO()):
            p, r, f = bert.score([h], [list(refs)])
        return [float(p[0]), float(r[0]), float(f[0])]

    def semsim(h, refs):
        e = st.encode([h, *refs], convert_to_tensor=True, show_progress_bar=False)
        return [max(float(e[0] @ e[k]) for k in range(1, len(refs) + 1))]

    def rs(t):
        return lambda h, refs: (lambda s: [s.precision, s.recall, s.fmeasure])(scorers[t].score_multi(list(refs), h)[t])

    per_pair = {
        "bleu": lambda h, refs: [sacrebleu.sentence_bleu(h, list(refs)).score],
        "nltk_bleu": lambda h, refs: [bleu_nltk(h, refs)],
        "chrf": lambda h, refs: [sacrebleu.sentence_chrf(h, list(refs)).score],
        "chrf_pp": lambda h, refs: [chrfpp.sentence_score(h, list(refs)).score],
        "rouge_1": rs("rouge1"),
        "rouge_2": rs("rouge2"),
        "rouge_l": rs("rougeL"),
        "rouge_lsum": rs("rougeLsum"),
        # ROUGE-1.5.5 variant (facetlake's default): references pooled, ROUGE-W per line
        "rouge_w": lambda h, refs: list(rouge_w_155([lines(r) for r in refs], lines(h), 1.2)),
        "rouge_s": lambda h, refs: list(rouge_s_pooled([rtok.tokenize(r) for r in refs], rtok.tokenize(h), 4, False)),
        "rouge_su": lambda h, refs: list(rouge_s_pooled([rtok.tokenize(r) for r in refs], rtok.tokenize(h), 4, True)),
        "meteor": lambda h, refs: [float(meteor_score([nltk_tok.tokenize(r) for r in refs], nltk_tok.tokenize(h), wordnet=wordnet))],
        "exact_match": lambda h, refs: [float(max(cv._official_compute_exact(g, h) for g in cv._official_golds(refs)))],
        "quasi_exact_match": lambda h, refs: [float(max(cv._reference_contains(g, h) for g in cv._official_golds(refs)))],
        "token_f1": lambda h, refs: [float(max(cv._official_compute_f1(g, h) for g in cv._official_golds(refs)))],
        "bertscore": bscore,
        "semantic_similarity": semsim,
    }
    values: dict[str, list[list[float]]] = {}
    seconds: dict[str, float] = {}
    if "corpus_bleu" in SUITE:
        t = time.perf_counter()
        values["corpus_bleu"] = [[sacrebleu.corpus_bleu([c.prediction for c in cases], cv_streams(cases)).score]]
        seconds["corpus_bleu"] = time.perf_counter() - t
    per_pair = {k: fn for k, fn in per_pair.items() if k in SUITE}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in tqdm(per_pair.items(), desc="naive loop", unit="metric", file=sys.stderr):
            t = time.perf_counter()
            values[name] = [fn(c.prediction, c.references) for c in cases]
            seconds[name] = time.perf_counter() - t
    return values, seconds


def cv_streams(cases: list[Case]) -> list[list[str | None]]:
    width = max(len(c.references) for c in cases)
    return [[c.references[k] if k < len(c.references) else None for c in cases] for k in range(width)]


SCORE_NAMES = {
    "bertscore": ("bertscore_precision", "bertscore_recall", "bertscore_f1"),
    **{m: (f"{m}_precision", f"{m}_recall", f"{m}_f") for m in ("rouge_1", "rouge_2", "rouge_l", "rouge_lsum", "rouge_w", "rouge_s", "rouge_su")},
}


def facetlake(
    cases: list[Case], workers: int | None
) -> tuple[dict[str, list[list[float]]], dict[str, list[list[float]]], float]:
    """(values, error magnifications, seconds): the magnification of a value is 1, or the
    ``f1_condition`` facetlake records on an ill-conditioned BERTScore F."""
    from metric_ops.scoring.suite import score_suite

    samples = [Sample(str(i), "", c.references) for i, c in enumerate(cases)]
    t = time.perf_counter()
    results = score_suite(SUITE, samples, [c.prediction for c in cases], workers=workers)
    elapsed = time.perf_counter() - t
    values, scales = {}, {}
    for key, rows in results.items():
        names = SCORE_NAMES.get(key, (key,))
        vals = [[row[n].value if row[n].status == "scored" else math.nan for n in names] for row in rows]
        kappa = [[max(1.0, float(row[n].detail.get("f1_condition", 1.0))) for n in names] for row in rows]
        values[key] = vals[:1] if key == "corpus_bleu" else vals
        scales[key] = kappa[:1] if key == "corpus_bleu" else kappa
    return values, scales, elapsed


def facetlake_per_metric_times(cases: list[Case], workers: int | None) -> dict[str, float]:
    """Seconds per metric on the facetlake side (each metric alone through score_suite;
    the two neural metrics are timed together from a cold cache since they share it)."""
    from metric_ops.neural.embeddings import get_encoder
    from metric_ops.scoring.suite import score_suite

    samples = [Sample(str(i), "", c.references) for i, c in enumerate(cases)]
    outputs = [c.prediction for c in cases]
    times = {}
    for key, spec in SUITE.items():
        if key in ("bertscore", "semantic_similarity"):
            continue
        t = time.perf_counter()
        score_suite({key: spec}, samples, outputs, workers=workers, progress=False)
        times[key] = time.perf_counter() - t
    get_encoder(None).clear_cache()
    for key in [k for k in ("bertscore", "semantic_similarity") if k in SUITE]:
        t = time.perf_counter()
        score_suite({key: SUITE[key]}, samples, outputs, workers=workers, progress=False)
        times[key] = time.perf_counter() - t
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="number of real pairs (default 5000)")
    parser.add_argument("--workers", type=int, default=None, help="processes for lexical metrics (default: all cores)")
    parser.add_argument(
        "--metrics",
        default=None,
        help=f"comma-separated subset of the suite (default: all of {', '.join(SUITE)})",
    )
    args = parser.parse_args()
    if args.metrics:
        chosen = [m.strip() for m in args.metrics.split(",") if m.strip()]
        unknown = [m for m in chosen if m not in SUITE]
        if unknown:
            parser.error(f"unknown metric(s) {', '.join(unknown)}; choose from {', '.join(SUITE)}")
        for key in [k for k in SUITE if k not in chosen]:
            del SUITE[key]

    cases = load_pairs(args.n)
    sources: dict[str, int] = {}
    for c in cases:
        sources[c.source] = sources.get(c.source, 0) + 1
    print(f"{len(cases)} real pairs: " + ", ".join(f"{k} {v}" for k, v in sources.items()), flush=True)
    print(f"cores: {os.cpu_count()}", flush=True)

    ours, kappas, ours_total = facetlake(cases, args.workers)
    from metric_ops.neural.embeddings import get_encoder

    get_encoder(None).clear_cache()
    per_metric = facetlake_per_metric_times(cases, args.workers)
    theirs, their_times = naive(cases)
    naive_total = sum(their_times.values())

    print()
    print("| metric | facetlake s | naive loop s | ratio | max abs diff | max scaled diff |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    worst_all, worst_scaled_all, conditioned = 0.0, 0.0, 0
    for key in SUITE:
        a, b, k = ours[key], theirs[key], kappas[key]
        diffs = [
            (abs(x - y), kappa)
            for ra, rb, rk in zip(a, b, k)
            for x, y, kappa in zip(ra, rb, rk)
            if not (math.isnan(x) and math.isnan(y))
        ]
        worst = max((d for d, _ in diffs), default=0.0)
        worst_scaled = max((d / kappa for d, kappa in diffs), default=0.0)
        conditioned += sum(kappa > 1.0 for _, kappa in diffs)
        worst_all, worst_scaled_all = max(worst_all, worst), max(worst_scaled_all, worst_scaled)
        ratio = their_times[key] / per_metric[key] if per_metric[key] > 0 else math.inf
        print(f"| {key} | {per_metric[key]:.2f} | {their_times[key]:.2f} | {ratio:.2g}x | {worst:.2e} | {worst_scaled:.2e} |")
    print(
        f"| **whole suite (one score_suite call)** | **{ours_total:.1f}** | **{naive_total:.1f}** | "
        f"**{naive_total / ours_total:.1f}x** | **{worst_all:.2e}** | **{worst_scaled_all:.2e}** |"
    )
    print()
    print("Per-metric facetlake times are each metric run alone (process pool start-up included);")
    print("the whole-suite row is one score_suite call over all metrics. Scaled diff = |diff| / kappa,")
    print("kappa = the f1_condition facetlake records on a BERTScore F whose P and R have opposite signs")
    print(f"(F = 2PR/(P+R) magnifies float32 rounding there; {conditioned} such values), else 1.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
