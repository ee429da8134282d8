"""The ``scores`` asset: one row per sample x metric score, per model x fingerprint partition.

With no run config it scores every metric of the evaluation plus the dataset's human
ratings (``human:<name>``) and replaces the partition. With ``metrics: [...]`` in the run
config (``facetlake score --metric NAME``, or the Launchpad) it computes only those
metrics and replaces only their rows: no other metric is recomputed and the
``generations`` table is only read.
"""


from typing import Any

import dagster as dg
import polars as pl
from tqdm.auto import tqdm

from assets.common import load_samples, markdown_table, partition_parts, record_run
from metric_ops.registry import REGISTRY
from metric_ops.runner import human_rating_rows, score_rows
from pipelines.partitions import model_fingerprint_partitions
from resources.catalog import evaluation_row, evaluation_spec, model_spec, utcnow
from resources.judges import judge_session, merged_params
from resources.lake import LakeStore
from resources.outbound import offline_mode
from resources.privacy import anonymised_references, offline_refusal_rows
from assets.outbound_scope import outbound_scope
from resources.metric_inputs import MetricInputs

SCORES_COLUMNS = [
    ("model", "model partition key"),
    ("fingerprint", "configuration fingerprint (64 hex)"),
    ("dataset", "dataset name"),
    ("sample_id", "sample id"),
    ("metric", "score name (human:<rating> for human ratings)"),
    ("value", "float; null unless status = scored"),
    ("direction", "maximize / minimize"),
    ("dimension", "baseline_grounding / epistemic / factual / process"),
    ("locality", "local / external"),
    ("status", "scored / unscored / error"),
    ("detail", "JSON: reasoning, per-claim verdicts, error message"),
    ("signature", "metric name, version, parameters, library versions"),
]


class ScoresConfig(dg.Config):
    """Run config of ``scores``: ``metrics`` empty = every metric of the evaluation."""

    metrics: list[str] = []
    # metric parameters at rescoring time: "KEY=VALUE" for every selected metric or "METRIC.KEY=VALUE"
    # (e.g. "judge=api:gpt-4o-mini@https://api.openai.com/v1"); merged over the spec's metric_params
    params: list[str] = []


def score_partition(
    lake: LakeStore, model: str, fingerprint: str, metrics: list[str] | None, run_id: str,
    params: list[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score the stored generations of one partition.

    Returns the score rows and the ``where`` clause whose rows they replace. Raises
    :class:`~metric_ops.registry.UnknownMetricError` for an unknown metric name.
    """
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    samples = load_samples(lake, fingerprint)
    samples = anonymised_references(lake, samples, model, fingerprint, spec.privacy)  # privacy.references
    gens = lake.read("generations", where={"model": model, "fingerprint": fingerprint}, columns=["sample_id", "output", "status"])
    if gens.height == 0:
        raise dg.Failure(f"no generations stored for model {model!r} under fingerprint {fingerprint[:12]}; materialise generations first")
    outputs_by_id = {r["sample_id"]: (r["output"] if r["status"] == "ok" else None) for r in gens.iter_rows(named=True)}
    outputs = [outputs_by_id.get(s.sample_id) for s in samples]
    metric_inputs = MetricInputs(lake, model, fingerprint, samples, outputs)
    selected = list(metrics) if metrics else list(spec.metrics)
    names = [REGISTRY.resolve(m) for m in selected]  # fail fast on unknown names, before any work
    rows: list[dict[str, Any]] = []
    emitted: list[str] = []
    with judge_session(lake):  # judged metrics read/write the lake's judge_cache (issue 4)
        for name in names:
            # annotation values / token log-probabilities where the metric asks for them (issue 7)
            metric, metric_samples, metric_outputs = metric_inputs.prepare(name, merged_params(spec.metric_params, name, params))
            emitted.extend(metric.emitted())
            if metric.locality == "external" and offline_mode():  # refused before any client or socket
                rows.extend(offline_refusal_rows(metric, metric_samples))
                continue
            with tqdm(total=len(samples), desc=f"{name} {model}", leave=False) as bar:
                rows.extend(score_rows(metric, metric_samples, metric_outputs, progress=bar.update))
    # human ratings rate the dataset's own output: they are scores only of a model whose
    # outputs are that output (precomputed:column=...), never of a live or heuristic model (issue 8)
    if not metrics and model_spec(lake, model, fingerprint).startswith("precomputed:column="):
        human = human_rating_rows(samples)
        rows.extend(human)
    # lm-eval's own per-sample metric values, as lm_eval:<metric>[,<filter>] (issue 18)
    if not metrics and model_spec(lake, model, fingerprint).startswith("lm_eval:"):
        from resources.lm_eval_bridge import stored_score_rows

        rows.extend(stored_score_rows(lake, model, fingerprint))
    now = utcnow()
    for row in rows:
        row.update(model=model, fingerprint=fingerprint, dataset=dataset, run_id=run_id, created_at=now)
    where: dict[str, Any] = {"model": model, "fingerprint": fingerprint}
    if metrics:
        where["metric"] = emitted
    return rows, where


def score_metadata(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and a per-metric Markdown table for materialisation metadata."""
    frame = pl.DataFrame(rows, schema_overrides={"value": pl.Float64}) if rows else pl.DataFrame({"metric": [], "value": [], "status": []})
    counts = {s: int((frame["status"] == s).sum()) if frame.height else 0 for s in ("scored", "unscored", "error")}
    table = (
        frame.group_by("metric")
        .agg(
            pl.col("value").mean().alias("mean"),
            (pl.col("status") == "scored").sum().alias("n_scored"),
            pl.len().alias("n_total"),
            (pl.col("status") == "error").sum().alias("n_error"),
        )
        .sort("metric")
        if frame.height
        else frame
    )
    return {
        "dagster/row_count": len(rows),
        "n_scored": counts["scored"],
        "n_unscored": counts["unscored"],
        "n_error": counts["error"],
        "per_metric": dg.MetadataValue.md(markdown_table(table)),
    }


@dg.asset(
    partitions_def=model_fingerprint_partitions,
    deps=["generations", "annotations"],
    group_name="evaluation",
    kinds={"delta"},
    pool="delta_scores",
    metadata={
        "delta_table": "scores",
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(n, "string", description=d) for n, d in SCORES_COLUMNS]),
    },
)
@outbound_scope  # anonymiser + outbound ledger for judge calls (privacy issue)
def scores(context: dg.AssetExecutionContext, config: ScoresConfig, lake: LakeStore) -> dg.MaterializeResult:
    """Metric scores per sample (value, direction, dimension, status, detail, signature), partitioned by model x fingerprint."""
    started = utcnow()
    model, fingerprint = partition_parts(context)
    generations_version = lake.version("generations")
    rows, where = score_partition(lake, model, fingerprint, config.metrics or None, context.run_id, config.params)
    version = lake.replace("scores", rows, where)
    signatures = sorted({r["signature"] for r in rows})
    record_run(
        lake, context, asset="scores", table="scores", version=version, rows=len(rows), started_at=started,
        model=model, fingerprint=fingerprint, dataset=rows[0]["dataset"] if rows else None,
        provenance={"metrics": config.metrics or "all", "signatures": signatures,
                    "read": {"generations": generations_version, "samples": lake.version("samples")}},
    )
    return dg.MaterializeResult(
        metadata={"fingerprint": fingerprint, "model": model, "delta_version": version,
                  "generations_version_read": generations_version, **score_metadata(rows)}
    )
