"""Agreement rows of an evaluation's reviews (issue 29), per rubric:

- ``cohen_kappa``: each pair of reviewers over the items (model, sample) both reviewed
  (unweighted for a nominal rubric, quadratic weights for an ordinal or interval one);
- ``fleiss_kappa``: over the items reviewed by exactly ``reviewers_per_sample`` reviewers;
- ``krippendorff_alpha``: every review, at the rubric's level;
- ``judge_vs_human``: every other score of the evaluation against the reviewed value per
  item: AUROC for a two-label rubric, else Spearman's rho (and Cohen's kappa when the score
  is 0/1 and the rubric has two labels).

Each row: ``rubric``, ``kind``, ``reviewer_a``, ``reviewer_b``, ``metric``, ``value``,
``n`` (items), ``detail`` (JSON: the items the reviewers disagree on, at most 50). A
statistic with nothing to measure (one label throughout, fewer than two items) is left
out with its reason in ``skipped``, never stored as 0.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import polars as pl

from metric_ops.review import ReviewPlan, cohen_kappa, fleiss_kappa, krippendorff_alpha, auroc
from metric_ops.stats.corr import spearman
from resources.lake.resource import LakeStore
from resources.review.store import latest_reviews, review_plan


def agreement_rows(lake: LakeStore, evaluation: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, skipped reasons) for ``evaluation``'s current fingerprint (see the module)."""
    row, plan = review_plan(lake, evaluation)
    reviews = latest_reviews(lake, row["fingerprint"])
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for rubric in plan.rubrics:
        mine = reviews.filter(pl.col("rubric") == rubric.name).with_columns(item=pl.col("model") + "/" + pl.col("sample_id"))
        if mine.height == 0:
            skipped.append(f"{rubric.name}: no reviews yet")
            continue
        wide = mine.pivot(on="reviewer", index="item", values="value").sort("item")
        reviewers = [c for c in wide.columns if c != "item"]
        base = {"rubric": rubric.name, "reviewer_a": None, "reviewer_b": None, "metric": None}

        def add(kind: str, compute, n: int, disagreements: list[str], **keys: Any) -> None:
            try:
                value = float(compute())
            except ValueError as exc:
                skipped.append(f"{rubric.name} {kind} {keys}: {exc}")
                return
            rows.append({**base, **keys, "kind": kind, "value": value, "n": n,
                         "detail": json.dumps({"disagreements": disagreements[:50]})})

        for a, b in itertools.combinations(reviewers, 2):
            both = wide.filter(pl.col(a).is_not_null() & pl.col(b).is_not_null())
            x, y = both[a].to_numpy(), both[b].to_numpy()
            weights = None if rubric.level == "nominal" else "quadratic"
            add("cohen_kappa", lambda: cohen_kappa(x, y, weights), both.height,
                both.filter(pl.col(a) != pl.col(b))["item"].to_list(), reviewer_a=a, reviewer_b=b)
        matrix = wide.select(reviewers).to_numpy().T.astype(float)  # reviewers x items, nan = not reviewed
        disagree = [item for item, column in zip(wide["item"].to_list(), matrix.T)
                    if len(set(column[~np.isnan(column)].tolist())) > 1]
        complete = matrix[:, (~np.isnan(matrix)).sum(axis=0) == plan.reviewers_per_sample]
        if plan.reviewers_per_sample >= 2 and complete.shape[1]:
            add("fleiss_kappa", lambda: fleiss_kappa(_counts(complete)), complete.shape[1], disagree)
        add("krippendorff_alpha", lambda: krippendorff_alpha(matrix, rubric.level), int(((~np.isnan(matrix)).sum(axis=0) >= 2).sum()),
            disagree)
        rows += _judge_vs_human(lake, row["fingerprint"], plan, rubric, skipped)
    return rows, skipped


def _counts(matrix: np.ndarray) -> np.ndarray:
    """items x categories counts of a raters x items matrix (no nan)."""
    categories = np.unique(matrix)
    return np.stack([(matrix == c).sum(axis=0) for c in categories], axis=1)


def _judge_vs_human(lake: LakeStore, fingerprint: str, plan: ReviewPlan, rubric, skipped: list[str]) -> list[dict[str, Any]]:
    scores = lake.read("scores", where={"fingerprint": fingerprint}, columns=["model", "sample_id", "metric", "value", "status",
                                                                             "created_at"])
    scores = scores.filter(pl.col("sample_id").is_not_null() & (pl.col("status") == "scored")).sort("created_at").unique(
        subset=["model", "sample_id", "metric"], keep="last")
    human = scores.filter(pl.col("metric") == rubric.metric).select("model", "sample_id", pl.col("value").alias("human"))
    out = []
    for metric in sorted(set(scores["metric"].to_list()) - {rubric.metric}):
        if metric.startswith("human:"):
            continue
        pairs = scores.filter(pl.col("metric") == metric).join(human, on=["model", "sample_id"])
        if pairs.height < 2:
            continue
        judge, reviewed = pairs["value"].to_numpy(), pairs["human"].to_numpy()
        two_labels = len(rubric.labels) == 2
        kind = "auroc" if two_labels else "spearman"
        try:
            with np.errstate(all="ignore"):
                value = auroc(reviewed, judge) if two_labels else spearman(judge, reviewed)[0]
            if not np.isfinite(value):
                raise ValueError("a constant series")
        except ValueError as exc:
            skipped.append(f"{rubric.name} judge_vs_human {metric}: {exc}")
            continue
        out.append({"rubric": rubric.name, "kind": f"judge_vs_human_{kind}", "reviewer_a": None, "reviewer_b": None,
                    "metric": metric, "value": float(value), "n": pairs.height, "detail": json.dumps({})})
    return out
