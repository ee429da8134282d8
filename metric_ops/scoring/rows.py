"""Apply one metric to a batch of samples and outputs: the per-sample rules and the row
encoding that every scoring path shares (in process, worker processes, corpus rows).

Pure: no Dagster, no Delta. The dispatchers the asset and the CLI call
(:func:`~metric_ops.scoring.frame.score_rows`, ``score_columns``, ``score_frame``) are in
:mod:`metric_ops.scoring.frame`, above this module and the ones they dispatch to.

Rules (DESIGN.md "Contracts others rely on"):

- a sample that lacks a field the metric requires (no references, no context, empty
  ratings) gets status ``unscored`` with the missing field named, never a zero;
- when a whole batch raises, the batch is re-scored one sample at a time, and only the
  samples that still raise are recorded as ``error`` with their message; the others keep
  their scores (one bad sample never sinks a run);
- an empty or whitespace-only reference is no reference (treated like a null one): it is
  dropped before scoring, and a sample left with none is ``unscored``, never a scored 0
  (``detail["blank_references_dropped"]`` counts the dropped ones). Metrics for which an
  empty reference has a meaning of its own (SQuAD v2's "no answer" gold, declared by
  ``blank_reference_is_answer = True``) see it unchanged;
- every scored value is checked against the metric's declared range
  (:meth:`~metric_ops.base.Metric.check_scores`): clamped when off by float rounding
  only (raw value in ``detail``), an ``error`` when further out.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from metric_ops.base import Metric, Sample, Score, check_lengths

if TYPE_CHECKING:
    import polars as pl


def drop_blank_references(metric: Metric, sample: Sample) -> tuple[Sample, int]:
    """``sample`` without its null, empty or whitespace-only references, and how many
    were dropped. A metric that declares ``blank_reference_is_answer`` (an empty gold is
    SQuAD v2's "no answer") keeps its empty ones; a metric that does not use references
    sees the sample unchanged."""
    if "references" not in metric.requires:
        return sample, 0
    keep_blank = getattr(metric, "blank_reference_is_answer", False)
    kept = tuple(r for r in sample.references if r is not None and (keep_blank or not (isinstance(r, str) and not r.strip())))
    dropped = len(sample.references) - len(kept)
    return (dataclasses.replace(sample, references=kept), dropped) if dropped else (sample, 0)


def missing_fields(metric: Metric, sample: Sample, output: str | None) -> list[str]:
    """Required fields of ``metric`` that ``sample``/``output`` do not provide."""
    missing = []
    for name in metric.requires:
        if name == "output":
            if output is None:
                missing.append("output")
        elif name == "input":
            if not sample.input:
                missing.append("input")
        elif not getattr(sample, name):
            missing.append(name)
    return missing


def _error_row_scores(metric: Metric, message: str) -> dict[str, Score]:
    return {score_name: Score.error(message) for score_name in metric.emitted()}


def score_metric(
    metric: Metric,
    samples: Sequence[Sample],
    outputs: Sequence[str | None],
    batch_size: int = 256,
    progress: Callable[[int], Any] | None = None,
) -> list[dict[str, Score]]:
    """Scores of ``metric`` for each (sample, output) pair, in input order.

    ``outputs[i]`` is ``None`` when the generation for sample i is missing or failed; such
    samples are ``unscored`` for metrics that require an output. ``progress`` is called
    with the number of samples finished after each batch.
    """
    check_lengths(samples, outputs)
    results: list[dict[str, Score] | None] = [None] * len(samples)
    runnable: list[int] = []
    samples = list(samples)
    blank: dict[int, int] = {}
    for i, (sample, output) in enumerate(zip(samples, outputs)):
        sample, dropped = drop_blank_references(metric, sample)
        if dropped:
            samples[i], blank[i] = sample, dropped
        missing = missing_fields(metric, sample, output)
        if missing:
            reason = f"sample has no {', '.join(missing)}"
            if dropped and "references" in missing:
                reason += f" (its {dropped} reference(s) are null, empty or whitespace-only: nothing to compare with)"
            extra = {"blank_references_dropped": dropped} if dropped else {}
            results[i] = {n: Score.unscored(reason, missing=missing, **extra) for n in metric.emitted()}
        else:
            runnable.append(i)
    if getattr(metric, "corpus_level", False):
        # a corpus-level number (corpus BLEU, idf-weighted BERTScore) is defined over the
        # whole set: one batch, never split
        batch_size = max(1, len(runnable))
    for start in range(0, len(runnable), batch_size):
        idx = runnable[start : start + batch_size]
        batch_samples = [samples[i] for i in idx]
        batch_outputs = [outputs[i] or "" for i in idx]
        try:
            batch_scores = metric.score_batch(batch_samples, batch_outputs)
            if len(batch_scores) != len(idx):
                raise RuntimeError(f"{metric.name} returned {len(batch_scores)} results for {len(idx)} samples")
        except Exception:  # noqa: BLE001 - isolate the failing samples below
            batch_scores = []
            for s, o in zip(batch_samples, batch_outputs):
                try:
                    batch_scores.append(metric.score_batch([s], [o])[0])
                except Exception as exc:  # noqa: BLE001 - recorded as an error row
                    batch_scores.append(_error_row_scores(metric, f"{type(exc).__name__}: {exc}"))
        for i, scores in zip(idx, batch_scores):
            scores = metric.check_scores(scores)
            if i in blank:
                scores = {k: _with_detail(v, blank_references_dropped=blank[i]) for k, v in scores.items()}
            results[i] = scores
        if progress is not None:
            progress(len(idx))
    return [r if r is not None else {} for r in results]


def _with_detail(score: Score, **extra: Any) -> Score:
    return Score(score.value, score.status, {**score.detail, **extra})


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_DETAIL_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False, sort_keys=True)


def detail_json(detail: Any) -> str:
    """Serialise a ``detail`` mapping to compact JSON (numpy values converted): the text of
    ``json.dumps(detail, default=..., ensure_ascii=False, sort_keys=True)``, through one
    encoder (``json.dumps`` with options builds a new one per call; this runs per score row)."""
    if not detail and isinstance(detail, dict):
        return "{}"
    return _DETAIL_ENCODER.encode(detail)


SCORE_FRAME_SCHEMA = {
    "sample_id": "String", "metric": "String", "value": "Float64", "direction": "String", "dimension": "String",
    "locality": "String", "status": "String", "detail": "String", "signature": "String",
    "params": "String",
}


def local_columns(
    metric: Metric,
    samples: Sequence[Sample],
    outputs: Sequence[str | None],
    batch_size: int = 256,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, tuple[list, list, list]]:
    """:func:`score_metric` in this process, as columns: ``{score name: (values, statuses,
    detail JSON texts)}``, each list in sample order (a score the metric did not produce is
    an ``error`` naming it)."""
    results = score_metric(metric, samples, outputs, batch_size=batch_size, progress=progress)
    columns = {}
    for score_name in metric.emitted():
        missing = Score.error(f"{metric.name} produced no {score_name} score")
        scores = [r.get(score_name) or missing for r in results]
        columns[score_name] = ([s.value for s in scores], [s.status for s in scores], [detail_json(s.detail) for s in scores])
    return columns


def frame_of_rows(rows: Sequence[dict[str, Any]]) -> "pl.DataFrame":
    """Score rows (``score_rows`` / ``human_rating_rows`` shape) as a polars frame with the
    columns and types of :data:`SCORE_FRAME_SCHEMA` (an empty frame for no rows). A row
    without ``params`` gets it from its signature (:func:`metric_ops.identity.signature_params_json`)."""
    import polars as pl

    from metric_ops.identity import signature_params_json

    schema = {k: getattr(pl, v) for k, v in SCORE_FRAME_SCHEMA.items()}
    if not rows:
        return pl.DataFrame(schema=schema)
    parsed: dict[str, str] = {}
    out = []
    for r in rows:
        row = {k: r.get(k) for k in schema}
        if row["params"] is None and row["signature"]:
            sig = row["signature"]
            row["params"] = parsed[sig] if sig in parsed else parsed.setdefault(sig, signature_params_json(sig))
        out.append(row)
    return pl.DataFrame(out, schema=schema)


def human_rating_rows(samples: Iterable[Sample]) -> list[dict[str, Any]]:
    """Human ratings as score rows named ``human:<rating>`` (direction maximize)."""
    from metric_ops.identity import identity_json

    rows = []
    for sample in samples:
        for name, value in sorted(sample.ratings.items()):
            ok = value is not None and math.isfinite(float(value))
            rows.append(
                {
                    "sample_id": sample.sample_id,
                    "metric": f"human:{name}",
                    "value": float(value) if ok else None,
                    "direction": "maximize",
                    "dimension": "baseline_grounding",
                    "locality": "local",
                    "status": "scored" if ok else "unscored",
                    "detail": detail_json({"source": "dataset human rating"} if ok else {"reason": "rating missing"}),
                    "signature": f"human:{name}|source:dataset",
                    "params": identity_json({"metric": f"human:{name}", "version": None, "params": {"source": "dataset"}}),
                }
            )
    return rows
