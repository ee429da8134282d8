"""BLEU variants beyond sentence BLEU, and chrF / chrF++.

- ``corpus_bleu``: corpus BLEU through sacrebleu (Papineni et al., 2002; Post, 2018),
  with the reference shape checked (:func:`reference_streams`) so a per-sample
  reference list is never silently read as extra reference streams.
- ``nltk_bleu``: the NLTK-style sentence BLEU (``nltk.translate.bleu_score.sentence_bleu``)
  with its smoothing methods (Chen & Cherry, 2014), a separately named variant.
- ``chrf`` / ``chrf_pp``: character n-gram F-score (Popovic, 2015) and chrF++ (Popovic,
  2017, word bigrams added) through sacrebleu.

The sentence-level sacrebleu BLEU is ``bleu`` in :mod:`metric_ops.lexical.squad`.
"""

from __future__ import annotations

import warnings

from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.lexical.squad import SacrebleuSentenceMetric

# --------------------------------------------------------------------------- shapes


def reference_streams(n_hypotheses: int, references: Sequence[Any]) -> list[list[str | None]]:
    """Transpose per-sample references into sacrebleu's reference streams.

    Args:
        n_hypotheses: number of hypotheses (segments) in the corpus.
        references: one entry per hypothesis, in hypothesis order; each entry is a string
            (one reference) or a non-empty sequence of strings (several references).
            Samples may have different numbers of references.

    Returns:
        ``streams[k][i]`` = the k-th reference of sample i, ``None`` where sample i has
        fewer than k+1 references (sacrebleu skips ``None``).

    Raises:
        ValueError: ``len(references) != n_hypotheses`` (e.g. sacrebleu-style streams were
            passed where per-sample lists are expected), or a sample has no reference.
        TypeError: an entry is neither a string nor a sequence of strings.
    """
    if isinstance(references, str):
        raise TypeError("references must be a list with one entry per hypothesis, not a bare string")
    if len(references) != n_hypotheses:
        raise ValueError(
            f"got {n_hypotheses} hypotheses but {len(references)} reference entries; pass one entry "
            "per hypothesis (a string or a list of that hypothesis's references), not "
            "sacrebleu-style reference streams"
        )
    per_sample: list[list[str]] = []
    for i, entry in enumerate(references):
        refs = [entry] if isinstance(entry, str) else list(entry)
        if not refs:
            raise ValueError(f"hypothesis {i} has no reference; give at least one (\"\" is allowed)")
        if not all(isinstance(r, str) for r in refs):
            raise TypeError(f"references of hypothesis {i} must be strings, got {[type(r).__name__ for r in refs]}")
        per_sample.append(refs)
    width = max((len(r) for r in per_sample), default=1)
    return [[refs[k] if k < len(refs) else None for refs in per_sample] for k in range(width)]


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[Any],
    tokenize: str = "13a",
    lowercase: bool = False,
    smooth_method: str = "exp",
) -> Any:
    """Corpus BLEU through sacrebleu's ``BLEU.corpus_score``.

    Args:
        hypotheses: N hypothesis strings ("" allowed: it adds no n-grams).
        references: N entries, one per hypothesis: a string or a list of strings
            (see :func:`reference_streams`; shape mismatches raise ``ValueError``).
        tokenize, lowercase, smooth_method: sacrebleu ``BLEU`` settings.

    Returns:
        sacrebleu's ``BLEUScore`` (``.score`` on the 0-100 scale); its signature is
        ``BLEU(...).get_signature()``. An empty corpus raises ``ValueError``.
    """
    from sacrebleu.metrics import BLEU

    hyps = list(hypotheses)
    if not hyps:
        raise ValueError("corpus BLEU needs at least one hypothesis")
    streams = reference_streams(len(hyps), references)
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
    return bleu.corpus_score(hyps, streams)


class CorpusBLEU(Metric):
    """Corpus BLEU through sacrebleu (Papineni et al., 2002; Post, 2018).

    Corpus-level (``corpus_level = True``): the number is defined over the whole set of
    samples passed in one ``score_batch`` call, so a caller must pass the whole set in
    one call (a split batch gives a different, per-batch number). ``score_batch`` gives
    every sample the corpus value (0-100) with, in ``detail["stats"]``, the sample's own
    sufficient statistics (hypothesis and reference lengths, n-gram matches and totals);
    the scores table stores the corpus value once per model and evaluation, with every
    segment's statistics (:func:`metric_ops.scoring.corpus.corpus_score_rows`, :meth:`corpus_spec`),
    and the comparisons resample them (paired bootstrap, approximate randomisation).
    :func:`corpus_bleu_from_stats` recomputes the value from statistics. Multiple
    references per sample are allowed (their number may vary). An empty hypothesis
    contributes no n-grams (it lowers BLEU). Parameters: ``tokenize``, ``lowercase``,
    ``smooth_method`` (sacrebleu).
    """

    name = "corpus_bleu"
    aliases = ("bleu_corpus",)
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    value_range = (0.0, 100.0)
    libraries = ("sacrebleu",)
    signature_extras = ("sacrebleu_sig",)
    corpus_level = True

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, smooth_method: str = "exp") -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
        from sacrebleu.metrics import BLEU

        self._bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        if not samples:
            return []
        streams = reference_streams(len(outputs), [list(s.references) for s in samples])
        stats = self._bleu._extract_corpus_statistics(list(outputs), streams)
        result = self._bleu._compute_score_from_stats([sum(col) for col in zip(*stats)])
        return [
            {self.name: Score(result.score, detail={"level": "corpus", "n_samples": len(samples), "stats": [float(x) for x in row]})}
            for row in stats
        ]

    def corpus_spec(self, score_name: str) -> dict[str, Any]:
        """Aggregate, parameters and statistics names of the stored corpus score
        (:class:`metric_ops.scoring.corpus.CorpusStatistics`; aggregate :func:`metric_ops.scoring.corpus.bleu_from_totals`)."""
        b = self._bleu
        order = b.max_ngram_order
        fields = ["hyp_len", "ref_len", *(f"match_{n}" for n in range(1, order + 1)), *(f"total_{n}" for n in range(1, order + 1))]
        return {"kind": "bleu", "fields": fields, "params": {"max_ngram_order": order, "smooth_method": b.smooth_method,
                                                              "smooth_value": b.smooth_value, "effective_order": b.effective_order}}

    def signature(self) -> str:
        sig = self._bleu._SIGNATURE_TYPE({**self._bleu.__dict__, "num_refs": -1})
        return f"{super().signature()}|sacrebleu_sig:{sig.format()}"


def corpus_bleu_from_stats(stats: Sequence[Sequence[float]], smooth_method: str = "exp") -> float:
    """Corpus BLEU (0-100) from the per-sample ``detail["stats"]`` of ``corpus_bleu`` rows
    (sacrebleu's sufficient statistics: hyp_len, ref_len, 4 matches, 4 totals)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU(smooth_method=smooth_method)
    return bleu._compute_score_from_stats([sum(col) for col in zip(*stats)]).score


# --------------------------------------------------------------------------- NLTK BLEU

NLTK_SMOOTHING = tuple(range(8))


class NltkBLEU(Metric):
    """NLTK-style sentence BLEU (``nltk.translate.bleu_score.sentence_bleu``) with NLTK's
    smoothing methods 0-7 (Chen & Cherry, 2014).

    Input: one hypothesis and >= 1 references per sample, tokenised with sacrebleu's
    ``13a`` tokenizer (``tokenize="13a"``, the default) or on whitespace
    (``tokenize="whitespace"``), then lower-cased when ``lowercase``. Output in [0, 1]
    (NLTK's scale, not sacrebleu's 0-100). Parameters: ``smoothing`` (0 = none ... 7;
    NLTK's method6 refuses a hypothesis with no bigram match: such a sample is an
    ``error`` with NLTK's message, never a made-up number),
    ``max_order`` (uniform weights 1/max_order), ``auto_reweigh`` (NLTK's option).
    An empty hypothesis or references that all tokenise to nothing give 0.0 with no
    exception or warning.
    """

    name = "nltk_bleu"
    aliases = ("bleu_nltk",)
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "1"
    libraries = ("nltk", "sacrebleu")
    parallel_safe = True

    def __init__(
        self,
        smoothing: int = 1,
        max_order: int = 4,
        tokenize: str = "13a",
        lowercase: bool = False,
        auto_reweigh: bool = False,
    ) -> None:
        if smoothing not in NLTK_SMOOTHING:
            raise ValueError(f"smoothing must be one of {NLTK_SMOOTHING} (NLTK SmoothingFunction.method<N>), got {smoothing!r}")
        if tokenize not in ("13a", "whitespace"):
            raise ValueError(f"tokenize must be '13a' or 'whitespace', got {tokenize!r}")
        if not isinstance(max_order, int) or max_order < 1:
            raise ValueError(f"max_order must be a positive integer, got {max_order!r}")
        super().__init__(smoothing=smoothing, max_order=max_order, tokenize=tokenize, lowercase=lowercase, auto_reweigh=auto_reweigh)
        from nltk.translate.bleu_score import SmoothingFunction

        self._smooth = getattr(SmoothingFunction(), f"method{smoothing}")
        self._weights = tuple(1.0 / max_order for _ in range(max_order))
        if tokenize == "13a":
            from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

            self._tok = Tokenizer13a()
        else:
            self._tok = None

    def tokens(self, text: str) -> list[str]:
        """The token list NLTK receives for ``text``."""
        if self._tok is not None:
            text = self._tok(text.strip())
        if self.params["lowercase"]:
            text = text.lower()
        return text.split()

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        from nltk.translate.bleu_score import sentence_bleu

        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            hyp = self.tokens(output)
            refs = [t for t in (self.tokens(r) for r in sample.references) if t]
            if not hyp or not refs:
                results.append({self.name: Score(0.0, detail={"empty": "hypothesis" if not hyp else "references"})})
                continue
            try:
                with warnings.catch_warnings():  # "the hypothesis contains 0 counts of N-gram overlaps": the value says so
                    warnings.simplefilter("ignore", UserWarning)
                    value = sentence_bleu(
                        refs, hyp, weights=self._weights, smoothing_function=self._smooth, auto_reweigh=self.params["auto_reweigh"]
                    )
            except AssertionError as exc:  # NLTK method6 needs a bigram match; NLTK asserts
                results.append({self.name: Score.error(f"NLTK smoothing method{self.params['smoothing']}: {exc}")})
                continue
            results.append({self.name: Score(float(value))})
        return results


# --------------------------------------------------------------------------- chrF


class _ChrFBase(SacrebleuSentenceMetric):
    """Shared chrF code; see :class:`ChrF` and :class:`ChrFPlusPlus`."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    word_order = 0

    def __init__(self, char_order: int = 6, beta: int = 2, lowercase: bool = False, whitespace: bool = False) -> None:
        super().__init__(char_order=char_order, beta=beta, lowercase=lowercase, whitespace=whitespace)
        from sacrebleu.metrics import CHRF

        self._sacre = CHRF(char_order=char_order, word_order=self.word_order, beta=beta, lowercase=lowercase, whitespace=whitespace)


class ChrF(_ChrFBase):
    """chrF (Popovic, 2015) through sacrebleu's ``CHRF`` (``word_order=0``).

    Input: one hypothesis and >= 1 references per sample (sacrebleu keeps the best
    reference). Output on sacrebleu's 0-100 scale. An empty (or whitespace-only)
    hypothesis, or references that are all empty, give 0.0 with no exception (sacrebleu
    gives 0.0 too). Parameters: ``char_order`` (6), ``beta`` (2), ``lowercase``,
    ``whitespace`` (keep spaces in character n-grams).
    """

    name = "chrf"
    word_order = 0


class ChrFPlusPlus(_ChrFBase):
    """chrF++ (Popovic, 2017) through sacrebleu's ``CHRF`` with ``word_order=2`` (word
    unigrams and bigrams added). Same input, range (0-100) and empty-input behaviour as
    ``chrf``."""

    name = "chrf_pp"
    aliases = ("chrf++", "chrfpp")
    word_order = 2
