"""The ``annotations`` asset: values extracted from raw outputs, one row per sample x annotator.

Annotators (resources/prompting/annotators.py) never alter the stored output; metrics score an
annotation's value with ``metric_params: {METRIC: {use_annotation: NAME}}``.
"""


import dagster as dg
import polars as pl

from assets.declare import delta_asset, table_metadata
from assets.common import load_samples, markdown_table, partition_parts, record_run
from assets.partitions import pair_partitions
from resources.prompting.annotators import make_annotators, run_annotators
from resources.backends import ModelBackends
from resources.catalog import evaluation_row, evaluation_spec, utcnow
from resources.backends.planning import latest_rows
from resources.lake.resource import LakeStore

ANNOTATIONS_COLUMNS = {
    "model": "model partition key",
    "fingerprint": "configuration fingerprint",
    "sample_id": "sample id",
    "annotator": "annotator name",
    "kind": "regex / strip_reasoning / model",
    "value": "extracted value (null when nothing was extracted)",
    "matched": "whether the annotator found what it looks for",
    "span": "raw text span the value came from",
    "span_start": "span start offset in the annotated text",
    "span_end": "span end offset in the annotated text",
    "error": "why no value could be extracted",
    "signature": "annotator kind, version and settings",
}


@delta_asset("annotations", partitions_def=pair_partitions, deps=["generations"], columns=ANNOTATIONS_COLUMNS)
def annotations(context: dg.AssetExecutionContext, lake: LakeStore, backends: ModelBackends) -> dg.MaterializeResult:
    """Extracted answers per sample x annotator (value, matched, raw span), partitioned by model x fingerprint."""
    started = utcnow()
    model, fingerprint = partition_parts(context)
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    annotators = make_annotators(spec.annotators, backend_factory=lambda s: backends.backend_for(s, spec.runtime))
    samples, results = [], {}
    if annotators:  # no annotators: nothing to read (the replace below still clears stale rows)
        samples = load_samples(lake, fingerprint)
        gens = latest_rows(lake.read("generations", where={"model": model, "fingerprint": fingerprint},
                                     columns=["sample_id", "output", "status", "created_at"]))
        outputs_by_id = dict(zip(gens["sample_id"].to_list(),
                                 gens.select(pl.when(pl.col("status") == "ok").then(pl.col("output"))).to_series().to_list()))
        outputs = [outputs_by_id.get(s.sample_id) for s in samples]
        results = run_annotators(annotators, samples, outputs)
    now = utcnow()
    rows = []
    for annotator in annotators:
        signature = annotator.signature()
        for sample, a in zip(samples, results[annotator.name]):
            rows.append(
                {"model": model, "fingerprint": fingerprint, "dataset": dataset, "sample_id": sample.sample_id,
                 "annotator": annotator.name, "kind": annotator.kind, "value": a.value, "matched": a.matched, "span": a.span,
                 "span_start": a.span_start, "span_end": a.span_end, "error": a.error, "signature": signature,
                 "run_id": context.run_id, "created_at": now}
            )
    version = lake.replace("annotations", rows, {"model": model, "fingerprint": fingerprint})
    record_run(
        lake, context, asset="annotations", table="annotations", version=version, rows=len(rows), started_at=started,
        model=model, fingerprint=fingerprint, dataset=dataset,
        provenance={"annotators": spec.annotators, "signatures": {a.name: a.signature() for a in annotators},
                    "read": {"generations": lake.version("generations")}},
    )
    per = (
        pl.DataFrame(rows).group_by("annotator").agg(pl.col("matched").sum().alias("n_matched"), pl.len().alias("n_total")).sort("annotator")
        if rows else pl.DataFrame()
    )
    return dg.MaterializeResult(
        metadata={"fingerprint": fingerprint, "model": model, **table_metadata(lake, "annotations", len(rows), version),
                  "annotators": ", ".join(a.name for a in annotators) or "none",
                  "per_annotator": dg.MetadataValue.md(markdown_table(per))}
    )
