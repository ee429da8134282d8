"""Neural metrics: BERTScore and semantic similarity (:mod:`~metric_ops.neural.bertscore`),
the packaged sentence encoder (:mod:`~metric_ops.neural.embeddings`) and device choice
(:mod:`~metric_ops.neural.devices`). torch and transformers are imported when a model is
loaded, not here.
"""

from metric_ops.neural.bertscore import (
    IdfUndefinedError,
    idf_weights,
    idf_default,
    BERT_SCORE_BATCH,
    padded_references,
    greedy_match,
    f1_condition,
    BERTScore,
    SemanticSimilarity,
)
from metric_ops.neural.embeddings import (
    DEFAULT_BATCH_SIZE,
    default_model_path,
    resolve_model_path,
    Encoder,
    get_encoder,
    dtype_tag,
    model_identity,
)
from metric_ops.neural.devices import AUTO, DeviceError, cuda_available, resolve_device, resolve_dtype

__all__ = [
    "IdfUndefinedError",
    "idf_weights",
    "idf_default",
    "BERT_SCORE_BATCH",
    "padded_references",
    "greedy_match",
    "f1_condition",
    "BERTScore",
    "SemanticSimilarity",
    "DEFAULT_BATCH_SIZE",
    "default_model_path",
    "resolve_model_path",
    "Encoder",
    "get_encoder",
    "dtype_tag",
    "model_identity",
    "AUTO",
    "DeviceError",
    "cuda_available",
    "resolve_device",
    "resolve_dtype",
]
