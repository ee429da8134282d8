"""The Metric contract shared by every metric family.

A metric is a class with declared, checked metadata (name, direction, transparency
dimension, execution locality, version, required sample fields) and a pure
``score_batch`` method that maps a batch of samples and model outputs to scores.
Declaring no direction (or an unknown dimension/locality) raises
:class:`MetricDefinitionError` when the class is defined, not when it is first used.

The signature string follows sacrebleu's habit (``nrefs:1|case:mixed|...|version:2.4``):
every setting that changes the number, plus the versions of the libraries that compute
it, so two numbers with different settings are never averaged together.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass, field
from importlib import metadata as _importlib_metadata
from typing import Any, ClassVar, Mapping, Sequence
from metric_ops.errors import FacetlakeError

DIMENSIONS: tuple[str, ...] = ("baseline_grounding", "epistemic", "factual", "process")
LOCALITIES: tuple[str, ...] = ("local", "external")
STATUSES: tuple[str, ...] = ("scored", "unscored", "error")
SAMPLE_FIELDS: tuple[str, ...] = ("input", "output", "references", "context", "metadata", "ratings")
#: ``detail["level"]`` of a corpus-level metric's stored rows (metric_ops/scoring/corpus.py)
CORPUS_LEVEL = "corpus"
#: a scored value outside its declared range by at most this much, relative to the bound
#: (``RANGE_RTOL * max(1, |bound|)``), is float rounding and is clamped to the bound
RANGE_RTOL: float = 1e-6


class MetricDefinitionError(FacetlakeError, TypeError):
    """A metric class is missing or misdeclares part of the Metric contract."""


class Direction(str, enum.Enum):
    """Whether a higher (``maximize``) or lower (``minimize``) value is better."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


@dataclass(frozen=True)
class Sample:
    """One evaluation item in the uniform shape every dataset is normalised to.

    Attributes:
        sample_id: unique id within its dataset (string; numeric ids are stringified).
        input: the prompt / question / source text given to the model.
        references: gold outputs (zero or more); empty when the dataset has none.
        context: retrieved or source passages (zero or more), e.g. for RAG metrics.
        metadata: every other field of the raw row (JSON-serialisable).
        ratings: human ratings by name (e.g. ``{"naturalness": 4.5}``); stored in the
            scores table as metrics named ``human:<name>``.
    """

    sample_id: str
    input: str
    references: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    ratings: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.sample_id, str) or not self.sample_id:
            raise ValueError(f"sample_id must be a non-empty string, got {self.sample_id!r}")
        if isinstance(self.references, str) or isinstance(self.context, str):
            raise TypeError(
                f"sample {self.sample_id}: references and context must be sequences of strings, "
                "not a bare string (wrap a single reference as [text])"
            )
        object.__setattr__(self, "references", tuple(self.references))
        object.__setattr__(self, "context", tuple(self.context))


@dataclass(frozen=True)
class Score:
    """One score for one sample.

    ``value`` is a float in the metric's declared range when ``status == "scored"`` and
    ``None`` otherwise. ``unscored`` means the metric had nothing to measure (never a
    zero); ``error`` means the computation failed, with the message in ``detail["error"]``.
    ``detail`` is JSON-serialisable (reasoning chains, per-claim verdicts, intermediate
    outputs).
    """

    value: float | None
    status: str = "scored"
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "scored":
            if self.value is None or not isinstance(self.value, (int, float)) or math.isnan(float(self.value)):
                raise ValueError(f"a scored Score needs a finite float value, got {self.value!r}")
            object.__setattr__(self, "value", float(self.value))
        elif self.value is not None:
            raise ValueError(f"a {self.status} Score carries no value, got {self.value!r}")

    @classmethod
    def unscored(cls, reason: str, **detail: Any) -> "Score":
        """No score because there was nothing to measure; ``reason`` says what was missing."""
        return cls(None, "unscored", {"reason": reason, **detail})

    @classmethod
    def error(cls, message: str, **detail: Any) -> "Score":
        """The computation failed for this sample; the message is kept in ``detail``."""
        return cls(None, "error", {"error": message, **detail})


@functools.lru_cache(maxsize=None)
def library_version(dist: str) -> str:
    """Installed version of distribution ``dist`` or ``"absent"`` (looked up once per
    process: each lookup scans the installed distributions' metadata, ~1 ms)."""
    try:
        return _importlib_metadata.version(dist)
    except _importlib_metadata.PackageNotFoundError:
        return "absent"


class Metric:
    """Base class of every metric.

    Subclasses declare as class attributes:

    - ``name`` (str, snake case, unique in the registry),
    - ``direction`` (:class:`Direction`) -- required; a class without one fails at
      definition with :class:`MetricDefinitionError`,
    - ``dimension`` (one of :data:`DIMENSIONS`),
    - ``locality`` (``"local"`` or ``"external"``; default ``"local"``),
    - ``version`` (str; bump it whenever the number can change),
    - ``requires`` (sample fields needed, subset of :data:`SAMPLE_FIELDS`),
    - ``value_range`` ((lo, hi) of a scored value, bounds included, ``float("inf")``
      allowed) -- required: a concrete metric that does not declare it (in its own class
      or a family base class) fails at definition; ``score_ranges`` (optional
      ``{score_name: (lo, hi)}``) overrides it for some emitted scores. Values leaving
      the range are handled centrally (:func:`check_range`), never per metric,
    - ``libraries`` (distribution names whose versions enter the signature),
    - ``score_directions`` (optional ``{score_name: Direction}`` when one metric emits
      several scores, e.g. ROUGE precision/recall/F; default ``{name: direction}``),
    - ``binary`` (True when every emitted score is 0 or 1 by definition, e.g. exact
      match; default False) and, for a metric that emits several scores of which only
      some are 0/1, ``binary_scores`` (their names). The analysis chooses Wilson
      intervals, McNemar's test and Cohen's g from this declaration, never from the
      values a run happened to produce (:meth:`emitted_binary`),
    - ``blank_reference_is_answer`` (optional, default False): True when an empty
      reference has a meaning of its own (SQuAD v2's "no answer" gold); otherwise the
      runner drops empty or whitespace-only references like null ones and a sample left
      with none is ``unscored`` (:func:`metric_ops.scoring.rows.drop_blank_references`),
    - ``oracle`` (optional, default False): True for an agent oracle that judges a whole
      episode against the task's ground truth (metric_ops/agents/oracles.py); the registry
      lists them with :meth:`metric_ops.registry.MetricRegistry.oracles`.

    and implement :meth:`score_batch`. Constructor keyword arguments are the metric's
    parameters; they are kept in ``self.params`` and enter the signature.
    An abstract intermediate base sets ``abstract = True`` in its class body.
    Defining a concrete subclass registers it (the asset, the CLI and the SQL tables see
    it with no further wiring); pass ``register=False`` in the class statement to opt out
    (``class Probe(Metric, register=False): ...``).
    """

    name: ClassVar[str]
    direction: ClassVar[Direction]
    dimension: ClassVar[str]
    locality: ClassVar[str] = "local"
    version: ClassVar[str] = "1"
    requires: ClassVar[tuple[str, ...]] = ("output", "references")
    value_range: ClassVar[tuple[float, float]]
    score_ranges: ClassVar[Mapping[str, tuple[float, float]]] = {}
    libraries: ClassVar[tuple[str, ...]] = ()
    score_directions: ClassVar[Mapping[str, Direction] | None] = None
    aliases: ClassVar[tuple[str, ...]] = ()
    abstract: ClassVar[bool] = False
    binary: ClassVar[bool] = False
    binary_scores: ClassVar[tuple[str, ...]] = ()
    oracle: ClassVar[bool] = False
    #: keys of signature fields that are neither parameters nor library versions:
    #: ``signature_lead`` written between the version and the parameters (a judged
    #: metric's ``judge:``), ``signature_extras`` after the library versions (sacrebleu's
    #: own ``sacrebleu_sig:``). :func:`metric_ops.identity.parse_signature` reads them.
    signature_lead: ClassVar[tuple[str, ...]] = ()
    signature_extras: ClassVar[tuple[str, ...]] = ()
    #: ``True``: :meth:`score_batch` is pure per-sample CPU work that depends only on the
    #: parameters and the sample, so a worker process rebuilt from (name, params) gives the
    #: same values and large batches may be spread over the cores (metric_ops/scoring/parallel.py).
    #: Leave ``False`` for anything holding a model, a client, a cache or corpus-wide state.
    parallel_safe: ClassVar[bool] = False
    #: fewest samples for which worker processes are worth their start-up
    parallel_min_samples: ClassVar[int] = 5_000

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return
        cls.abstract = False
        where = f"metric class {cls.__module__}.{cls.__qualname__}"
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise MetricDefinitionError(f"{where} declares no name (add name = 'my_metric')")
        direction = cls.__dict__.get("direction", getattr(cls, "direction", None))
        if not isinstance(direction, Direction):
            raise MetricDefinitionError(
                f"{where} ({name!r}) declares no direction: add direction = Direction.MAXIMIZE "
                "or Direction.MINIMIZE so winners and regressions can be decided"
            )
        if getattr(cls, "dimension", None) not in DIMENSIONS:
            raise MetricDefinitionError(f"{where} ({name!r}): dimension must be one of {DIMENSIONS}")
        if cls.locality not in LOCALITIES:
            raise MetricDefinitionError(f"{where} ({name!r}): locality must be one of {LOCALITIES}")
        unknown = set(cls.requires) - set(SAMPLE_FIELDS)
        if unknown:
            raise MetricDefinitionError(f"{where} ({name!r}): unknown required fields {sorted(unknown)}")
        if cls.score_directions is not None:
            for score_name, d in cls.score_directions.items():
                if not isinstance(d, Direction):
                    raise MetricDefinitionError(f"{where}: score {score_name!r} declares no Direction")
        _check_declared_ranges(cls, where, name)
        stray = set(cls.binary_scores) - set(cls.emitted())
        if stray:
            raise MetricDefinitionError(f"{where} ({name!r}): binary_scores {sorted(stray)} are not among its emitted scores")
        if register:
            from metric_ops.registry import REGISTRY

            REGISTRY.add(cls)

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = dict(params)

    # ------------------------------------------------------------------ contract
    @classmethod
    def emitted(cls) -> dict[str, Direction]:
        """Names of the scores this metric emits, each with its declared direction."""
        return dict(cls.score_directions) if cls.score_directions else {cls.name: cls.direction}

    @classmethod
    def emitted_binary(cls) -> frozenset[str]:
        """Emitted score names declared 0/1 (``binary`` covers them all; else ``binary_scores``)."""
        return frozenset(cls.emitted()) if cls.binary else frozenset(cls.binary_scores)

    @classmethod
    def declared_range(cls, score_name: str | None = None) -> tuple[float, float]:
        """The declared (lo, hi) of emitted score ``score_name`` (default: the metric's own
        name): ``score_ranges[score_name]`` when given, else ``value_range``."""
        rng = cls.score_ranges.get(score_name or cls.name, cls.value_range)
        return float(rng[0]), float(rng[1])

    def range_of(self, score_name: str) -> tuple[float, float]:
        """(lo, hi) of ``score_name`` for this instance's parameters; defaults to
        :meth:`declared_range`. A metric whose range depends on a parameter (BERTScore
        with baseline rescaling) overrides this."""
        return self.declared_range(score_name)

    def check_scores(self, scores: Mapping[str, "Score"]) -> dict[str, "Score"]:
        """``scores`` with every scored value checked against :meth:`range_of`
        (:func:`check_range`). The runner applies this to every result, in one place."""
        return {k: check_range(v, self.range_of(k), k) if isinstance(v, Score) else v for k, v in scores.items()}

    def param_fields(self) -> dict[str, str]:
        """The parameters as the signature writes them: ``{key: text}`` sorted by key, each
        value through :func:`format_param` (bools ``yes``/``no``, lists comma-joined, the
        rest ``str``). :func:`metric_ops.identity.metric_identity` stores this dict."""
        return {key: format_param(self.params[key]) for key in sorted(self.params)}

    def signature(self) -> str:
        """sacrebleu-style signature: name, version, parameters, library versions."""
        parts = [f"{self.name}", f"v:{self.version}"]
        parts.extend(f"{key}:{text}" for key, text in self.param_fields().items())
        for lib in self.libraries:
            parts.append(f"{lib}:{library_version(lib)}")
        return "|".join(parts)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        """Score ``outputs[i]`` against ``samples[i]`` for every i.

        Returns one dict per sample mapping each emitted score name to its :class:`Score`.
        Raises ``ValueError`` when the two sequences differ in length. A per-sample failure
        may raise; the runner then re-scores that batch one sample at a time and records
        the failing sample as ``error``.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.signature()}>"


def _is_range(rng: Any) -> bool:
    try:
        lo, hi = (float(v) for v in rng)
    except (TypeError, ValueError):
        return False
    return not (math.isnan(lo) or math.isnan(hi)) and lo < hi


def _check_declared_ranges(cls: type[Metric], where: str, name: str) -> None:
    rng = getattr(cls, "value_range", None)
    if rng is None:
        raise MetricDefinitionError(
            f"{where} ({name!r}) declares no value_range: add value_range = (lo, hi), the bounds of a "
            "scored value (e.g. (0.0, 1.0); float('inf') for an unbounded side)"
        )
    if not _is_range(rng):
        raise MetricDefinitionError(f"{where} ({name!r}): value_range must be two numbers lo < hi, got {rng!r}")
    emitted = cls.emitted()
    for score_name, score_rng in cls.score_ranges.items():
        if score_name not in emitted:
            raise MetricDefinitionError(f"{where} ({name!r}): score_ranges names {score_name!r}, which it does not emit")
        if not _is_range(score_rng):
            raise MetricDefinitionError(f"{where} ({name!r}): score_ranges[{score_name!r}] must be two numbers lo < hi, got {score_rng!r}")


def range_slack(bound: float) -> float:
    """How far past ``bound`` a value may lie and still be float rounding:
    ``RANGE_RTOL * max(1, |bound|)`` (:func:`check_range`, and the scores asset's check)."""
    return RANGE_RTOL * max(1.0, abs(bound))


def check_range(score: Score, value_range: tuple[float, float], score_name: str = "value") -> Score:
    """``score`` checked against its declared ``value_range`` (bounds included).

    - not scored, or inside the range: returned unchanged;
    - outside by float rounding only (at most ``RANGE_RTOL * max(1, |bound|)`` past the
      bound, e.g. sacrebleu's BLEU of 100.00000000000004 or a cosine of 1.000000238):
      the bound, with the computed value kept in ``detail["raw_value"]`` and
      ``detail["clamped"]`` true;
    - further out (an infinite value of a finite range included): ``error`` naming the
      value and the range, the computed value in ``detail["raw_value"]``.
    """
    if score.status != "scored" or score.value is None:
        return score
    lo, hi = value_range
    value = float(score.value)
    if lo <= value <= hi:
        return score
    bound = lo if value < lo else hi
    if math.isfinite(value) and abs(value - bound) <= range_slack(bound):
        return Score(float(bound), "scored", {**score.detail, "raw_value": value, "clamped": True})
    return Score.error(
        f"{score_name} = {value!r} is outside its declared range [{lo}, {hi}] by more than float rounding",
        **{**score.detail, "raw_value": value},
    )


def format_param(value: Any) -> str:
    """A parameter value as the signature writes it: a bool as ``yes``/``no``, a list or
    tuple as its items so formatted and joined by ``,``, anything else as ``str(value)``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(format_param(v) for v in value)
    return str(value)


def check_lengths(samples: Sequence[Sample], outputs: Sequence[str]) -> None:
    """Raise ``ValueError`` when samples and outputs are not aligned one to one."""
    if len(samples) != len(outputs):
        raise ValueError(
            f"got {len(samples)} samples but {len(outputs)} outputs; pass exactly one output per sample"
        )
