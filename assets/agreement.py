"""The ``agreement`` asset (issue 29): per evaluation and rubric, how far human reviewers
agree with each other (Cohen's kappa per pair, Fleiss' kappa, Krippendorff's alpha) and
how far every judge or metric agrees with them (AUROC or Spearman's rho), computed by
resources/review/agreement.py from the latest reviews. A verdict like ``correlations``:
its ``runs`` row carries the scores marker it read (reviews rewrite the ``human:<rubric>``
score rows), so the analysis sensor recomputes it after any review (assets/freshness.py).
"""


import dagster as dg
import polars as pl

from assets.common import evaluation_fingerprint, markdown_table, record_run
from assets.declare import delta_asset, table_metadata
from assets.freshness import stored_scores_markers
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from metric_ops.review import parse_review
from resources.catalog import evaluation_row, evaluation_spec, utcnow
from resources.lake.resource import LakeStore

AGREEMENT_COLUMNS = {
    "rubric": "the review rubric (its scores are human:<rubric>)",
    "kind": "cohen_kappa / fleiss_kappa / krippendorff_alpha / judge_vs_human_auroc / judge_vs_human_spearman",
    "reviewer_a": "first reviewer (cohen_kappa)",
    "reviewer_b": "second reviewer (cohen_kappa)",
    "metric": "the judged metric (judge_vs_human)",
    "value": "the statistic",
    "n": "items (model, sample) it is computed over",
    "detail": "JSON: the items the reviewers disagree on (at most 50)",
}


@delta_asset(
    "agreement",
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE)],
    kinds={"polars"},
    columns=AGREEMENT_COLUMNS,
)
def agreement(context: dg.AssetExecutionContext, lake: LakeStore) -> dg.MaterializeResult:
    """Inter-reviewer and judge-vs-human agreement per rubric, one partition per evaluation fingerprint."""
    from resources.review import agreement_rows

    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    row = evaluation_row(lake, fingerprint)
    marker = stored_scores_markers(lake, [fingerprint])[fingerprint]  # read first: scores newer than it make this stale
    rows, skipped = agreement_rows(lake, row["name"]) if parse_review(evaluation_spec(lake, fingerprint).review).rubrics else ([], [])
    now = utcnow()
    for r in rows:
        r.update(fingerprint=fingerprint, run_id=context.run_id, created_at=now)
    version = lake.replace("agreement", rows, {"fingerprint": fingerprint})
    record_run(lake, context, asset="agreement", table="agreement", version=version, rows=len(rows), started_at=started,
               fingerprint=fingerprint, dataset=row["dataset"],
               provenance={"reads": {"scores_marker": marker}, "read": {"reviews": lake.version("reviews") if lake.exists("reviews") else None},
                           "skipped": skipped})
    view = pl.DataFrame(rows).select("rubric", "kind", "reviewer_a", "reviewer_b", "metric", "value", "n") if rows else pl.DataFrame()
    return dg.MaterializeResult(metadata={"fingerprint": fingerprint, **table_metadata(lake, "agreement", len(rows), version),
                                          "agreement": dg.MetadataValue.md(markdown_table(view)),
                                          "skipped": dg.MetadataValue.json(skipped)})
