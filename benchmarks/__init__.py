"""Benchmarks and metric cross-validation: tooling beside the product, not part of the
Dagster code location or the runtime packages (metric_ops, resources, assets, pipelines)."""
