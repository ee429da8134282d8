"""Annotators: extract the scoreable value from a raw output without altering the output.

An evaluation's ``annotators:`` list holds mappings; each has a ``kind`` and a unique
``name`` (default: the kind, or ``kind-N`` for the N-th of a repeated kind); the list is in the fingerprint. Each runs on the raw output, or on another
annotator's value named by ``source`` (listed before it). Results go to the
``annotations`` table (one row per sample x annotator: ``value``, ``matched``, the raw
``span`` with ``span_start``/``span_end`` offsets into the text it ran on); the
``generations`` table keeps the raw output untouched.

``regex``
    ``pattern`` (Python ``re``), ``group`` (number or name; default 1 when the pattern
    has a group, else 0), ``flags`` (``[IGNORECASE, MULTILINE, DOTALL]``), ``select``
    (``first``/``last`` match), ``cast`` (``str``/``int``/``float``/``lower``; a value
    that does not cast is ``matched: false`` with the error), ``on_no_match``
    (``none``: value null, so metrics leave the sample unscored; ``raw``: the whole
    text; ``empty``: the empty string, so a missing answer scores as wrong; or
    ``{default: TEXT}``).
``strip_reasoning``
    Removes reasoning spans (``open``/``close``, default ``<think>``/``</think>``); an
    unclosed span at the end (a truncated generation) is removed to the end.
    ``matched`` says whether any span was found; ``span`` is the first removed span.
``model``
    Asks a model (any backend spec in ``model``) to extract the answer with ``prompt``
    (placeholders ``{output}``, ``{input}``); ``max_tokens`` (default 32). An answer
    equal to ``none_token`` (default ``NONE``) is no match; the answer is located in the
    raw text for the span when it occurs there verbatim.

Metrics score an annotator's value instead of the raw output with
``metric_params: {exact_match: {use_annotation: NAME}}``; the score row's signature then
ends in ``|annotation:NAME`` (and epistemic metrics use only the tokens inside the span).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from metric_ops.base import Sample
from metric_ops.errors import FacetlakeError
from metric_ops.plugins import Plugin, Registry, UnknownNameError

# annotator kind -> Annotator subclass; a subclass with a ``kind`` registers itself when defined
ANNOTATORS: Registry[type["Annotator"]] = Registry("annotator kind", base="resources.prompting.annotators:Annotator")


class AnnotatorError(FacetlakeError, ValueError):
    """An annotator configuration is invalid."""


@dataclass
class Annotation:
    """One annotator's result for one sample (offsets into the text it ran on)."""

    value: str | None
    matched: bool
    span: str | None = None
    span_start: int | None = None
    span_end: int | None = None
    error: str | None = None


class Annotator(Plugin):
    """Base class; subclasses set ``kind``/``version``/``allowed`` and implement ``annotate``.
    A subclass with a ``kind`` registers itself in :data:`ANNOTATORS` (:class:`metric_ops.plugins.Plugin`)."""

    registry = ANNOTATORS
    base_keys = frozenset({"name", "kind", "source"})

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.name = str(self.config.get("name") or "")
        if not re.fullmatch(r"[a-z0-9_.-]{1,64}", self.name):
            raise AnnotatorError(f"annotator {self.config!r}: name must match [a-z0-9_.-]+ (e.g. name: answer)")
        unknown = self.unknown_keys(self.config)
        if unknown:
            raise AnnotatorError(f"annotator {self.name!r} ({self.kind}): unknown keys {unknown}; allowed: {sorted(self.allowed | {'source'})}")
        self.source = self.config.get("source")

    def signature(self) -> str:
        """Kind, version and every setting (canonical JSON)."""
        settings = {k: v for k, v in sorted(self.config.items()) if k not in ("name", "kind")}
        return f"{self.kind}|v:{self.version}|{json.dumps(settings, sort_keys=True, separators=(',', ':'))}"

    def annotate_batch(self, samples: Sequence[Sample], texts: Sequence[str | None]) -> list[Annotation]:
        """One annotation per text (None text -> no match)."""
        return [self.annotate(s, t) if t is not None else Annotation(None, False, error="no text (generation failed or upstream annotator had no value)")
                for s, t in zip(samples, texts)]

    def annotate(self, sample: Sample, text: str) -> Annotation:  # pragma: no cover - abstract
        raise NotImplementedError


_FLAGS = {"IGNORECASE": re.IGNORECASE, "I": re.IGNORECASE, "MULTILINE": re.MULTILINE, "M": re.MULTILINE,
          "DOTALL": re.DOTALL, "S": re.DOTALL, "ASCII": re.ASCII, "VERBOSE": re.VERBOSE, "X": re.VERBOSE}
_CASTS: dict[str, Callable[[str], str]] = {
    "str": lambda s: s,
    "lower": lambda s: s.lower(),
    "int": lambda s: str(int(s.strip().replace(",", ""))),
    "float": lambda s: repr(float(s.strip().replace(",", ""))),
}


class RegexAnnotator(Annotator):
    """Extract a regular-expression group (lm-eval-harness's ``regex`` filter, with spans)."""

    kind = "regex"
    allowed = frozenset({"pattern", "group", "flags", "select", "cast", "on_no_match"})

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        if "pattern" not in self.config:
            raise AnnotatorError(f"annotator {self.name!r}: regex needs pattern:, e.g. pattern: 'answer is ([A-D])'")
        flags = 0
        for flag in self.config.get("flags") or []:
            if str(flag).upper() not in _FLAGS:
                raise AnnotatorError(f"annotator {self.name!r}: unknown flag {flag!r}; known: {sorted(_FLAGS)}")
            flags |= _FLAGS[str(flag).upper()]
        try:
            self.regex = re.compile(str(self.config["pattern"]), flags)
        except re.error as exc:
            raise AnnotatorError(f"annotator {self.name!r}: invalid pattern ({exc})") from None
        self.group = self.config.get("group", 1 if self.regex.groups else 0)
        if self.config.get("select", "first") not in ("first", "last"):
            raise AnnotatorError(f"annotator {self.name!r}: select must be first or last")
        cast = self.config.get("cast", "str")
        if cast not in _CASTS:
            raise AnnotatorError(f"annotator {self.name!r}: cast must be one of {sorted(_CASTS)}")
        self.cast = _CASTS[cast]
        policy = self.config.get("on_no_match", "none")
        if not (policy in ("none", "raw", "empty") or (isinstance(policy, Mapping) and "default" in policy)):
            raise AnnotatorError(f"annotator {self.name!r}: on_no_match must be none, raw, empty or {{default: TEXT}}")
        self.policy = policy

    def _no_match(self, text: str) -> Annotation:
        if self.policy == "raw":
            return Annotation(text, False)
        if self.policy == "empty":
            return Annotation("", False)
        if isinstance(self.policy, Mapping):
            return Annotation(str(self.policy["default"]), False)
        return Annotation(None, False)

    def annotate(self, sample: Sample, text: str) -> Annotation:
        matches = list(self.regex.finditer(text)) if self.config.get("select") == "last" else [m for m in [self.regex.search(text)] if m]
        if not matches:
            return self._no_match(text)
        match = matches[-1]
        try:
            raw = match.group(self.group)
            start, end = match.span(self.group)
        except IndexError as exc:
            return Annotation(None, False, error=f"group {self.group!r} not in pattern ({exc})")
        if raw is None:
            return self._no_match(text)
        try:
            value = self.cast(raw)
        except ValueError as exc:
            return Annotation(None, False, raw, start, end, error=f"cannot cast {raw!r}: {exc}")
        return Annotation(value, True, raw, start, end)


class StripReasoningAnnotator(Annotator):
    """Remove ``<think>…</think>`` reasoning spans (reasoning models such as DeepSeek-R1, Qwen3)."""

    kind = "strip_reasoning"
    allowed = frozenset({"open", "close"})

    def annotate(self, sample: Sample, text: str) -> Annotation:
        open_tag = str(self.config.get("open", "<think>"))
        close_tag = str(self.config.get("close", "</think>"))
        pieces, cursor, first = [], 0, None
        while True:
            start = text.find(open_tag, cursor)
            if start < 0:
                pieces.append(text[cursor:])
                break
            pieces.append(text[cursor:start])
            stop = text.find(close_tag, start + len(open_tag))
            end = len(text) if stop < 0 else stop + len(close_tag)
            if first is None:
                first = (start, end)
            cursor = end
            if stop < 0:
                break
        if first is None:
            return Annotation(text, False)
        value = "".join(pieces).strip()
        return Annotation(value, True, text[first[0] : first[1]], first[0], first[1])


class ModelAnnotator(Annotator):
    """Model-based extraction: another model reads the output and returns the answer."""

    kind = "model"
    allowed = frozenset({"model", "prompt", "max_tokens", "none_token"})
    DEFAULT_PROMPT = (
        "Extract the final answer from the response below. Reply with the answer only, "
        "or NONE if there is no answer.\n\nQuestion: {input}\n\nResponse: {output}\n\nAnswer:"
    )

    def __init__(self, config: Mapping[str, Any], backend_factory: Callable[[str], Any] | None = None) -> None:
        super().__init__(config)
        if not self.config.get("model"):
            raise AnnotatorError(f"annotator {self.name!r}: model extraction needs model:, e.g. model: 'api:gpt-4o-mini@https://api.openai.com/v1'")
        self.backend_factory = backend_factory

    def annotate_batch(self, samples: Sequence[Sample], texts: Sequence[str | None]) -> list[Annotation]:
        from resources.backends import GenerationRequest, ModelBackends

        factory = self.backend_factory or ModelBackends().backend_for
        backend = factory(str(self.config["model"]))
        if hasattr(backend, "purpose"):
            backend.purpose = f"annotator:{self.name}"
        prompt = str(self.config.get("prompt", self.DEFAULT_PROMPT))
        todo = [(i, s, t) for i, (s, t) in enumerate(zip(samples, texts)) if t is not None]
        requests = [GenerationRequest(sample=s, prompt=prompt.format(output=t, input=s.input)) for _, s, t in todo]
        settings = {"temperature": 0.0, "max_tokens": int(self.config.get("max_tokens", 32)), "seed": 0}
        out: list[Annotation] = [Annotation(None, False, error="no text (generation failed or upstream annotator had no value)")] * len(samples)
        none_token = str(self.config.get("none_token", "NONE")).strip().lower()
        for (i, _, text), result in zip(todo, backend.generate(requests, settings)):
            if result.status != "ok" or result.output is None:
                out[i] = Annotation(None, False, error=f"extraction model failed: {result.error}")
                continue
            value = result.output.strip().splitlines()[0].strip() if result.output.strip() else ""
            if not value or value.lower() == none_token:
                out[i] = Annotation(None, False)
                continue
            start = text.find(value)
            out[i] = Annotation(value, True, value if start >= 0 else None, start if start >= 0 else None,
                                start + len(value) if start >= 0 else None)
        return out


def make_annotators(configs: Sequence[Mapping[str, Any]], backend_factory: Callable[[str], Any] | None = None) -> list[Annotator]:
    """Annotators for an evaluation's ``annotators:`` list, validated: known kinds, unique
    names, ``source`` naming an earlier annotator. Raises :class:`AnnotatorError`."""
    out: list[Annotator] = []
    for i, config in enumerate(configs):
        kind = config.get("kind")
        if not config.get("name"):  # default name: the kind (kind-N when the kind repeats)
            config = {**config, "name": str(kind) if sum(c.get("kind") == kind for c in configs) == 1 else f"{kind}-{i + 1}"}
        try:
            cls = ANNOTATORS[str(kind)]
        except UnknownNameError as exc:
            raise AnnotatorError(str(exc)) from None
        annotator = ModelAnnotator(config, backend_factory) if cls.kind == "model" else cls(config)
        if annotator.name in {a.name for a in out}:
            raise AnnotatorError(f"annotator name {annotator.name!r} is used twice")
        if annotator.source is not None and annotator.source not in {a.name for a in out}:
            raise AnnotatorError(f"annotator {annotator.name!r}: source {annotator.source!r} must name an annotator listed before it")
        out.append(annotator)
    return out


def run_annotators(annotators: Sequence[Annotator], samples: Sequence[Sample], outputs: Sequence[str | None]) -> dict[str, list[Annotation]]:
    """Each annotator's annotations, in order, by name (a ``source`` reads an earlier one's values)."""
    results: dict[str, list[Annotation]] = {}
    for annotator in annotators:
        texts = outputs if annotator.source is None else [a.value for a in results[annotator.source]]
        try:
            results[annotator.name] = annotator.annotate_batch(samples, texts)
        except Exception as exc:  # noqa: BLE001 - one broken annotator never sinks the others
            if isinstance(exc, AnnotatorError):
                raise
            results[annotator.name] = [Annotation(None, False, error=f"{type(exc).__name__}: {exc}") for _ in samples]
    return results
