"""facetlake metric operations: pure metric code (no Dagster, no Delta, no I/O).

The built-in metric families are listed by name in ``metric_ops.registry.BUILTIN_METRICS``
and imported on first use, so ``metric_ops.registry.get_metric(name)`` sees them all
without this package importing every family up front.
"""

from metric_ops.base import (
    DIMENSIONS,
    LOCALITIES,
    STATUSES,
    Direction,
    Metric,
    MetricDefinitionError,
    Sample,
    Score,
)
from metric_ops.errors import FacetlakeError
from metric_ops.registry import REGISTRY, UnknownMetricError, get_metric, list_metrics
from metric_ops.plugins import Registry

__all__ = [
    "DIMENSIONS",
    "LOCALITIES",
    "STATUSES",
    "Direction",
    "Metric",
    "MetricDefinitionError",
    "Sample",
    "Score",
    "FacetlakeError",
    "REGISTRY",
    "Registry",
    "UnknownMetricError",
    "get_metric",
    "list_metrics",
]
