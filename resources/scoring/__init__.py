"""What scoring needs beyond metric_ops: the inputs a metric is built with
(:mod:`~resources.scoring.metric_inputs`) and the live judge clients and their cache
(:mod:`~resources.scoring.judges`).
"""

from resources.scoring.metric_inputs import ANNOTATION_PARAM, MetricInputError, build_metric, MetricInputs
from resources.scoring.judges import (
    API_KEY_ENV,
    ApiJudge,
    BackendJudge,
    judge_for,
    DeltaJudgeCache,
    judge_session,
)

__all__ = [
    "ANNOTATION_PARAM",
    "MetricInputError",
    "build_metric",
    "MetricInputs",
    "API_KEY_ENV",
    "ApiJudge",
    "BackendJudge",
    "judge_for",
    "DeltaJudgeCache",
    "judge_session",
]
