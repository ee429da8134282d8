"""Human reviews in the lake (issue 29): the ``reviews`` table and the ``human:<rubric>``
score rows derived from it.

- :func:`record_reviews` appends reviews through the lake's keyed idempotent path (the key
  is a SHA-256 of what was said: evaluation fingerprint, model, sample, rubric and its
  version, reviewer, value), so a double click, a retried request or a re-imported file
  adds nothing; then it rewrites the ``human:<rubric>`` rows of ``scores`` for the models
  touched: per sample, the mean of the reviewers' latest values (the majority label for a
  nominal rubric), with the reviewers, their labels, the rubric version and the last
  review time in the row's detail. The analysis sensor then refreshes the verdicts, and
  ``correlations`` relates every metric to the reviews.
- :func:`import_csv` reads ``sample_id, model, rubric, value[, reviewer]`` rows from a
  spreadsheet; a bad row is reported with its line and the rest are recorded.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from metric_ops.identity import identity_json
from metric_ops.review import ReviewPlan, ReviewSpecError, Rubric, check_reviewer, parse_review
from resources.catalog import evaluation_row, evaluation_spec
from resources.lake.resource import LakeStore


# the mark of a human:<rubric> score row derived from reviews (not a dataset rating) in its signature
REVIEW_SIGNATURE = "|source:review|"

def review_plan(lake: LakeStore, evaluation: str) -> tuple[dict[str, Any], ReviewPlan]:
    """(the evaluation's catalog row, its :class:`ReviewPlan`); raises
    :class:`ReviewSpecError` when the spec declares no rubric."""
    row = evaluation_row(lake, evaluation)
    plan = parse_review(evaluation_spec(lake, row["fingerprint"]).review)
    if not plan.rubrics:
        raise ReviewSpecError(f"evaluation {row['name']!r} declares no review rubric; add a review: block to its spec, e.g. "
                              "review: {rubrics: [{name: correct, labels: [wrong, right]}]}, and run `facetlake register` again")
    return row, plan


def review_row(row: Mapping[str, Any], model: str, sample_id: str, rubric: Rubric, reviewer: str, raw: Any,
               source: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """One ``reviews`` row: ``raw`` checked against ``rubric`` (a label or a number on its
    scale); raises :class:`ReviewSpecError` naming what is allowed."""
    reviewer = check_reviewer(reviewer)
    value = rubric.value_of(raw)
    said = [row["fingerprint"], model, str(sample_id), rubric.name, rubric.version, reviewer, value]
    return {"fingerprint": row["fingerprint"], "evaluation": row["name"], "model": model, "sample_id": str(sample_id),
            "rubric": rubric.name, "rubric_version": rubric.version, "reviewer": reviewer, "value": value,
            "label": rubric.label_of(value), "source": source,
            "review_id": hashlib.sha256(json.dumps(said).encode()).hexdigest(),
            "created_at": now or dt.datetime.now(dt.timezone.utc)}


def review_targets(lake: LakeStore, fingerprint: str) -> tuple[set[str], set[str]]:
    """(sample ids, models with outputs or agent episodes) under ``fingerprint``: what a
    review may name."""
    samples = set(lake.read("samples", where={"fingerprint": fingerprint}, columns=["sample_id"])["sample_id"].to_list())
    models = {m for table in ("generations", "episodes") if lake.exists(table)
              for m in lake.read(table, where={"fingerprint": fingerprint}, columns=["model"])["model"].unique().to_list()}
    return samples, models


def checked_review(row: Mapping[str, Any], plan: ReviewPlan, targets: tuple[set[str], set[str]], model: str, sample_id: str,
                   rubric: str, reviewer: Any, raw: Any, source: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The ``reviews`` row of one review given by name (from the page or a CSV line):
    the sample and model checked against ``targets`` (:func:`review_targets`), the rubric
    against ``plan``, then :func:`review_row`. Raises :class:`ReviewSpecError` naming what
    is unknown and what exists."""
    samples, models = targets
    if str(sample_id) not in samples:
        raise ReviewSpecError(f"no sample {sample_id!r} in evaluation {row['name']!r}")
    if model not in models:
        raise ReviewSpecError(f"no model {model!r} with outputs; models: {', '.join(sorted(models))}")
    return review_row(row, model, str(sample_id), plan.rubric(str(rubric)), reviewer, raw, source, now)


def latest_reviews(lake: LakeStore, fingerprint: str) -> pl.DataFrame:
    """The reviews that count under ``fingerprint``: the latest per (model, sample,
    rubric, reviewer)."""
    if not lake.exists("reviews"):
        return pl.DataFrame(schema={"model": pl.String, "sample_id": pl.String, "rubric": pl.String, "reviewer": pl.String,
                                    "value": pl.Float64, "label": pl.String, "rubric_version": pl.String,
                                    "created_at": pl.Datetime("us", "UTC")})
    frame = lake.read("reviews", where={"fingerprint": fingerprint})
    return frame.sort("created_at").unique(subset=["model", "sample_id", "rubric", "reviewer"], keep="last").sort(
        ["model", "sample_id", "rubric", "reviewer"])


def _aggregate(rubric: Rubric, values: list[float]) -> float:
    """A sample's value from its reviewers': the mean, or for a nominal rubric the
    majority label (the lowest label index among ties)."""
    if rubric.level == "nominal":
        counts = Counter(values)
        top = max(counts.values())
        return min(v for v, c in counts.items() if c == top)
    return sum(values) / len(values)


def human_rows(reviews: pl.DataFrame, rubric: Rubric, model: str, fingerprint: str, dataset: str,
               run_id: str = "review") -> list[dict[str, Any]]:
    """The ``human:<rubric>`` score rows of one model from its latest ``reviews``; ``run_id``
    names the reviews version they were derived from (the scores marker changes with it, so
    the verdicts refresh after every review)."""
    rows = []
    mine = reviews.filter((pl.col("model") == model) & (pl.col("rubric") == rubric.name))
    now = dt.datetime.now(dt.timezone.utc)
    for (sample_id,), group in mine.group_by(["sample_id"], maintain_order=True):
        values = group["value"].to_list()
        detail = {"source": "review", "rubric_version": sorted(set(group["rubric_version"].to_list())),
                  "reviewers": dict(zip(group["reviewer"].to_list(), group["label"].to_list())),
                  "reviewed_at": group["created_at"].max().isoformat()}
        rows.append({"model": model, "fingerprint": fingerprint, "dataset": dataset, "sample_id": sample_id,
                     "metric": rubric.metric, "value": _aggregate(rubric, values), "direction": "maximize",
                     "dimension": "baseline_grounding", "locality": "local", "status": "scored",
                     "detail": json.dumps(detail, sort_keys=True),
                     "signature": f"{rubric.metric}{REVIEW_SIGNATURE}v:{rubric.version}",
                     "params": identity_json({"metric": rubric.metric, "version": rubric.version, "params": {"source": "review"}}),
                     "run_id": run_id, "created_at": now})
    return rows


@dataclass
class RecordReport:
    """What :func:`record_reviews` did: reviews given, ``added`` (new), ``already``
    (stored before: a retry or a re-import), and the (model, rubric) pairs rewritten."""

    given: int = 0
    added: int = 0
    refreshed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def already(self) -> int:
        return self.given - self.added


def record_reviews(lake: LakeStore, evaluation: str, rows: list[dict[str, Any]]) -> RecordReport:
    """Append review ``rows`` (from :func:`review_row`) and rewrite the ``human:<rubric>``
    score rows they touch. Idempotent: the same review twice is stored once. Raises
    :class:`ReviewSpecError` when a rubric's name is already a human rating of the dataset
    (its rows would be replaced)."""
    report = RecordReport(given=len(rows))
    if not rows:
        return report
    row, plan = review_plan(lake, evaluation)
    fingerprint = row["fingerprint"]
    touched = sorted({(r["model"], r["rubric"]) for r in rows})
    _refuse_dataset_ratings(lake, fingerprint, {r for _, r in touched})
    stored = set(lake.read("reviews", where={"fingerprint": fingerprint}, columns=["review_id"])["review_id"].to_list()) \
        if lake.exists("reviews") else set()
    report.added = len({r["review_id"] for r in rows} - stored)
    lake.append("reviews", rows)  # keyed: a review already stored is not stored again
    for _ in range(5):  # a concurrent reviewer's append between our read and our write: read again
        version = lake.version("reviews")
        reviews = latest_reviews(lake, fingerprint)
        for model, rubric_name in touched:
            rubric = plan.rubric(rubric_name)
            lake.replace("scores", human_rows(reviews, rubric, model, fingerprint, row["dataset"], f"review-v{version}"),
                         {"model": model, "fingerprint": fingerprint, "metric": rubric.metric})
        if lake.version("reviews") == version:
            break
    report.refreshed = touched
    return report


def _refuse_dataset_ratings(lake: LakeStore, fingerprint: str, rubrics: Iterable[str]) -> None:
    if not lake.exists("scores"):
        return
    names = [f"human:{r}" for r in rubrics]
    taken = lake.read("scores", where={"fingerprint": fingerprint, "metric": names}, columns=["metric", "signature"])
    clash = sorted({m for m, s in zip(taken["metric"], taken["signature"]) if REVIEW_SIGNATURE not in (s or "")})
    if clash:
        raise ReviewSpecError(f"{', '.join(clash)} already holds the dataset's human ratings in this evaluation; "
                              "give the rubric another name (e.g. reviewed_" + clash[0].removeprefix("human:") + ")")


@dataclass
class ImportReport(RecordReport):
    """:class:`RecordReport` plus ``errors``: (line, message) of each row left out."""

    errors: list[tuple[int, str]] = field(default_factory=list)


def import_csv(lake: LakeStore, evaluation: str, path: str | Path, reviewer: str | None = None) -> ImportReport:
    """Record the reviews of a CSV file with a header: ``sample_id``, ``model``, ``rubric``,
    ``value`` (a label or a number) and ``reviewer`` (or ``reviewer`` given for every row).
    Rows naming an unknown sample, model, rubric or value are reported, the others are
    recorded. Raises :class:`ReviewSpecError` for a file without the needed columns."""
    from resources.datasets import read_text

    row, plan = review_plan(lake, evaluation)
    targets = review_targets(lake, row["fingerprint"])
    reader = csv.DictReader(read_text(Path(path)).splitlines())
    needed = {"sample_id", "model", "rubric", "value"} | (set() if reviewer else {"reviewer"})
    missing = sorted(needed - set(reader.fieldnames or []))
    if missing:
        raise ReviewSpecError(f"{path}: missing columns {missing}; the header needs sample_id, model, rubric, value"
                              + ("" if reviewer else " and reviewer (or pass --reviewer)"))
    rows, errors = [], []
    now = dt.datetime.now(dt.timezone.utc)
    for line, item in enumerate(reader, start=2):
        try:
            rows.append(checked_review(row, plan, targets, item["model"], item["sample_id"], item["rubric"],
                                       reviewer or item.get("reviewer"), item["value"], "csv", now))
        except ReviewSpecError as exc:
            errors.append((line, str(exc)))
    report = record_reviews(lake, row["name"], rows)
    return ImportReport(given=report.given, added=report.added, refreshed=report.refreshed, errors=errors)
