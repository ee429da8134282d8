"""Jobs over the partitioned assets (one partitions definition per job)."""

import dagster as dg

from pipelines.partitions import fingerprint_partitions, model_fingerprint_partitions

evaluation_job = dg.define_asset_job(
    "evaluation_job",
    selection=dg.AssetSelection.assets("generations", "annotations", "scores"),
    partitions_def=model_fingerprint_partitions,
    description="Generate (or read precomputed) outputs and score them for one model x fingerprint partition.",
)

samples_job = dg.define_asset_job(
    "samples_job",
    selection=dg.AssetSelection.assets("samples"),
    partitions_def=fingerprint_partitions,
    description="Load, normalise and validate a dataset for one fingerprint.",
)

summary_job = dg.define_asset_job(
    "summary_job",
    selection=dg.AssetSelection.assets("summary"),
    partitions_def=fingerprint_partitions,
    description="Summarise every model's scores under one fingerprint.",
)
