"""The ``correlations`` asset: meta-evaluation per fingerprint and model.

Pearson, Spearman and Kendall (tau-b) between every pair of score names over the
samples both scored, and between each metric and each human rating (``human:*``), from
:func:`metric_ops.meta_eval.correlation_rows`. Same-dimension metric pairs with
direction-oriented Pearson r < 0.5 are flagged ``divergent`` with the samples that disagree most.

Human ratings rate the dataset's own output (e.g. SF-RES's and QAGS's shipped system
outputs), so metric-human pairs are computed only for models whose outputs are that
output (model spec ``precomputed:column=...``); for any other model (a live model, a
``baseline:`` system) correlating its scores with ratings of a different text would be
meaningless, and those pairs are left out (the metadata says so).
"""


import json
from typing import Any

import dagster as dg
import polars as pl

from assets.analysis_common import pinned_versions, read_pinned, reads_record
from assets.common import evaluation_fingerprint, markdown_table, record_run
from metric_ops.compare import detail_json
from metric_ops.meta_eval import DIVERGENCE_THRESHOLD, correlation_rows
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from resources.catalog import CatalogError, evaluation_row, model_spec, utcnow
from resources.lake import SCHEMAS, LakeStore



def rated_output_model(lake: LakeStore, model: str, fingerprint: str) -> bool:
    """Whether the dataset's human ratings are about ``model``'s outputs: its spec reads
    the outputs from a dataset column (``precomputed:column=NAME``)."""
    try:
        spec = model_spec(lake, model, fingerprint)
    except CatalogError:
        return False
    return spec.startswith("precomputed:column=")


def correlation_table(lake: LakeStore, fingerprint: str, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``correlations`` rows of one fingerprint (every model) and the ``reads`` record."""
    row = evaluation_row(lake, fingerprint)
    fingerprint = row["fingerprint"]
    versions = pinned_versions(lake)
    scores = read_pinned(lake, "scores", versions, {"fingerprint": fingerprint})
    if scores.height == 0:
        raise dg.Failure(f"no scores stored under fingerprint {fingerprint[:12]}; materialise scores for its models first")
    reads = reads_record(fingerprint, versions, scores)
    human_models = []
    names = SCHEMAS["correlations"].names
    now = utcnow()
    out = []
    for model in sorted(set(scores["model"].to_list())):
        include_human = rated_output_model(lake, model, fingerprint)
        if include_human:
            human_models.append(model)
        for r in correlation_rows(scores.filter(pl.col("model") == model), include_human=include_human):
            full = {n: None for n in names}
            full.update({k: v for k, v in r.items() if k in names})
            full.update(fingerprint=fingerprint, dataset=row["dataset"], model=model, detail=detail_json(r["detail"]),
                        reads=json.dumps(reads, sort_keys=True), run_id=run_id, created_at=now)
            out.append(full)
    reads["human_ratings_correlated_for"] = human_models
    return out, reads


def meta_evaluation_table(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """metric x human rating: n, Pearson, Spearman, Kendall (the meta-evaluation headline)."""
    meta = []
    for r in rows:
        if r["kind"] != "metric-human":
            continue
        human, metric = (r["metric_a"], r["metric_b"]) if r["metric_a"].startswith("human:") else (r["metric_b"], r["metric_a"])
        meta.append({"model": r["model"], "metric": metric, "human": human, "n": r["n"],
                     "pearson": r["pearson"], "spearman": r["spearman"], "kendall": r["kendall"]})
    if not meta:
        return pl.DataFrame({"metric": []})
    return pl.DataFrame(meta, schema_overrides={"pearson": pl.Float64, "spearman": pl.Float64, "kendall": pl.Float64}).sort(
        ["model", "human", "metric"]
    )


def _shade(value: float | None) -> str:
    if value is None:
        return "·"
    return " ░▒▓█"[min(4, int(abs(value) * 5))] + ("-" if value < 0 else "+")


@dg.asset(
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE)],
    group_name="evaluation",
    kinds={"delta", "scipy"},
    pool="delta_correlations",
    metadata={"delta_table": "correlations"},
)
def correlations(context: dg.AssetExecutionContext, lake: LakeStore) -> dg.MaterializeResult:
    """Meta-evaluation per fingerprint and model: Pearson/Spearman/Kendall between metrics and with human ratings; divergent pairs flagged."""
    started = utcnow()
    rows, reads = correlation_table(lake, evaluation_fingerprint(context), context.run_id)
    fingerprint = reads["fingerprint"]
    dataset = rows[0]["dataset"] if rows else None
    version = lake.replace("correlations", rows, {"fingerprint": fingerprint})
    record_run(
        lake, context, asset="correlations", table="correlations", version=version, rows=len(rows), started_at=started,
        fingerprint=fingerprint, dataset=dataset, provenance={"read": reads["table_versions"], "reads": reads},
    )
    divergent = pl.DataFrame(
        [{"model": r["model"], "metric_a": r["metric_a"], "metric_b": r["metric_b"], "n": r["n"], "pearson": r["pearson"]}
         for r in rows if r["divergent"]],
        schema_overrides={"pearson": pl.Float64},
    )
    meta = meta_evaluation_table(rows)
    chart = "\n".join(
        f"{r['metric']:<24} {r['human']:<24} spearman {_shade(r['spearman'])} {'' if r['spearman'] is None else format(r['spearman'], '+.3f')}"
        for r in meta.iter_rows(named=True)
    ) if meta.height and "human" in meta.columns else "(no human ratings correlated)"
    return dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint,
            "dataset": dataset,
            "dagster/row_count": len(rows),
            "n_divergent": divergent.height,
            "human_ratings_correlated_for": ", ".join(reads["human_ratings_correlated_for"]) or "none (no model's outputs are the rated ones)",
            "meta_evaluation": dg.MetadataValue.md(markdown_table(meta)),
            "divergent_pairs": dg.MetadataValue.md(
                f"same dimension, direction-oriented Pearson r < {DIVERGENCE_THRESHOLD}\n\n" + markdown_table(divergent)
            ),
            "chart": dg.MetadataValue.md("Spearman rho, metric vs human rating\n\n```\n" + chart + "\n```"),
            "reads": dg.MetadataValue.json(reads),
            **{f"{t}_version_read": v for t, v in reads["table_versions"].items() if v is not None},
            "delta_version": version,
        }
    )
