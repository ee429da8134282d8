"""Partitions, defined once.

``model`` and ``fingerprint`` are dynamic: they are registered when an evaluation is
registered (``facetlake run`` / ``facetlake register``) or when the inbox sensor sees a new
outputs file, never by hand. Generations and scores are partitioned by their product;
samples and the summary by fingerprint alone.
"""

import dagster as dg

model_partitions = dg.DynamicPartitionsDefinition(name="model")
fingerprint_partitions = dg.DynamicPartitionsDefinition(name="fingerprint")
model_fingerprint_partitions = dg.MultiPartitionsDefinition(
    {"fingerprint": fingerprint_partitions, "model": model_partitions}
)


def partition_key(model: str, fingerprint: str) -> dg.MultiPartitionKey:
    """The model x fingerprint partition key."""
    return dg.MultiPartitionKey({"fingerprint": fingerprint, "model": model})
