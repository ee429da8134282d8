"""Review rubrics (issue 29): what a human reviewer rates a sample on, declared in an
evaluation spec's ``review:`` block (not part of the fingerprint)::

    review:
      reviewers_per_sample: 2          # k: each sample goes to k reviewers (the overlap)
      reviewers: [alice, bob, carol]   # optional: who the queue hands samples to
      rubrics:
        - {name: correct, labels: [wrong, right], version: "1"}            # nominal labels
        - {name: fluency, scale: [1, 5], level: ordinal, version: "2"}     # a scale

A rubric is either a label set (``labels``: nominal; the stored value is the label's index,
so a binary rubric stores 0/1) or a numeric ``scale`` ``[lo, hi]`` (``level``: ``ordinal``,
the default, or ``interval``). ``version`` is bumped whenever the rubric's meaning changes;
reviews keep the version they were given under.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from metric_ops.errors import FacetlakeError

LEVELS = ("nominal", "ordinal", "interval")
_NAME = re.compile(r"[a-z0-9_.-]{1,64}")
_REVIEWER = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


class ReviewSpecError(FacetlakeError, ValueError):
    """A ``review:`` block, a rubric or a review value is invalid (the message names it and the fix)."""


def check_reviewer(name: Any) -> str:
    """``name`` as a reviewer id (letters, digits, ``_.@-``, at most 64); raises :class:`ReviewSpecError`."""
    text = str(name or "").strip()
    if not _REVIEWER.fullmatch(text):
        raise ReviewSpecError(f"reviewer {name!r} is not a reviewer id: use letters, digits and _.@- (at most 64), e.g. alice")
    return text


@dataclass(frozen=True)
class Rubric:
    """One rubric: ``name`` (the score is ``human:<name>``), ``labels`` or ``scale``,
    ``level`` (:data:`LEVELS`) and ``version``."""

    name: str
    level: str
    version: str = "1"
    labels: tuple[str, ...] = ()
    scale: tuple[float, float] | None = None

    @property
    def metric(self) -> str:
        return f"human:{self.name}"

    def value_of(self, raw: Any) -> float:
        """The stored value of a review given as ``raw``: a label (its index) or a number on
        the scale. Raises :class:`ReviewSpecError` naming the allowed labels or range."""
        if self.labels:
            text = str(raw).strip()
            if text not in self.labels:
                raise ReviewSpecError(f"rubric {self.name!r}: {raw!r} is not one of its labels {list(self.labels)}")
            return float(self.labels.index(text))
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ReviewSpecError(f"rubric {self.name!r}: {raw!r} is not a number on its scale {list(self.scale or ())}") from None
        lo, hi = self.scale or (-math.inf, math.inf)
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ReviewSpecError(f"rubric {self.name!r}: {raw!r} is outside its scale [{lo:g}, {hi:g}]")
        return value

    def label_of(self, value: float | None) -> str | None:
        """The label of a stored value (labels rubrics), else the number as text."""
        if value is None:
            return None
        return self.labels[int(value)] if self.labels else f"{value:g}"

    def to_mapping(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "version": self.version,
                **({"labels": list(self.labels)} if self.labels else {"scale": list(self.scale or ())})}


@dataclass(frozen=True)
class ReviewPlan:
    """An evaluation's ``review:`` block: its rubrics, ``reviewers_per_sample`` (k, the
    overlap: every sample is handed to k reviewers) and the declared ``reviewers``."""

    rubrics: tuple[Rubric, ...] = ()
    reviewers_per_sample: int = 1
    reviewers: tuple[str, ...] = ()
    by_name: dict[str, Rubric] = field(default_factory=dict, compare=False)

    def rubric(self, name: str) -> Rubric:
        """The rubric ``name`` (or ``human:name``); raises :class:`ReviewSpecError` listing the rubrics."""
        key = name.removeprefix("human:")
        if key not in self.by_name:
            known = ", ".join(self.by_name) or "none (add a review: block with rubrics to the evaluation spec)"
            raise ReviewSpecError(f"no rubric {name!r} in this evaluation; rubrics: {known}")
        return self.by_name[key]

    def to_mapping(self) -> dict[str, Any]:
        if not self.rubrics:
            return {}
        return {"rubrics": [r.to_mapping() for r in self.rubrics], "reviewers_per_sample": self.reviewers_per_sample,
                **({"reviewers": list(self.reviewers)} if self.reviewers else {})}


def parse_review(value: Any, where: str = "evaluation spec") -> ReviewPlan:
    """The :class:`ReviewPlan` of a spec's ``review:`` value (None or empty: no rubric).
    Raises :class:`ReviewSpecError` naming the problem and the fix."""
    if not value:
        return ReviewPlan()
    if not isinstance(value, Mapping):
        raise ReviewSpecError(f"{where}: review must be a mapping with rubrics:, e.g. "
                              "review: {rubrics: [{name: correct, labels: [wrong, right]}]}")
    unknown = sorted(set(value) - {"rubrics", "reviewers_per_sample", "reviewers"})
    if unknown:
        raise ReviewSpecError(f"{where}: review has unknown keys {unknown}; allowed: reviewers, reviewers_per_sample, rubrics")
    rubrics = []
    for i, item in enumerate(value.get("rubrics") or []):
        rubrics.append(_rubric(item, f"{where}: review.rubrics[{i}]"))
    if not rubrics:
        raise ReviewSpecError(f"{where}: review declares no rubrics; e.g. rubrics: [{{name: correct, labels: [wrong, right]}}]")
    names = [r.name for r in rubrics]
    if len(set(names)) != len(names):
        raise ReviewSpecError(f"{where}: review rubric names repeat: {names}")
    k = value.get("reviewers_per_sample", 1)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ReviewSpecError(f"{where}: review.reviewers_per_sample must be a whole number >= 1, not {k!r}")
    reviewers = tuple(check_reviewer(r) for r in value.get("reviewers") or [])
    if reviewers and k > len(reviewers):
        raise ReviewSpecError(f"{where}: review.reviewers_per_sample is {k} but only {len(reviewers)} reviewers are declared")
    return ReviewPlan(tuple(rubrics), k, reviewers, {r.name: r for r in rubrics})


def _rubric(item: Any, where: str) -> Rubric:
    if not isinstance(item, Mapping) or not _NAME.fullmatch(str(item.get("name", ""))):
        raise ReviewSpecError(f"{where}: a rubric needs a name matching [a-z0-9_.-]+, e.g. {{name: correct, labels: [wrong, right]}}")
    unknown = sorted(set(item) - {"name", "labels", "scale", "level", "version"})
    if unknown:
        raise ReviewSpecError(f"{where}: unknown keys {unknown}; allowed: labels, level, name, scale, version")
    name, version = str(item["name"]), str(item.get("version", "1"))
    if ("labels" in item) == ("scale" in item):
        raise ReviewSpecError(f"{where}: rubric {name!r} needs either labels: [..] or scale: [lo, hi]")
    if "labels" in item:
        labels = tuple(str(x) for x in item["labels"] or [])
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise ReviewSpecError(f"{where}: rubric {name!r} needs at least two distinct labels")
        level = str(item.get("level", "nominal"))
        if level not in LEVELS[:2]:
            raise ReviewSpecError(f"{where}: rubric {name!r}: labels are nominal or ordinal, not {level!r}")
        return Rubric(name, level, version, labels=labels)
    scale = item["scale"]
    try:
        lo, hi = (float(x) for x in scale)
    except (TypeError, ValueError):
        raise ReviewSpecError(f"{where}: rubric {name!r}: scale must be [lo, hi], e.g. [1, 5]") from None
    if not lo < hi:
        raise ReviewSpecError(f"{where}: rubric {name!r}: scale [lo, hi] needs lo < hi")
    level = str(item.get("level", "ordinal"))
    if level not in LEVELS[1:]:
        raise ReviewSpecError(f"{where}: rubric {name!r}: a scale is ordinal or interval, not {level!r}")
    return Rubric(name, level, version, scale=(lo, hi))


def assign(sample_ids: list[str], reviewers: list[str], k: int) -> dict[str, list[str]]:
    """The review queue: each sample (in order) handed to ``k`` of ``reviewers``, round
    robin (sample i to reviewers i, i+1, ..., i+k-1 modulo their number), so every
    reviewer gets about ``len(sample_ids) * k / len(reviewers)`` samples and every pair of
    neighbours shares samples (the overlap agreement is measured on). Raises
    :class:`ReviewSpecError` when ``k`` exceeds the reviewers."""
    if not reviewers:
        raise ReviewSpecError("the review queue needs reviewers: declare review.reviewers in the spec")
    if k > len(reviewers):
        raise ReviewSpecError(f"{k} reviewers per sample but only {len(reviewers)} reviewers")
    n = len(reviewers)
    return {sid: [reviewers[(i + j) % n] for j in range(k)] for i, sid in enumerate(sample_ids)}
