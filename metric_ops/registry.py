"""The metric registry: name/alias -> Metric class, with "did you mean" errors.

Modelled on lm-evaluation-harness's ``lm_eval/api/registry.py``: the generic
:class:`~metric_ops.plugins.Registry` (base-class check, aliases, "did you mean",
built-ins listed lazily by name) holding :class:`~metric_ops.base.Metric` classes. The
built-in metrics are listed once in :data:`BUILTIN_METRICS` (name -> ``"module:Class"``)
and imported on first use; a concrete ``Metric`` subclass defined anywhere else
registers itself when defined (``Metric.__init_subclass__``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from metric_ops.errors import FacetlakeError
from metric_ops.plugins import NameTakenError, Registry, UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    from metric_ops.base import Metric

__all__ = [
    "BUILTIN_METRICS", "REGISTRY", "MetricParamError", "MetricRegistry", "MetricRequest", "UnknownMetricError", "check_params",
    "get_metric", "list_metrics", "merged_params", "metric_requests", "parse_param_overrides",
]

# Every built-in metric: canonical name -> "module:Class", imported on first use.
# Adding a metric: its module plus one line here (CONTRIBUTING.md).
BUILTIN_METRICS: dict[str, str] = {
    "abstention_accuracy": "metric_ops.rag.checks:AbstentionAccuracy",
    "action_oracle": "metric_ops.agents.oracles:ActionOracle",
    "answer_relevance": "metric_ops.judged.rag_triad:AnswerRelevance",
    "bertscore": "metric_ops.neural.bertscore:BERTScore",
    "bfcl_ast_accuracy": "metric_ops.toolcalls:BFCLAstAccuracy",
    "bleu": "metric_ops.lexical.bleu:SentenceBLEU",
    "chrf": "metric_ops.lexical.chrf:ChrF",
    "chrf_pp": "metric_ops.lexical.chrf:ChrFPlusPlus",
    "confidence_tiers": "metric_ops.confidence:ConfidenceTiers",
    "context_relevance": "metric_ops.judged.rag_triad:ContextRelevance",
    "corpus_bleu": "metric_ops.lexical.bleu:CorpusBLEU",
    "corpus_chrf": "metric_ops.lexical.chrf:CorpusChrF",
    "corpus_chrf_pp": "metric_ops.lexical.chrf:CorpusChrFPlusPlus",
    "episode_reward": "metric_ops.agents.oracles:EpisodeReward",
    "exact_match": "metric_ops.lexical.squad:ExactMatch",
    "faithfulness": "metric_ops.judged.rag_triad:Faithfulness",
    "g_eval": "metric_ops.judged.geval_jury:GEval",
    "jury": "metric_ops.judged.geval_jury:Jury",
    "low_confidence_share": "metric_ops.confidence:LowConfidenceShare",
    "mean_token_logprob": "metric_ops.confidence:MeanTokenLogprob",
    "meteor": "metric_ops.lexical.meteor:Meteor",
    "min_token_probability": "metric_ops.confidence:MinTokenProbability",
    "nltk_bleu": "metric_ops.lexical.bleu:NltkBLEU",
    "numeric_accuracy": "metric_ops.rag.checks:NumericAccuracy",
    "outputs_oracle": "metric_ops.agents.oracles:OutputsOracle",
    "perplexity": "metric_ops.confidence:Perplexity",
    "policy_oracle": "metric_ops.agents.oracles:PolicyOracle",
    "quasi_exact_match": "metric_ops.lexical.squad:QuasiExactMatch",
    "rag_citations": "metric_ops.rag.checks:CitationChecks",
    "rag_evidence": "metric_ops.rag.checks:EvidenceChecks",
    "retrieval": "metric_ops.rag.retrieval:RetrievalMetrics",
    "rouge_1": "metric_ops.lexical.rouge:Rouge1",
    "rouge_2": "metric_ops.lexical.rouge:Rouge2",
    "rouge_l": "metric_ops.lexical.rouge:RougeL",
    "rouge_lsum": "metric_ops.lexical.rouge:RougeLsum",
    "rouge_s": "metric_ops.lexical.rouge:RougeS",
    "rouge_su": "metric_ops.lexical.rouge:RougeSU",
    "rouge_w": "metric_ops.lexical.rouge:RougeW",
    "semantic_similarity": "metric_ops.neural.bertscore:SemanticSimilarity",
    "token_f1": "metric_ops.lexical.squad:TokenF1",
    "tool_calls": "metric_ops.toolcalls:ToolCallMetrics",
}


class UnknownMetricError(UnknownNameError):
    """No metric of that name or alias is registered."""


class MetricRegistry(Registry["type[Metric]"]):
    """Holds every metric class by name, alias and emitted score name.

    Iterating yields the classes (sorted by name), as callers of the old registry expect."""

    def __init__(self) -> None:
        super().__init__("metric", base="metric_ops.base:Metric", builtins=BUILTIN_METRICS, error=UnknownMetricError,
                         taken=MetricNameTakenError, hint=" (run `facetlake metrics` to list the {n} registered metrics)")

    def add(self, cls: type[Metric]) -> None:
        """Register ``cls`` under ``cls.name`` with its aliases and emitted score names.

        Raises :class:`MetricNameTakenError` (a ``ValueError``) if the name is taken by another
        class, and :class:`RegistryError` if ``cls`` is not a ``Metric`` subclass."""
        self.register(cls.name, cls, aliases=(*cls.aliases, *cls.emitted()), unique=True)

    def oracles(self) -> list[str]:
        """Names of the agent oracles (metrics declaring ``oracle = True``), sorted; imports
        every built-in metric."""
        return [name for name, cls in self.items() if getattr(cls, "oracle", False)]

    def get_class(self, name: str) -> type[Metric]:
        """The metric class registered under ``name`` (see :meth:`resolve`)."""
        return self.get_entry(name)

    def create(self, name: str, **params: Any) -> Metric:
        """An instance of the metric ``name`` with ``params``, checked and converted by
        :func:`check_params` first (raises :class:`MetricParamError` naming the parameter)."""
        cls = self.get_class(name)
        return cls(**check_params(cls, params))

    def __iter__(self) -> Iterator[type[Metric]]:  # type: ignore[override]
        return iter(self.values())


class MetricNameTakenError(NameTakenError):
    """Two different metric classes declare the same name."""


class MetricParamError(FacetlakeError, ValueError):
    """A metric parameter is unknown or has a value of the wrong kind."""


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


# scalar parameter types: (what the error says is expected, an example value)
_SCALARS: dict[type, tuple[str, str]] = {
    bool: ("true or false", "true"),
    int: ("a whole number", "3"),
    float: ("a number", "0.5"),
    str: ("text", "VALUE"),
}


def _scalar(value: Any, hint: type) -> Any:
    """``value`` as ``hint`` (bool, int, float or str); raises ``ValueError``.

    bool: a bool, 0/1 or true/false/yes/no/on/off/1/0 text; int: an int, a whole float or
    integer text; float: an int, a float or numeric text; str: text or a number. A bool
    is never read as a number or as text."""
    if hint is bool:
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):  # True and False included
            return bool(value)
        raise ValueError(value)
    if isinstance(value, bool):
        raise ValueError(value)
    if hint is str:
        if isinstance(value, (str, int, float)):
            return str(value)
        raise ValueError(value)
    if isinstance(value, str):
        return hint(value.strip())  # int("3"), float("0.5"); ValueError otherwise
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, hint) or (hint is float and isinstance(value, int)):
        return hint(value)
    raise ValueError(value)


def _convert(metric: str, key: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the annotated type ``hint``; raises MetricParamError."""
    import collections.abc as cabc
    import types
    import typing

    def bad(expected: str, example: str) -> MetricParamError:
        return MetricParamError(f"{metric}: parameter {key} must be {expected}, got {value!r} (e.g. --param {key}={example})")

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in {"none", "null", ""} and type(None) in typing.get_args(hint)):
            return None
        if len(options) == 1:
            return _convert(metric, key, value, options[0])
        return value
    if hint in _SCALARS:
        try:
            return _scalar(value, hint)
        except ValueError:
            raise bad(*_SCALARS[hint]) from None
    if origin in (cabc.Sequence, list, tuple) and origin is not None:
        (item,) = typing.get_args(hint)[:1] or (Any,)
        items = value
        if isinstance(value, str):
            text = value.strip()
            if text[:1] in "([" and text[-1:] in ")]":
                text = text[1:-1]
            items = [t.strip() for t in text.split(",") if t.strip()]
        if not isinstance(items, (list, tuple)):
            raise bad("a list", "0.1,0.2,0.3" if item is float else "a,b")
        if item in (bool, int, float, str):
            try:
                return [_scalar(v, item) for v in items]
            except ValueError:
                raise bad(f"a list of {item.__name__} values", "0.1,0.2,0.3" if item is float else "a,b") from None
        return list(items)
    return value


def check_params(cls: type[Metric], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against ``cls.__init__``'s signature and converted to its
    annotated types: bool (true/false/yes/no/1/0), int, float, str, optional values
    (none/null), and lists (a YAML list or comma-separated text, e.g. ``0.1,0.2,0.3``).

    Raises :class:`MetricParamError` for a parameter the metric does not take (listing
    the ones it does) or a value of the wrong kind (naming parameter, expected kind and
    an example). Parameters of a metric taking ``**kwargs`` pass through unchecked."""
    import inspect
    import typing

    signature = inspect.signature(cls.__init__)
    accepted = {n: p for n, p in list(signature.parameters.items())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that cannot be evaluated: check names only
        hints = {}
    out = {}
    for key, value in params.items():
        if key not in accepted:
            if open_ended:
                out[key] = value
                continue
            valid = ", ".join(accepted) or "none"
            raise MetricParamError(f"{cls.name} takes no parameter {key!r}; its parameters: {valid}")
        hint = hints.get(key)
        out[key] = value if hint is None or hint is Any else _convert(cls.name, key, value, hint)
    return out


# --------------------------------------------------------------------------- parameters at rescoring time
def parse_param_overrides(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["judge=api:m@URL", "faithfulness.max_attempts=3"]`` -> ``{"*": {"judge": ...},
    "faithfulness": {"max_attempts": 3}}``: the ``--param`` strings of ``facetlake score``
    and ``judge``, parsed once. Values are read as YAML scalars/lists (``n=5`` is an int,
    ``judges=[a, b]`` a list); a value YAML cannot read stays a string. A ``METRIC.``
    prefix may be any name or alias (``rougeL.use_stemmer``) and is stored under the
    canonical name. Raises ``ValueError`` for an item without ``=``,
    :class:`UnknownMetricError` for an unknown prefix and
    :class:`~metric_ops.secrets.SecretInputError` for a value that looks like a secret
    (``api_key=sk-...``, a judge URL with a password; :mod:`metric_ops.secrets`): these
    parameters are stored (run config, signatures, the evaluation's metrics)."""
    import yaml

    from metric_ops.secrets import JUDGE_FIX, refuse_secrets

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            refuse_secrets(item, "command-line parameter", fix=JUDGE_FIX)  # the message below quotes the item
            raise ValueError(f"metric parameter {item!r} is not KEY=VALUE (or METRIC.KEY=VALUE), e.g. judge=api:gpt-4o-mini@https://api.openai.com/v1")
        metric, dot, name = key.rpartition(".")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, (dict,)) and ":" in raw and not raw.strip().startswith("{"):
            value = raw  # e.g. api:m@http://host:8000/v1 read by YAML as a mapping
        refuse_secrets({key: value}, "command-line parameter", fix=JUDGE_FIX)
        if dot:
            metric = REGISTRY.resolve(metric)
        out.setdefault(metric if dot else "*", {})[name if dot else key] = value
    return out


def merged_params(spec_params: Mapping[str, Mapping[str, Any]], name: str,
                  overrides: Sequence[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameters of metric ``name``: the evaluation spec's ``metric_params[name]``, then
    the overrides: a request's parsed parameters (a mapping), or ``--param`` strings
    (``KEY=VALUE`` for every metric, then ``NAME.KEY=VALUE``)."""
    if isinstance(overrides, Mapping):
        return {**dict(spec_params.get(name, {})), **dict(overrides)}
    parsed = parse_param_overrides(list(overrides or []))
    return {**dict(spec_params.get(name, {})), **parsed.get("*", {}), **parsed.get(name, {})}


@dataclass(frozen=True)
class MetricRequest:
    """One metric to score: its canonical registry ``name`` and the ``params`` given at
    rescoring time (parsed, typed values; the evaluation's ``metric_params`` are merged
    under them where the metric is built)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


def metric_requests(metrics: Sequence[str], params: Sequence[str] = ()) -> list[MetricRequest]:
    """``--metric`` names and ``--param`` strings resolved once: one :class:`MetricRequest`
    per metric (canonical name, each once, in order), with the ``KEY=VALUE`` parameters
    for every metric and its own ``METRIC.KEY=VALUE`` ones.

    Raises :class:`UnknownMetricError` ("did you mean") for an unknown name, the errors of
    :func:`parse_param_overrides`, and ``ValueError`` for a ``METRIC.`` prefix naming a
    metric that is not requested (the fix named)."""
    names = list(dict.fromkeys(REGISTRY.resolve(m) for m in metrics))
    overrides = parse_param_overrides(list(params))
    stray = sorted(set(overrides) - {"*", *names})
    if stray:
        raise ValueError(
            f"--param names {', '.join(stray)}, which is not among the metrics being scored ({', '.join(names)}); "
            f"add --metric {stray[0]} or drop the METRIC. prefix"
        )
    return [MetricRequest(name, {**overrides.get("*", {}), **overrides.get(name, {})}) for name in names]


REGISTRY = MetricRegistry()


def get_metric(name: str, **params: Any) -> "Metric":
    """Instantiate a registered metric by name or alias; raises :class:`UnknownMetricError`."""
    return REGISTRY.create(name, **params)


def list_metrics() -> list[type["Metric"]]:
    """Every registered metric class, sorted by name."""
    return list(REGISTRY)
