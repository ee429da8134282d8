"""Comparing facetlake's stored values with a reference library's, case by case (used by
:mod:`pipelines.crossval.harness`).

Values are compared only where both sides define one: cases facetlake stores as
``unscored`` (nothing to measure) and cases where the library is undefined (NaN) while
facetlake records an ``error`` are left out and counted with their reasons.
"""

from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from metric_ops.base import Sample, library_version

LEXICAL_TOLERANCE = 1e-9
NEURAL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Case:
    """One (prediction, references) pair to score. ``source`` names where it came from
    (``sfres``, ``qags``, ``selfaware``, ``edge``); ``real`` is False for hand-made edge
    cases."""

    prediction: str
    references: tuple[str, ...]
    source: str
    real: bool = True


@dataclass
class Variant:
    """One metric variant to cross-validate.

    ``metric``/``params``: the facetlake metric; ``scores``: the emitted score names
    compared; ``reference``: ``fn(cases) -> list[list[float]]`` (one list per case, in the
    order of ``scores``), or for corpus-level variants a single list for the whole set;
    ``library``: the reference's distribution name; ``neural``: tolerance 1e-6 instead of
    1e-9; ``corpus``: one value per case set."""

    name: str
    metric: str
    params: dict[str, Any]
    scores: tuple[str, ...]
    reference: Callable[[Sequence[Case]], list[list[float]]]
    library: str
    reference_name: str
    neural: bool = False
    corpus: bool = False
    note: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)


class FacetlakeValues(NamedTuple):
    """facetlake's side of one comparison (:func:`facetlake_values`)."""

    values: list[list[float]]
    scales: list[list[float]]
    unscored: dict[int, str]
    out_of_range: int
    ran: list[int]  # cases that reached the metric (not unscored by the runner for a missing input)
    corpus_level: bool  # values depend on the whole set scored together (e.g. BERTScore idf)


def facetlake_values(variant: Variant, cases: Sequence[Case]) -> FacetlakeValues:
    """facetlake's values for the cases as stored (through :func:`metric_ops.scoring.rows.score_metric`:
    blank references dropped, declared ranges applied, corpus-level settings seeing the
    whole set in one call), in the order of ``variant.scores``; for each value its error
    magnification (1, or the F score's ``detail["f1_condition"]`` where BERTScore's
    F = 2PR/(P+R) is ill-conditioned); and ``{case index: reason}`` for the cases
    facetlake leaves ``unscored`` (nothing to measure: the reference library's number
    there, typically a placeholder 0, is not compared); and how many values facetlake
    refused as outside the metric's declared range (an ``error`` with
    ``detail["raw_value"]``, e.g. NLTK's smoothing method 5 giving BLEU 1.117 for an
    exact match): their raw value is what is compared, so the report shows the library
    computes the same number. Any other ``error`` result is NaN (it agrees only with a
    reference that fails on that case)."""
    from metric_ops.registry import get_metric
    from metric_ops.scoring.rows import drop_blank_references, missing_fields, score_metric

    metric = get_metric(variant.metric, **variant.params)
    samples = [Sample(sample_id=str(i), input="", references=c.references) for i, c in enumerate(cases)]
    rows = score_metric(metric, samples, [c.prediction for c in cases], batch_size=max(1, len(cases)))
    ran = [i for i, (s, c) in enumerate(zip(samples, cases)) if not missing_fields(metric, drop_blank_references(metric, s)[0], c.prediction)]
    corpus_level = bool(getattr(metric, "corpus_level", False))
    out, scales, unscored, out_of_range = [], [], {}, 0
    for i, row in enumerate(rows):
        vals, scale = [], []
        for name in variant.scores:
            s = row[name]
            if s.status == "unscored":
                unscored[i] = f"facetlake unscored: {_short_reason(str(s.detail.get('reason', '')))}"
            raw = s.detail.get("raw_value") if s.status == "error" else None
            if isinstance(raw, (int, float)):
                out_of_range += 1
                vals.append(float(raw))
                # an ill-conditioned BERTScore F (P, R of opposite signs) can leave [-1, 1]:
                # its raw value is held to tolerance x f1_condition like any such F
                scale.append(max(1.0, float(s.detail.get("f1_condition", 1.0))))
                continue
            # an error row must meet a reference that also fails (NaN) on that case
            vals.append(s.value if s.status == "scored" else math.nan)
            scale.append(max(1.0, float(s.detail.get("f1_condition", 1.0))))
        out.append(vals)
        scales.append(scale)
    if variant.corpus:
        kept = [i for i in range(len(rows)) if i not in unscored]
        first = kept[0] if kept else 0
        return FacetlakeValues([out[first]], [scales[first]], unscored, out_of_range, ran, corpus_level)
    return FacetlakeValues(out, scales, unscored, out_of_range, ran, corpus_level)


def _as_scored(variant: Variant, case: Case) -> Case:
    """``case`` with the references facetlake scores it against: empty or whitespace-only
    references are no references (:func:`metric_ops.scoring.rows.drop_blank_references`), so the
    library is given the same ones (except where an empty gold means "no answer")."""
    from metric_ops.registry import REGISTRY

    cls = REGISTRY.get_class(variant.metric)
    if "references" not in cls.requires or getattr(cls, "blank_reference_is_answer", False):
        return case
    refs = tuple(r for r in case.references if r.strip())
    return case if refs == case.references else Case(case.prediction, refs, case.source, case.real)


def _short_reason(reason: str) -> str:
    """A reason without its per-case numbers, so the report can count cases per reason."""
    return re.sub(r"\d+", "N", reason.split(" (")[0]).strip() or "no reason given"


def compare(variant: Variant, cases: Sequence[Case]) -> dict[str, Any]:
    """Score ``cases`` with facetlake and the reference; one report row.

    The two are compared only where both define a value: cases facetlake leaves
    ``unscored`` (nothing to measure, e.g. an empty reference) and cases where the
    reference's value is undefined (NaN) while facetlake records an ``error`` are left
    out, counted in ``left_out`` with their reasons in ``left_out_reasons`` (``{reason:
    count}``). The reference is called on the kept cases only (for a corpus-level
    variant the corpus is the kept cases, as facetlake's), with the references facetlake
    used (blank ones dropped, :func:`_as_scored`). A case where only one side is
    undefined counts as a mismatch.

    A value passes when ``|facetlake - reference| <= tolerance * kappa``, kappa = 1 except
    for a BERTScore F whose P and R have opposite signs, where kappa is the F score's
    ``f1_condition`` (first-order error magnification of 2PR/(P+R); P and R themselves
    are always held to the plain tolerance). ``max_abs_error`` is the raw largest
    difference; ``max_scaled_error`` the largest ``|difference| / kappa``."""
    ours, scales, unscored, out_of_range, ran, corpus_level = facetlake_values(variant, cases)
    reasons: collections.Counter = collections.Counter(unscored.values())
    kept = [i for i in range(len(cases)) if i not in unscored]
    if not variant.corpus:
        ours, scales = [ours[i] for i in kept], [scales[i] for i in kept]
    if corpus_level and not variant.corpus and kept:
        # per-sample values that depend on the set (idf over the references): the library
        # sees the same set facetlake scored, then only the kept cases are compared
        every = variant.reference([_as_scored(variant, cases[i]) for i in ran])
        position = {i: k for k, i in enumerate(ran)}
        ref = [every[position[i]] for i in kept]
    else:
        ref = variant.reference([_as_scored(variant, cases[i]) for i in kept]) if kept else []
    if len(ours) != len(ref) and kept:
        raise AssertionError(f"{variant.name}: {len(ours)} facetlake results, {len(ref)} reference results")
    worst, worst_scaled, worst_case, conditioned, compared = 0.0, 0.0, None, 0, 0
    for j, (a, b, k) in enumerate(zip(ours, ref, scales)):
        i = kept[j] if not variant.corpus else None
        if all(math.isnan(float(x)) and math.isnan(float(y)) for x, y in zip(a, b)):
            reasons["reference undefined (NaN) and facetlake an error"] += 1
            continue
        compared += 1
        for x, y, kappa in zip(a, b, k):
            err = abs(float(x) - float(y)) if not (math.isnan(x) and math.isnan(y)) else 0.0
            if math.isnan(err):
                err = math.inf
            worst = max(worst, err)
            conditioned += kappa > 1.0
            if err / kappa > worst_scaled:
                worst_scaled, worst_case = err / kappa, i
    tol = NEURAL_TOLERANCE if variant.neural else LEXICAL_TOLERANCE
    sources = collections.Counter(c.source for c in cases)
    note = variant.note
    if conditioned:
        extra = f"{conditioned} ill-conditioned F values held to tolerance x f1_condition"
        note = f"{note}; {extra}" if note else extra
    if out_of_range:
        extra = (f"{out_of_range} library values outside the declared range: facetlake records them as errors "
                 "(its raw value, compared here, equals the library's)")
        note = f"{note}; {extra}" if note else extra
    left_out = sum(reasons.values())
    return {
        "variant": variant.name,
        "metric": variant.metric,
        "cases": len(cases),
        "real_cases": sum(c.real for c in cases),
        "compared": compared if not variant.corpus else len(kept),
        "left_out": left_out,
        "left_out_reasons": dict(sorted(reasons.items())),
        "out_of_range": out_of_range,
        "sources": ", ".join(f"{k} {v}" for k, v in sorted(sources.items())),
        "max_abs_error": worst,
        "max_scaled_error": worst_scaled,
        "worst_case": worst_case,
        "tolerance": tol,
        "passed": worst_scaled <= tol and (compared > 0 or bool(variant.corpus and kept)),
        "reference": variant.reference_name,
        "reference_version": f"{variant.library} {library_version(variant.library)}" if variant.library != "squad-v2" else "SQuAD v2.0 official script",
        "note": note,
    }


def _left_out(row: dict[str, Any]) -> str:
    n = int(row.get("left_out") or 0)
    if not n:
        return "0"
    reasons = "; ".join(f"{count} {reason}" for reason, count in (row.get("left_out_reasons") or {}).items())
    return f"{n}: {reasons}"
