"""A metric's structured identity, and the one parser of stored signature strings.

The signature (:meth:`metric_ops.base.Metric.signature`) is text in sacrebleu's manner:
``name|v:VERSION|key:value|...|library:version|...``. The scores table also keeps the
same identity as structured JSON in its ``params`` column::

    {"metric": "bleu", "version": "1", "params": {"lowercase": "no", "smooth_method": "exp", "tokenize": "13a"}}

- ``metric``: the registry name of the metric that computed the row (not the emitted
  score name: ``rouge_1`` emits ``rouge_1_f``, ``rouge_1_p`` and ``rouge_1_r``);
- ``version``: the metric's declared version (text), None when the signature has none
  (human ratings, lm-eval scores);
- ``params``: ``{key: text}``, each value exactly as the signature writes it
  (:meth:`~metric_ops.base.Metric.param_fields`: ``yes``/``no`` for bools, lists
  comma-joined; a judged metric's dict or list as JSON, a long one as ``#`` + a hash),
  plus ``use_annotation`` for a metric scoring an annotator's extracted value (its
  signature ends in ``|annotation:NAME``, resources/scoring/metric_inputs.py).

:func:`metric_identity` builds it from a metric instance; :func:`parse_signature` reads
it back from a stored signature (rows written before the column existed) and is the only
place in the project that splits a signature. The two agree for every registered metric
(tests/test_identity.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from metric_ops.errors import FacetlakeError

if TYPE_CHECKING:  # pragma: no cover
    from metric_ops.base import Metric

__all__ = ["ANNOTATION_KEY", "SignatureParseError", "identity_json", "metric_identity", "metric_params_json", "parse_signature",
           "signature_params_json"]


#: the identity's parameter naming the annotation a metric scores (the ``metric_params``
#: key a spec sets); in the signature it is the last field, ``annotation:NAME``
ANNOTATION_KEY = "use_annotation"


class SignatureParseError(FacetlakeError, ValueError):
    """A stored signature is empty or not text (the scores row is malformed)."""


def metric_identity(metric: "Metric") -> dict[str, Any]:
    """``{"metric": name, "version": version, "params": {key: text}}`` of a metric instance
    (see the module docstring). JSON-serialisable; raises nothing."""
    params = dict(metric.param_fields())
    annotation = getattr(metric, "use_annotation", None)
    if annotation:
        params[ANNOTATION_KEY] = str(annotation)
    return {"metric": metric.name, "version": str(metric.version), "params": params}


def identity_json(identity: Mapping[str, Any]) -> str:
    """``identity`` as compact JSON with sorted keys: the text stored in ``scores.params``."""
    return json.dumps(dict(identity), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def metric_params_json(metric: "Metric") -> str:
    """The ``scores.params`` text of the rows ``metric`` writes (:func:`metric_identity`)."""
    return identity_json(metric_identity(metric))


def _metric_class(name: str) -> Any:
    """The registered class whose canonical name is ``name`` exactly (None otherwise: a
    removed metric, ``human:<rating>``, ``lm_eval:<metric>``)."""
    from metric_ops.registry import REGISTRY

    try:
        cls = REGISTRY.get_class(name)
    except Exception:  # noqa: BLE001 - an unknown name is parsed without its class
        return None
    return cls if cls.name == name else None


def parse_signature(signature: str) -> dict[str, Any]:
    """The identity (:func:`metric_identity`'s shape) recorded in a stored signature.

    The first ``|`` field is the metric name; a second field ``v:X`` is its version (else
    the version is None). For a registered metric the class says which of the remaining
    ``key:value`` fields are parameters: those before its library versions
    (``Metric.libraries``) and trailing fields (``Metric.signature_extras``, e.g.
    sacrebleu's own ``sacrebleu_sig:nrefs:var|case:mixed|...``), after its leading fields
    (``Metric.signature_lead``, e.g. a judged metric's ``judge:`` and ``decoding:``).
    For any other name every remaining field is a parameter (``human:x|source:dataset``
    gives ``{"source": "dataset"}``). A last field ``annotation:NAME`` is the
    ``use_annotation`` parameter. A parameter whose text holds ``|`` cannot be told
    apart from the next field; no registered metric writes one.

    Raises :class:`SignatureParseError` for an empty or non-text signature."""
    if not isinstance(signature, str) or not signature.strip():
        raise SignatureParseError(f"cannot parse metric signature {signature!r}: expected 'name|v:VERSION|key:value|...' "
                                  "(the row is malformed; rescore it with `facetlake score --force`)")
    name, *fields = signature.split("|")
    annotation = fields.pop()[len("annotation:"):] if fields and fields[-1].startswith("annotation:") else None
    version = None
    if fields and fields[0].startswith("v:"):
        version = fields.pop(0)[2:]
    cls = _metric_class(name)
    lead = set(getattr(cls, "signature_lead", ()) or ())
    stop = set(getattr(cls, "libraries", ()) or ()) | set(getattr(cls, "signature_extras", ()) or ())
    params: dict[str, str] = {}
    leading = True
    for field in fields:
        key, _, value = field.partition(":")
        if leading and key in lead:
            continue
        leading = False
        if key in stop:
            break
        params[key] = value
    if annotation:
        params[ANNOTATION_KEY] = annotation
    return {"metric": name, "version": version, "params": params}


def signature_params_json(signature: str) -> str:
    """The ``scores.params`` text recovered from a stored signature (:func:`parse_signature`)."""
    return identity_json(parse_signature(signature))

