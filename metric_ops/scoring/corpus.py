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

The aggregates live with their metrics: :func:`metric_ops.lexical.bleu.bleu_from_totals`
and :func:`metric_ops.lexical.chrf.chrf_from_totals` reproduce sacrebleu's
``_compute_score_from_stats`` for a whole batch of resampled totals at once; this module
adds the ``mean`` aggregate and the table of the three (:data:`AGGREGATES`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from metric_ops.base import CORPUS_LEVEL, Metric, Sample, Score, check_range
from metric_ops.errors import FacetlakeError
from metric_ops.identity import metric_params_json
from metric_ops.lexical.bleu import bleu_from_totals
from metric_ops.lexical.chrf import chrf_from_totals
from metric_ops.scoring.rows import detail_json

# --------------------------------------------------------------------------- aggregates
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
    :func:`metric_ops.scoring.frame.score_rows`.
    """
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
