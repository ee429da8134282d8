"""facetlake metric operations: pure metric code (no Dagster, no Delta, no I/O).

Importing this package registers every built-in metric family with the registry, so
``metric_ops.registry.get_metric(name)`` sees them all.
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
from metric_ops.registry import REGISTRY, UnknownMetricError, get_metric, list_metrics
from metric_ops import lexical as _lexical  # noqa: F401  (registers built-in metrics)
from metric_ops import bleu as _bleu  # noqa: F401
from metric_ops import corpus as _corpus  # noqa: F401  (corpus chrF / chrF++; corpus-level rows, issue 15)
from metric_ops import rouge as _rouge  # noqa: F401
from metric_ops import meteor as _meteor  # noqa: F401
from metric_ops import bertscore as _bertscore  # noqa: F401
from metric_ops import toolcalls as _toolcalls  # noqa: F401
from metric_ops import retrieval as _retrieval  # noqa: F401
from metric_ops import rag_checks as _rag_checks  # noqa: F401
from metric_ops import judged as _judged  # noqa: F401  (LLM-as-a-judge: G-Eval, jury, RAG Triad, issue 4)
from metric_ops import confidence as _confidence  # noqa: F401  (token log-probability confidence, issue 7)
from metric_ops import agents as _agents  # noqa: F401  (agent-episode oracles, issue 17)

__all__ = [
    "DIMENSIONS",
    "LOCALITIES",
    "STATUSES",
    "Direction",
    "Metric",
    "MetricDefinitionError",
    "Sample",
    "Score",
    "REGISTRY",
    "UnknownMetricError",
    "get_metric",
    "list_metrics",
]
