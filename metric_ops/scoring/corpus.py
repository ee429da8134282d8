"""Corpus-level metrics: one value per model and evaluation, from per-segment sufficient
statistics that significance tests can resample.

A corpus-level metric (``corpus_level`` true: ``corpus_bleu``, ``corpus_chrf``,
``corpus_chrf_pp``, ``bertscore`` with ``idf``) is defined over the whole set of
segments, not per sample. Following sacrebleu (Post, 2018), it is stored as

- **one corpus row** per emitted score name: ``sample_id`` null, ``value`` the corpus
  score, ``detail.level = "corpus"``, and ``detail.statistics``: every scored segment's
  sufficient statistics (BLEU: hypothesis and reference lengths, n-gram matches and
  totals; chrF: hypothesis/reference/match counts per character and word n-gram order;
  idf BERTScore: the segment's P, R or F with count 1) with the segment ids, the
  aggregate that turns summed statistics into the score, and its parameters
  (:class:`CorpusStatistics`);
- **a sample row only for a segment that is ``unscored`` or ``error``**, with its
  reason: nothing that carries a value is copied onto sample rows.

The analysis (``metric_ops.compare``) reads the statistics back to give the corpus
score an interval by bootstrap resampling and to compare two models by paired
bootstrap resampling and approximate randomisation over the same segments
(``metric_ops.stats``), as sacrebleu's ``--paired-bs`` / ``--paired-ar`` do.

This module also defines the corpus chrF and chrF++ metrics (Popovic, 2015; 2017)
through sacrebleu's ``CHRF``. The vectorised aggregates (:func:`bleu_from_totals`,
:func:`chrf_from_totals`) reproduce sacrebleu's ``_compute_score_from_stats`` for a
whole batch of resampled totals at once (tests/test_corpus.py checks them value for
value against sacrebleu).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from metric_ops.base import RANGE_RTOL, Direction, Metric, Sample, Score, check_lengths, check_range  # noqa: F401  (RANGE_RTOL re-exported)
from metric_ops.errors import FacetlakeError

CORPUS_LEVEL = "corpus"
BLEU_SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}


# --------------------------------------------------------------------------- aggregates
def bleu_from_totals(
    totals: Any,
    max_ngram_order: int = 4,
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> np.ndarray:
    """BLEU (0-100) of each row of summed statistics, as sacrebleu's ``BLEU.compute_bleu``.

    Args:
        totals: ``(B, 2 + 2N)`` or ``(2 + 2N,)``: hypothesis length, reference length,
            N n-gram match counts, N n-gram totals (sacrebleu's statistics layout).
        max_ngram_order, smooth_method (``none``/``floor``/``add-k``/``exp``),
        smooth_value (None: sacrebleu's default), effective_order: sacrebleu's settings.

    Returns ``(B,)`` scores; sacrebleu's rules kept: 0 when no n-gram matches, the
    brevity penalty, the n-gram loop stopping at the first order with no n-grams, and
    ``log(0)`` floored at -9999999999.
    """
    if smooth_method not in BLEU_SMOOTH_DEFAULTS:
        raise ValueError(f"unknown BLEU smooth_method {smooth_method!r}; use one of {', '.join(BLEU_SMOOTH_DEFAULTS)}")
    t = np.atleast_2d(np.asarray(totals, dtype=float))
    n_order = int(max_ngram_order)
    if t.shape[1] != 2 + 2 * n_order:
        raise ValueError(f"BLEU statistics need {2 + 2 * n_order} columns for max_ngram_order {n_order}, got {t.shape[1]}")
    if smooth_value is None:
        smooth_value = BLEU_SMOOTH_DEFAULTS[smooth_method]
    sys_len, ref_len = np.floor(t[:, 0]), np.floor(t[:, 1])
    correct, total = t[:, 2 : 2 + n_order], t[:, 2 + n_order :]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 0.0), 1.0)
        rows = t.shape[0]
        precisions = np.zeros((rows, n_order))
        active = np.ones(rows, dtype=bool)
        smooth_mteval = np.ones(rows)
        eff_order = np.full(rows, n_order)
        for n in range(1, n_order + 1):
            c, tot = correct[:, n - 1], total[:, n - 1]
            if smooth_method == "add-k" and n > 1:
                c, tot = c + smooth_value, tot + smooth_value
            active &= tot != 0
            if effective_order:
                eff_order = np.where(active, n, eff_order)
            safe = np.where(tot != 0, tot, 1.0)
            zero = active & (c == 0)
            if smooth_method == "exp":
                smooth_mteval = np.where(zero, smooth_mteval * 2, smooth_mteval)
                precisions[:, n - 1] = np.where(zero, 100.0 / (smooth_mteval * safe), precisions[:, n - 1])
            elif smooth_method == "floor":
                precisions[:, n - 1] = np.where(zero, 100.0 * smooth_value / safe, precisions[:, n - 1])
            hit = active & (c != 0)
            precisions[:, n - 1] = np.where(hit, 100.0 * c / safe, precisions[:, n - 1])
        logs = np.where(precisions == 0.0, -9999999999.0, np.log(np.where(precisions > 0, precisions, 1.0)))
        logs = np.where(np.arange(n_order)[None, :] < eff_order[:, None], logs, 0.0)
        acc = np.zeros(rows)
        for n in range(n_order):  # left to right, as sacrebleu's sum()
            acc = acc + logs[:, n]
        score = bp * np.exp(acc / eff_order)
    return np.where((correct != 0).any(axis=1), score, 0.0)


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


def mean_from_totals(totals: Any) -> np.ndarray:
    """Mean of segment values from summed ``(sum, count)`` statistics: ``(B,)``."""
    t = np.atleast_2d(np.asarray(totals, dtype=float))
    if t.shape[1] != 2:
        raise ValueError(f"mean statistics are (sum, count), got {t.shape[1]} columns")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t[:, 1] > 0, t[:, 0] / np.where(t[:, 1] > 0, t[:, 1], 1.0), np.nan)


AGGREGATES = {"bleu": bleu_from_totals, "chrf": chrf_from_totals, "mean": mean_from_totals}


# --------------------------------------------------------------------------- statistics
class CorpusStatisticsError(FacetlakeError, ValueError):
    """Stored corpus statistics cannot be read (unknown aggregate, malformed detail)."""


@dataclass
class CorpusStatistics:
    """Per-segment sufficient statistics of one corpus score.

    Attributes:
        kind: the aggregate (``bleu``, ``chrf`` or ``mean``; see :data:`AGGREGATES`).
        params: the aggregate's settings (e.g. BLEU's smoothing), keyword arguments of
            the aggregate function.
        fields: names of the statistics columns.
        sample_ids: one id per segment (row of ``values``).
        values: ``(segments, len(fields))`` float array.
    """

    kind: str
    params: dict[str, Any]
    fields: tuple[str, ...]
    sample_ids: list[str]
    values: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATES:
            raise CorpusStatisticsError(f"unknown corpus aggregate {self.kind!r}; known: {', '.join(AGGREGATES)}")
        self.values = np.asarray(self.values, dtype=float).reshape(len(self.sample_ids), len(self.fields))

    def aggregate(self, totals: Any) -> np.ndarray:
        """Corpus scores of ``(B, k)`` summed statistics."""
        return AGGREGATES[self.kind](totals, **self.params)

    def score(self) -> float:
        """The corpus score over every segment."""
        return float(self.aggregate(self.values.sum(axis=0))[0])

    def __len__(self) -> int:
        return len(self.sample_ids)

    def aligned(self, ids: Sequence[str]) -> np.ndarray:
        """The statistics rows of ``ids`` (each must be present), in that order."""
        index = {s: i for i, s in enumerate(self.sample_ids)}
        return self.values[[index[s] for s in ids]]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (integral statistics written as integers)."""
        integral = bool(np.all(self.values == np.round(self.values)))
        values = self.values.astype(np.int64).tolist() if integral else self.values.tolist()
        return {"kind": self.kind, "params": self.params, "fields": list(self.fields), "sample_ids": list(self.sample_ids),
                "values": values}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CorpusStatistics":
        """Inverse of :meth:`to_json`; raises :class:`CorpusStatisticsError` on malformed input."""
        try:
            return cls(str(data["kind"]), dict(data.get("params") or {}), tuple(data["fields"]), [str(s) for s in data["sample_ids"]],
                       np.asarray(data["values"], dtype=float))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusStatisticsError(f"malformed corpus statistics ({type(exc).__name__}: {exc})") from exc

    @classmethod
    def from_detail(cls, detail: str | Mapping[str, Any] | None) -> "CorpusStatistics | None":
        """The statistics of a stored corpus row's ``detail`` (JSON text or dict); None
        when the row carries none (e.g. an unscored corpus)."""
        if detail is None:
            return None
        data = json.loads(detail) if isinstance(detail, str) else detail
        stats = data.get("statistics") if isinstance(data, Mapping) else None
        return None if stats is None else cls.from_json(stats)


def is_corpus_level(metric: Metric) -> bool:
    """Whether ``metric`` (an instance) computes one value over the whole scored set."""
    return bool(getattr(metric, "corpus_level", False))


# --------------------------------------------------------------------------- rows
def corpus_score_rows(
    metric: Metric, samples: Sequence[Sample], results: Sequence[Mapping[str, Score]]
) -> list[dict[str, Any]]:
    """Scores-table rows of a corpus-level metric: per emitted score name one corpus row
    (``sample_id`` None) plus one row per unscored or errored segment.

    ``results`` are the per-sample :class:`Score` dicts ``score_batch`` (or the runner's
    missing-field handling) gave; a scored segment's statistics are read from
    ``detail["stats"]`` (aggregates ``bleu``/``chrf``) or are its value with count 1
    (aggregate ``mean``). The corpus value is the aggregate of the summed statistics (so
    a corpus scored in several batches by the runner's error isolation still gets the
    whole-corpus number), clamped to the declared range when off by float rounding
    only (``detail.raw_value`` keeps the computed one), an ``error`` when further off.
    With no scored segment there is no corpus row: the segments' unscored / error rows
    are the record (never a corpus value of 0). Row keys are those of
    :func:`metric_ops.scoring.rows.score_rows`.
    """
    from metric_ops.scoring.rows import detail_json

    from metric_ops.identity import metric_params_json

    signature, params = metric.signature(), metric_params_json(metric)
    rows: list[dict[str, Any]] = []
    for score_name, direction in metric.emitted().items():
        spec = dict(metric.corpus_spec(score_name))  # type: ignore[attr-defined]
        kind = spec["kind"]
        ids: list[str] = []
        values: list[list[float]] = []
        counts = {"scored": 0, "unscored": 0, "error": 0}
        base = {"metric": score_name, "direction": direction.value, "dimension": metric.dimension,
                "locality": metric.locality, "signature": signature, "params": params}
        for sample, scores in zip(samples, results):
            score = scores.get(score_name) or Score.error(f"{metric.name} produced no {score_name} score")
            if score.status == "scored":
                stat = [float(score.value), 1.0] if kind == "mean" else score.detail.get("stats")  # type: ignore[arg-type]
                if stat is None:
                    score = Score.error(f"{metric.name} gave no sufficient statistics for {score_name}")
                else:
                    ids.append(sample.sample_id)
                    values.append([float(v) for v in stat])
                    counts["scored"] += 1
                    continue
            counts[score.status] += 1
            rows.append({**base, "sample_id": sample.sample_id, "value": None, "status": score.status,
                         "detail": detail_json({**score.detail, "level": "segment of a corpus-level metric"})})
        detail: dict[str, Any] = {"level": CORPUS_LEVEL, "n_segments": counts["scored"],
                                  "n_unscored_segments": counts["unscored"], "n_error_segments": counts["error"]}
        if not ids:  # nothing scored: the segments' own rows say why; no corpus value exists
            continue
        stats = CorpusStatistics(kind, dict(spec.get("params") or {}), tuple(spec["fields"]), ids, np.asarray(values))
        raw = stats.score()
        detail["statistics"] = stats.to_json()
        if math.isnan(raw):
            checked = Score.error("corpus value is not a number", **detail)
        else:  # the same declared-range rule as every per-sample value (metric_ops.base.check_range)
            checked = check_range(Score(raw, detail=detail), metric.range_of(score_name), f"corpus {score_name}")
        rows.append({**base, "sample_id": None, "value": checked.value, "status": checked.status,
                     "detail": detail_json(checked.detail)})
    return rows


# --------------------------------------------------------------------------- corpus chrF
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
        from sacrebleu.metrics import CHRF

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
        from metric_ops.lexical.bleu import reference_streams

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


__all__ = [
    "AGGREGATES",
    "CORPUS_LEVEL",
    "CorpusChrF",
    "CorpusChrFPlusPlus",
    "CorpusStatistics",
    "CorpusStatisticsError",
    "bleu_from_totals",
    "chrf_from_totals",
    "corpus_score_rows",
    "is_corpus_level",
    "mean_from_totals",
]
