"""The ``correlations`` asset: meta-evaluation per fingerprint and model.

Pearson, Spearman and Kendall (tau-b) between every pair of score names over the
samples both scored, and between each metric and each human rating (``human:*``), from
:func:`metric_ops.compare.meta_eval.correlation_rows`. Same-dimension metric pairs with
direction-oriented Pearson r < 0.5 are flagged ``divergent`` with the samples that disagree most.

Human ratings rate the dataset's own output (e.g. SF-RES's and QAGS's shipped system
outputs), so metric-human pairs are computed only for models whose outputs are that
output (model spec ``precomputed:column=...``); for any other model (a live model, a
``baseline:`` system) correlating its scores with ratings of a different text would be
meaningless, and those pairs are left out (the metadata says so).

Corpus-level scores (``corpus_bleu``, ``corpus_chrf``, idf BERTScore: one value per
model, no per-sample values) are not correlated; ``reads.corpus_level_not_correlated``
names them. After a rescore of one metric only the pairs with that metric are
recomputed; every other row is kept as stored (same ``run_id``).
"""


import json
from typing import Any, Collection

import dagster as dg
import polars as pl

from assets.declare import delta_asset, table_metadata
from assets.analysis_common import metric_input_keys, pinned_versions, plan_recompute, previous_metric_keys, read_pinned, reads_record
from assets.common import evaluation_fingerprint, markdown_table, record_run
from metric_ops.compare import corpus_metrics, detail_json, legacy_corpus_metrics
from metric_ops.compare.meta_eval import DIVERGENCE_THRESHOLD, correlation_rows
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from resources.catalog import CatalogError, evaluation_row, model_spec, utcnow
from resources.lake.schemas import SCHEMAS
from resources.lake.resource import LakeStore



def rated_output_model(lake: LakeStore, model: str, fingerprint: str) -> bool:
    """Whether the dataset's human ratings are about ``model``'s outputs: its spec reads
    the outputs from a dataset column (``precomputed:column=NAME``)."""
    try:
        spec = model_spec(lake, model, fingerprint)
    except CatalogError:
        return False
    return spec.startswith("precomputed:column=")


def _correlation_inputs(lake: LakeStore, fingerprint: str) -> dict[str, Any]:
    row = evaluation_row(lake, fingerprint)
    fingerprint = row["fingerprint"]
    versions = pinned_versions(lake)
    scores = read_pinned(lake, "scores", versions, {"fingerprint": fingerprint})
    if scores.height == 0:
        raise dg.Failure(f"no scores stored under fingerprint {fingerprint[:12]}; materialise scores for its models first")
    reads = reads_record(fingerprint, versions, scores)
    corpus = sorted(corpus_metrics(scores) | legacy_corpus_metrics(scores))
    reads["corpus_level_not_correlated"] = corpus
    models = sorted(set(scores["model"].to_list()))
    human_models = [m for m in models if rated_output_model(lake, m, fingerprint)]
    reads["human_ratings_correlated_for"] = human_models
    per_sample = scores.filter(~pl.col("metric").is_in(corpus))
    return {"row": row, "fingerprint": fingerprint, "scores": per_sample, "models": models, "human_models": human_models,
            "reads": reads}


def _correlation_rows_for(inputs: dict[str, Any], run_id: str, only: Collection[str] | None) -> list[dict[str, Any]]:
    scores = inputs["scores"]
    names = SCHEMAS["correlations"].names
    reads_json = json.dumps(inputs["reads"], sort_keys=True)
    now = utcnow()
    out = []
    for model in inputs["models"]:
        include_human = model in inputs["human_models"]
        for r in correlation_rows(scores.filter(pl.col("model") == model), include_human=include_human, only=only):
            full = {n: None for n in names}
            full.update({k: v for k, v in r.items() if k in names})
            full.update(fingerprint=inputs["fingerprint"], dataset=inputs["row"]["dataset"], model=model,
                        detail=detail_json(r["detail"]), reads=reads_json, run_id=run_id, created_at=now)
            out.append(full)
    return out


def correlation_table(lake: LakeStore, fingerprint: str, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``correlations`` rows of one fingerprint (every model) and the ``reads`` record."""
    inputs = _correlation_inputs(lake, fingerprint)
    return _correlation_rows_for(inputs, run_id, None), inputs["reads"]


def correlation_update(
    lake: LakeStore, fingerprint: str, run_id: str, incremental: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(every row after the update, the rows computed now, the ``reads`` record, the
    provenance: per-score input keys, recomputed / dropped score names).

    Only the pairs with a score name whose scores changed since the last
    ``correlations`` run of this fingerprint are recomputed; the other stored rows are
    kept as they are (same ``run_id``)."""
    inputs = _correlation_inputs(lake, fingerprint)
    fp = inputs["fingerprint"]
    keys = metric_input_keys(inputs["scores"], {"models": inputs["models"], "human_models": inputs["human_models"]})
    stored = lake.read("correlations", where={"fingerprint": fp}) if lake.exists("correlations") else pl.DataFrame()
    stored_metrics = set(stored["metric_a"].to_list()) | set(stored["metric_b"].to_list()) if stored.height else set()
    changed, dropped = plan_recompute(keys, previous_metric_keys(lake, "correlations", fp), stored_metrics, incremental)
    touched = changed | dropped
    fresh = _correlation_rows_for(inputs, run_id, changed) if changed else []
    kept = ([r for r in stored.iter_rows(named=True) if r["metric_a"] not in touched and r["metric_b"] not in touched]
            if stored.height else [])
    provenance = {"metric_keys": keys, "recomputed": sorted(changed), "dropped": sorted(dropped), "rows_recomputed": len(fresh),
                  "rows_kept": len(kept)}
    return kept + fresh, fresh, inputs["reads"], provenance


class CorrelationsConfig(dg.Config):
    """Run config of ``correlations``: ``incremental`` recomputes only the pairs of score
    names whose scores changed since the last run (False: every pair)."""

    incremental: bool = True


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


@delta_asset(
    "correlations",
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE)],
    kinds={"polars", "scipy"},
)
def correlations(context: dg.AssetExecutionContext, config: CorrelationsConfig, lake: LakeStore) -> dg.MaterializeResult:
    """Meta-evaluation per fingerprint and model: Pearson/Spearman/Kendall between metrics and with human ratings; divergent pairs flagged."""
    started = utcnow()
    rows, fresh, reads, provenance = correlation_update(lake, evaluation_fingerprint(context), context.run_id, config.incremental)
    fingerprint = reads["fingerprint"]
    dataset = rows[0]["dataset"] if rows else None
    if provenance["recomputed"] or provenance["dropped"]:
        # the kept rows are written back unchanged (same run_id): the partition holds the pairs of every metric
        version = lake.replace("correlations", rows, {"fingerprint": fingerprint})
    else:
        version = lake.version("correlations")
    record_run(
        lake, context, asset="correlations", table="correlations", version=version, rows=len(fresh), started_at=started,
        fingerprint=fingerprint, dataset=dataset, provenance={"read": reads["table_versions"], "reads": reads, **provenance},
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
            **table_metadata(lake, "correlations", len(rows), version),
            "rows_recomputed": len(fresh),
            "recomputed": ", ".join(provenance["recomputed"]) or "none (no score changed)",
            "corpus_level_not_correlated": ", ".join(reads["corpus_level_not_correlated"]) or "none",
            "n_divergent": divergent.height,
            "human_ratings_correlated_for": ", ".join(reads["human_ratings_correlated_for"]) or "none (no model's outputs are the rated ones)",
            "meta_evaluation": dg.MetadataValue.md(markdown_table(meta)),
            "divergent_pairs": dg.MetadataValue.md(
                f"same dimension, direction-oriented Pearson r < {DIVERGENCE_THRESHOLD}\n\n" + markdown_table(divergent)
            ),
            "chart": dg.MetadataValue.md("Spearman rho, metric vs human rating\n\n```\n" + chart + "\n```"),
            "reads": dg.MetadataValue.json(reads),
            **{f"{t}_version_read": v for t, v in reads["table_versions"].items() if v is not None},
        }
    )
