"""chrF and chrF++ (Popovic, 2015; 2017) through sacrebleu's ``CHRF``, in one place: the
sentence metrics ``chrf`` / ``chrf_pp``, the corpus metrics ``corpus_chrf`` /
``corpus_chrf_pp``, and :func:`chrf_from_totals`, sacrebleu's ``CHRF._compute_f_score``
vectorised over a batch of summed statistics (the corpus aggregate ``chrf`` of
:class:`metric_ops.scoring.corpus.CorpusStatistics`; tests/test_corpus.py checks it value
for value against sacrebleu).

A corpus metric is stored once per model and evaluation with every segment's statistics
(:mod:`metric_ops.scoring.corpus`), which the comparisons resample.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from metric_ops.base import CORPUS_LEVEL, Direction, Metric, Sample, Score, check_lengths
from metric_ops.lexical.bleu import SacrebleuSentenceMetric, reference_streams, sacrebleu_metrics

# --------------------------------------------------------------------------- sentence chrF


class _ChrFBase(SacrebleuSentenceMetric):
    """Shared chrF code; see :class:`ChrF` and :class:`ChrFPlusPlus`."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    word_order = 0

    def __init__(self, char_order: int = 6, beta: int = 2, lowercase: bool = False, whitespace: bool = False) -> None:
        super().__init__(char_order=char_order, beta=beta, lowercase=lowercase, whitespace=whitespace)
        CHRF = sacrebleu_metrics().CHRF

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



# --------------------------------------------------------------------------- corpus chrF
def chrf_from_totals(totals: Any, char_order: int = 6, word_order: int = 0, beta: int = 2, eps_smoothing: bool = False) -> np.ndarray:
    """chrF / chrF++ (0-100) of each row of summed statistics, as sacrebleu's
    ``CHRF._compute_f_score``.

    Args:
        totals: ``(B, 3 * (char_order + word_order))`` or one such row: hypothesis,
            reference and match n-gram counts per order (character orders first).
        char_order, word_order, beta, eps_smoothing: sacrebleu's ``CHRF`` settings.

    Returns ``(B,)`` scores: the F-beta of precision and recall averaged over the orders
    where both hypothesis and reference have n-grams (sacrebleu's default), or the
    eps-smoothed mean of per-order F scores (``eps_smoothing``).
    """
    t = np.atleast_2d(np.asarray(totals, dtype=float))
    order = int(char_order) + int(word_order)
    if t.shape[1] != 3 * order:
        raise ValueError(f"chrF statistics need {3 * order} columns for orders {char_order}+{word_order}, got {t.shape[1]}")
    eps = 1e-16
    factor = beta**2
    rows = t.shape[0]
    score = np.zeros(rows)
    avg_prec = np.zeros(rows)
    avg_rec = np.zeros(rows)
    effective = np.zeros(rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(order):
            n_hyp, n_ref, n_match = t[:, 3 * i], t[:, 3 * i + 1], t[:, 3 * i + 2]
            prec = np.where(n_hyp > 0, n_match / np.where(n_hyp > 0, n_hyp, 1.0), eps)
            rec = np.where(n_ref > 0, n_match / np.where(n_ref > 0, n_ref, 1.0), eps)
            denom = factor * prec + rec
            score = score + np.where(denom > 0, (1 + factor) * prec * rec / np.where(denom > 0, denom, 1.0), eps)
            both = (n_hyp > 0) & (n_ref > 0)
            avg_prec = np.where(both, avg_prec + prec, avg_prec)
            avg_rec = np.where(both, avg_rec + rec, avg_rec)
            effective = effective + both
        if eps_smoothing:
            return 100 * score / order
        avg_prec = np.where(effective == 0, 0.0, avg_prec / np.where(effective == 0, 1.0, effective))
        avg_rec = np.where(effective == 0, 0.0, avg_rec / np.where(effective == 0, 1.0, effective))
        both_zero = (avg_prec + avg_rec) == 0
        f = (1 + factor) * avg_prec * avg_rec
        f = f / np.where(both_zero, 1.0, (factor * avg_prec) + avg_rec)
    return np.where(both_zero, 0.0, 100 * f)


class _CorpusChrFBase(Metric):
    """Shared code of :class:`CorpusChrF` and :class:`CorpusChrFPlusPlus`."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    value_range = (0.0, 100.0)
    libraries = ("sacrebleu",)
    signature_extras = ("sacrebleu_sig",)
    corpus_level = True
    word_order = 0

    def __init__(self, char_order: int = 6, beta: int = 2, lowercase: bool = False, whitespace: bool = False,
                 eps_smoothing: bool = False) -> None:
        super().__init__(char_order=char_order, beta=beta, lowercase=lowercase, whitespace=whitespace, eps_smoothing=eps_smoothing)
        CHRF = sacrebleu_metrics().CHRF

        self._chrf = CHRF(char_order=char_order, word_order=self.word_order, beta=beta, lowercase=lowercase,
                          whitespace=whitespace, eps_smoothing=eps_smoothing)

    def corpus_spec(self, score_name: str) -> dict[str, Any]:
        """Aggregate, parameters and statistics names of the corpus score (see :class:`CorpusStatistics`)."""
        c = self._chrf
        fields = [f"{side}_{kind}{n}" for kind, orders in (("char", c.char_order), ("word", c.word_order))
                  for n in range(1, orders + 1) for side in ("hyp", "ref", "match")]
        return {"kind": "chrf", "fields": fields,
                "params": {"char_order": c.char_order, "word_order": c.word_order, "beta": c.beta, "eps_smoothing": c.eps_smoothing}}

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        if not samples:
            return []
        streams = reference_streams(len(outputs), [list(s.references) for s in samples])
        stats = self._chrf._extract_corpus_statistics(list(outputs), streams)
        value = self._chrf._compute_score_from_stats([sum(col) for col in zip(*stats)]).score
        return [{self.name: Score(value, detail={"level": CORPUS_LEVEL, "n_samples": len(samples), "stats": [int(x) for x in row]})}
                for row in stats]

    def signature(self) -> str:
        sig = self._chrf._SIGNATURE_TYPE({**self._chrf.__dict__, "num_refs": -1})
        return f"{super().signature()}|sacrebleu_sig:{sig.format()}"


class CorpusChrF(_CorpusChrFBase):
    """Corpus chrF (Popovic, 2015) through sacrebleu's ``CHRF`` (``word_order=0``).

    Corpus-level: character n-gram statistics (hypothesis, reference and match counts
    for orders 1..``char_order``) are summed over every scored segment and one F-beta
    score is computed from the sums (sacrebleu's ``corpus_score``), 0-100. Stored once
    per model and evaluation with every segment's statistics (module docstring), which
    the comparisons resample. Input: one hypothesis and >= 1 references per sample
    (their number may vary; sacrebleu keeps the best-matching reference per segment).
    An empty hypothesis adds reference n-grams and no matches (it lowers the score).
    Parameters: ``char_order`` (6), ``beta`` (2), ``lowercase``, ``whitespace``,
    ``eps_smoothing`` (sacrebleu's). Example: hyps ["the cat sat on the mat",
    "a dog barked loudly", ""] vs refs ["the cat sat on the mat", "the dog barked
    loudly", "birds fly south"] give chrF2 = 71.05.
    """

    name = "corpus_chrf"
    aliases = ("chrf_corpus",)
    word_order = 0


class CorpusChrFPlusPlus(_CorpusChrFBase):
    """Corpus chrF++ (Popovic, 2017): :class:`CorpusChrF` with word unigrams and bigrams
    added (sacrebleu ``CHRF(word_order=2)``). Same input, range (0-100) and storage."""

    name = "corpus_chrf_pp"
    aliases = ("corpus_chrf++", "corpus_chrfpp", "chrf_pp_corpus")
    word_order = 2

