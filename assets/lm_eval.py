"""The ``lm_eval_summary`` asset: lm-eval's aggregates beside facetlake's, per fingerprint (issue 18).

For an evaluation that lm-eval ran (or whose output was imported), one row per model x
lm-eval metric x filter: lm-eval's aggregate and standard error from its
``results_<date>.json`` next to facetlake's own value, standard error and interval for
the same numbers, computed from the per-sample ``scores`` (see
:func:`resources.lm_eval.bridge.summary_rows`). The check
``check_lm_eval_summary_agrees`` fails when any pair differs by more than 1e-12.
An evaluation that is not an lm-eval one gets no rows.
"""

import dagster as dg
import polars as pl

from assets.declare import delta_asset, table_metadata
from assets.common import evaluation_fingerprint, markdown_table, record_run
from assets.freshness import stored_scores_markers
from assets.partitions import EVALUATION_EDGE, lm_eval_partitions
from resources.catalog import evaluation_row, evaluation_spec, utcnow
from resources.lake.resource import LakeStore
from resources.lm_eval.common import AGREEMENT_TOLERANCE
from resources.lm_eval.summary import summary_rows

CHECK_AGREES = "check_lm_eval_summary_agrees"

LM_EVAL_SUMMARY_COLUMNS = {
    "model": "model partition key",
    "task": "lm-eval task",
    "metric": "the scores name (lm_eval:<metric>[,<filter>])",
    "lm_eval_metric": "lm-eval's key (<metric>,<filter>)",
    "aggregation": "lm-eval's aggregation (mean, bleu, perplexity, ...)",
    "lm_eval_value": "lm-eval's aggregate (results_<date>.json)",
    "lm_eval_stderr": "lm-eval's standard error (null when lm-eval reported N/A)",
    "facetlake_value": "facetlake's value from the stored per-sample scores",
    "facetlake_stderr": "sd(ddof=1)/sqrt(n) of the per-sample values (mean aggregations)",
    "ci_low": "facetlake's 95% interval, lower end",
    "ci_high": "facetlake's 95% interval, upper end",
    "ci_method": "Wilson for 0/1 values, percentile bootstrap otherwise",
    "agrees": f"values (and standard errors) within {AGREEMENT_TOLERANCE:g}",
}


@delta_asset(
    "lm_eval_summary",
    partitions_def=lm_eval_partitions,  # only evaluations lm-eval ran (issue 26, fault 12)
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE)],
    kinds={"polars"},
    columns=LM_EVAL_SUMMARY_COLUMNS,
    checks={CHECK_AGREES: "lm-eval's aggregates and standard errors equal facetlake's (within 1e-12)"},
)
def lm_eval_summary(context: dg.AssetExecutionContext, lake: LakeStore):
    """lm-eval's aggregate and stderr next to facetlake's value, stderr and interval for the same numbers, one partition per fingerprint."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    row = evaluation_row(lake, fingerprint)
    section = evaluation_spec(lake, fingerprint).lm_eval
    scores_version = lake.version("scores")
    marker = stored_scores_markers(lake, [fingerprint])[fingerprint]  # read first: scores newer than it make this stale
    rows = summary_rows(lake, fingerprint, section, row["dataset"]) if section else []
    now = utcnow()
    for r in rows:
        r.update(run_id=context.run_id, created_at=now)
    version = lake.replace("lm_eval_summary", rows, {"fingerprint": fingerprint})
    responses_version = lake.version("lm_eval_responses")
    frame = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    view = frame.select("model", "metric", "lm_eval_value", "facetlake_value", "lm_eval_stderr", "facetlake_stderr", "agrees") if rows else frame
    yield dg.MaterializeResult(
        metadata={"fingerprint": fingerprint, "dataset": row["dataset"], **table_metadata(lake, "lm_eval_summary", len(rows), version),
                  "lm_eval_evaluation": bool(section), "summary": dg.MetadataValue.md(markdown_table(view, float_digits=6))}
    )
    disagreeing = [r for r in rows if r["agrees"] is False]
    yield dg.AssetCheckResult(
        check_name=CHECK_AGREES,
        passed=not disagreeing,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "tolerance": AGREEMENT_TOLERANCE,
            "n_compared": sum(1 for r in rows if r["agrees"] is not None),
            "n_disagreeing": len(disagreeing),
            "disagreeing": dg.MetadataValue.json([
                {k: r[k] for k in ("model", "metric", "lm_eval_value", "facetlake_value", "lm_eval_stderr", "facetlake_stderr")}
                for r in disagreeing[:50]
            ]),
        },
    )
    # the runs row last (after the table and the check): its scores marker makes this verdict fresh (assets/freshness.py)
    record_run(
        lake, context, asset="lm_eval_summary", table="lm_eval_summary", version=version, rows=len(rows), started_at=started,
        fingerprint=fingerprint, dataset=row["dataset"],
        provenance={"read": {"scores": scores_version, "lm_eval_responses": responses_version}, "reads": {"scores_marker": marker}},
    )
