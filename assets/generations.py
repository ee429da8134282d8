"""The ``generations`` asset: model outputs per model x fingerprint partition."""


import time

import dagster as dg
from tqdm.auto import tqdm

from assets.common import load_samples, partition_parts, record_run
from pipelines.partitions import model_fingerprint_partitions
from resources.backends import GenerationRequest, ModelBackends, render_prompt
from resources.catalog import evaluation_row, evaluation_spec, model_spec, utcnow
from resources.lake import LakeStore

GENERATIONS_COLUMNS = [
    ("model", "model partition key"),
    ("fingerprint", "configuration fingerprint"),
    ("sample_id", "sample id"),
    ("output", "raw model output (null on error)"),
    ("status", "ok / error"),
    ("error", "error message"),
    ("backend", "backend kind"),
    ("prompt", "prompt sent"),
]


@dg.asset(
    partitions_def=model_fingerprint_partitions,
    deps=[dg.AssetDep("samples", partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="fingerprint"))],
    group_name="evaluation",
    kinds={"delta"},
    pool="delta_generations",
    metadata={
        "delta_table": "generations",
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(n, "string", description=d) for n, d in GENERATIONS_COLUMNS]),
    },
)
def generations(context: dg.AssetExecutionContext, lake: LakeStore, backends: ModelBackends) -> dg.MaterializeResult:
    """Model outputs, one row per sample, partitioned by model x fingerprint (precomputed or live backends)."""
    started = utcnow()
    model, fingerprint = partition_parts(context)
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    backend = backends.backend_for(model_spec(lake, model, fingerprint))
    samples = load_samples(lake, fingerprint)
    requests = [GenerationRequest(sample=s, prompt=render_prompt(spec.adapter, s)) for s in samples]
    rows = []
    t0 = time.perf_counter()
    for request, result in zip(
        requests,
        tqdm(backend.generate(requests, spec.generation), total=len(requests), desc=f"generate {model}", leave=False),
    ):
        rows.append(
            {
                "model": model,
                "fingerprint": fingerprint,
                "dataset": dataset,
                "sample_id": result.sample_id,
                "output": result.output,
                "status": result.status,
                "error": result.error,
                "backend": backend.kind,
                "prompt": request.prompt,
                "latency_s": result.latency_s,
                "tokens_in": result.tokens_in,
                "tokens_out": result.tokens_out,
                "run_id": context.run_id,
                "created_at": utcnow(),
            }
        )
    wall = time.perf_counter() - t0
    version = lake.replace("generations", rows, {"model": model, "fingerprint": fingerprint})
    n_err = sum(r["status"] == "error" for r in rows)
    identity = backend.identity()
    record_run(
        lake, context, asset="generations", table="generations", version=version, rows=len(rows), started_at=started,
        model=model, fingerprint=fingerprint, dataset=dataset,
        provenance={"model_spec": backend.spec, "model_identity": identity, "generation": spec.generation, "wall_s": wall,
                    "samples_version": lake.version("samples")},
    )
    return dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint,
            "model": model,
            "backend": backend.kind,
            "model_identity": dg.MetadataValue.json(identity),
            "dagster/row_count": len(rows),
            "n_ok": len(rows) - n_err,
            "n_error": n_err,
            "wall_s": round(wall, 3),
            "delta_version": version,
        }
    )
