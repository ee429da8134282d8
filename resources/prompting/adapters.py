"""Adapters: turn a sample into a model request, kept apart from the data and the model.

An evaluation's ``adapter:`` mapping picks one by ``kind``; the whole mapping is in the
fingerprint (and so is the content hash of a few-shot pool read from another dataset).
Bump ``version`` in the mapping when a template's wording changes meaning.

=====================  ================================================================
kind                   request
=====================  ================================================================
``generation``         ``template`` (default ``{input}``) as a plain prompt
``template``           the same, ``template`` required
``chat``               messages: optional ``system``, then the user turn ``template``
``instruction``        ``instruction`` + input in an instruction format (``template``
                       default Alpaca-style ``### Instruction / ### Input / ### Response``)
``few_shot``           ``count`` solved examples from ``pool`` (``same`` = this dataset,
                       the sample itself excluded; or a dataset mapping ``{kind, path}``),
                       chosen ``first`` or ``random`` (per-sample seeded with ``seed``),
                       each rendered with ``example_template`` (``{input}``/``{answer}``),
                       joined by ``separator``, then ``template``; ``chat: true`` makes
                       them user/assistant turns
``multiple_choice``    choices from sample metadata ``choices_field`` (default
                       ``choices``), labelled ``labels`` (default A, B, C, ...).
                       ``mode: joint``: one prompt listing the choices (``{choices}``),
                       the model generates (extract the letter with a regex annotator).
                       ``mode: loglikelihood``: the log-likelihood of each
                       ``" " + choice`` after the prompt; the output is the best choice's
                       label (``answer_format: label``) or text (``text``);
                       ``normalize: length`` divides by the continuation's characters
                       (lm-eval-harness's ``acc_norm``)
``rag``                context passages (in order) up to ``context_budget`` characters
                       (default 4000; a passage that does not fit is cut), then the
                       question; ``{context}`` and ``{input}`` in ``template``
=====================  ================================================================

Placeholders in every template: ``{input}``, ``{context}``, ``{references}``,
``{answer}`` (first reference), ``{choices}``, ``{instruction}``, and any top-level
metadata field of the sample. An unknown placeholder raises ``ValueError`` naming the
known ones.
"""

from __future__ import annotations

import random
import string
from typing import Any, Mapping, Sequence

from metric_ops.base import Sample
from metric_ops.errors import FacetlakeError
from metric_ops.plugins import Plugin, Registry, UnknownNameError
from resources.backends import GenerationRequest, GenerationResult

ALPACA = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
RAG_TEMPLATE = "Answer the question using only the context.\n\nContext:\n{context}\n\nQuestion: {input}\nAnswer:"
MC_TEMPLATE = "{input}\n{choices}\nAnswer:"


class AdapterError(FacetlakeError, ValueError):
    """An adapter configuration is invalid or a sample does not fit it."""


# adapter kind -> Adapter subclass; a subclass with a ``kind`` registers itself when defined (the
# built-ins below); kinds defined in other modules are listed here, one line each, imported on first use
ADAPTERS: Registry[type["Adapter"]] = Registry("adapter kind", base="resources.prompting.adapters:Adapter", builtins={
})


def adapter_class(kind: Any) -> type["Adapter"]:
    """The adapter class registered for ``kind``; raises :class:`AdapterError` naming close
    matches ("did you mean") and the known kinds for an unknown one."""
    try:
        return ADAPTERS[str(kind)]
    except UnknownNameError as exc:
        raise AdapterError(str(exc)) from None


def render(template: str, sample: Sample, **extra: Any) -> str:
    """``template`` with the placeholders of the module docstring filled from ``sample``."""
    values: dict[str, Any] = {k: v for k, v in dict(sample.metadata).items() if isinstance(k, str)}
    values.update(
        input=sample.input,
        context="\n\n".join(sample.context),
        references="\n".join(sample.references),
        answer=sample.references[0] if sample.references else "",
    )
    values.update(extra)
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None and field.split(".")[0].split("[")[0] not in values and field != "":
            known = ", ".join("{" + k + "}" for k in ("input", "context", "references", "answer", "choices", "instruction"))
            raise AdapterError(
                f"template placeholder {{{field}}} is unknown for sample {sample.sample_id}; known: {known} "
                "and the sample's metadata fields"
            )
    values.setdefault("choices", "")
    values.setdefault("instruction", "")
    return template.format(**values)


class Adapter(Plugin):
    """Base adapter: ``request(sample)`` builds one :class:`GenerationRequest`. A subclass
    with a ``kind`` registers itself in :data:`ADAPTERS` (:class:`metric_ops.plugins.Plugin`)."""

    registry = ADAPTERS
    base_keys = frozenset({"kind", "version", "template"})

    def __init__(self, config: Mapping[str, Any], pool: Sequence[Sample] | None = None) -> None:
        self.config = dict(config)
        unknown = self.unknown_keys(self.config)
        if unknown:
            raise AdapterError(f"adapter {self.kind!r}: unknown keys {unknown}; allowed: {sorted({'template', 'version', *self.allowed})}")
        self.pool = list(pool or [])

    @property
    def template(self) -> str:
        return str(self.config.get("template", "{input}"))

    def request(self, sample: Sample) -> GenerationRequest:
        return GenerationRequest(sample=sample, prompt=render(self.template, sample))

    def finalize(self, request: GenerationRequest, result: GenerationResult) -> GenerationResult:
        """Post-process a backend result (only multiple choice does)."""
        return result


class GenerationAdapter(Adapter):
    """Plain prompt from ``template``."""

    kind = "generation"


class TemplateAdapter(Adapter):
    """Plain prompt from a required ``template``."""

    kind = "template"

    def __init__(self, config: Mapping[str, Any], pool: Sequence[Sample] | None = None) -> None:
        super().__init__(config, pool)
        if "template" not in self.config:
            raise AdapterError("adapter 'template' needs template:, e.g. template: 'Question: {input}\\nAnswer:'")


class ChatAdapter(Adapter):
    """Chat messages: optional system message, then the user turn."""

    kind = "chat"
    allowed = frozenset({"system"})

    def request(self, sample: Sample) -> GenerationRequest:
        user = render(self.template, sample)
        messages = ([{"role": "system", "content": str(self.config["system"])}] if self.config.get("system") else [])
        messages.append({"role": "user", "content": user})
        return GenerationRequest(sample=sample, prompt=user, messages=messages)


class InstructionAdapter(Adapter):
    """An instruction and the input in an instruction-tuning format (Alpaca by default)."""

    kind = "instruction"
    allowed = frozenset({"instruction"})

    @property
    def template(self) -> str:
        return str(self.config.get("template", ALPACA))

    def request(self, sample: Sample) -> GenerationRequest:
        if not self.config.get("instruction"):
            raise AdapterError("adapter 'instruction' needs instruction:, e.g. instruction: 'Answer the question briefly.'")
        return GenerationRequest(sample=sample, prompt=render(self.template, sample, instruction=self.config["instruction"]))


class FewShotAdapter(Adapter):
    """``count`` solved examples from a pool before the query (Brown et al., 2020)."""

    kind = "few_shot"
    allowed = frozenset({"count", "pool", "select", "seed", "example_template", "separator", "chat", "system"})

    def __init__(self, config: Mapping[str, Any], pool: Sequence[Sample] | None = None) -> None:
        super().__init__(config, pool)
        self.count = int(self.config.get("count", 3))
        if self.count < 0:
            raise AdapterError("adapter 'few_shot': count must be >= 0")
        if self.config.get("select", "first") not in ("first", "random"):
            raise AdapterError("adapter 'few_shot': select must be first or random")

    @property
    def template(self) -> str:
        return str(self.config.get("template", "Q: {input}\nA:"))

    def examples(self, sample: Sample) -> list[Sample]:
        """The shots for ``sample`` (never the sample itself, only pool items with a reference)."""
        candidates = [s for s in self.pool if s.sample_id != sample.sample_id and s.references]
        if self.config.get("select", "first") == "random":
            rng = random.Random(f"{self.config.get('seed', 0)}:{sample.sample_id}")
            return rng.sample(candidates, min(self.count, len(candidates)))
        return candidates[: self.count]

    def request(self, sample: Sample) -> GenerationRequest:
        shots = self.examples(sample)
        example_template = str(self.config.get("example_template", "Q: {input}\nA: {answer}"))
        query = render(self.template, sample)
        if self.config.get("chat"):
            messages = ([{"role": "system", "content": str(self.config["system"])}] if self.config.get("system") else [])
            for shot in shots:
                messages.append({"role": "user", "content": render(self.template, shot)})
                messages.append({"role": "assistant", "content": shot.references[0]})
            messages.append({"role": "user", "content": query})
            return GenerationRequest(sample=sample, prompt=query, messages=messages)
        separator = str(self.config.get("separator", "\n\n"))
        prompt = separator.join([*(render(example_template, s) for s in shots), query])
        return GenerationRequest(sample=sample, prompt=prompt)


class MultipleChoiceAdapter(Adapter):
    """Multiple choice: a joint prompt, or per-choice log-likelihood (see module docstring)."""

    kind = "multiple_choice"
    allowed = frozenset({"mode", "choices_field", "labels", "normalize", "answer_format"})

    def __init__(self, config: Mapping[str, Any], pool: Sequence[Sample] | None = None) -> None:
        super().__init__(config, pool)
        self.mode = self.config.get("mode", "joint")
        if self.mode not in ("joint", "loglikelihood"):
            raise AdapterError("adapter 'multiple_choice': mode must be joint or loglikelihood")
        if self.config.get("normalize", "none") not in ("none", "length"):
            raise AdapterError("adapter 'multiple_choice': normalize must be none or length")
        if self.config.get("answer_format", "label") not in ("label", "text"):
            raise AdapterError("adapter 'multiple_choice': answer_format must be label or text")

    @property
    def template(self) -> str:
        return str(self.config.get("template", MC_TEMPLATE))

    def choices(self, sample: Sample) -> tuple[list[str], list[str]]:
        field = str(self.config.get("choices_field", "choices"))
        choices = sample.metadata.get(field)
        if not isinstance(choices, (list, tuple)) or not choices:
            raise AdapterError(
                f"sample {sample.sample_id}: metadata field {field!r} with a list of choices not found; "
                f"fields are: {', '.join(map(str, sample.metadata))}; set choices_field:"
            )
        labels = list(self.config.get("labels") or string.ascii_uppercase[: len(choices)])
        if len(labels) < len(choices):
            raise AdapterError(f"sample {sample.sample_id}: {len(choices)} choices but only {len(labels)} labels")
        return [str(c) for c in choices], [str(label) for label in labels[: len(choices)]]

    def request(self, sample: Sample) -> GenerationRequest:
        choices, labels = self.choices(sample)
        listing = "\n".join(f"{label}. {choice}" for label, choice in zip(labels, choices))
        prompt = render(self.template, sample, choices=listing)
        if self.mode == "joint":
            return GenerationRequest(sample=sample, prompt=prompt)
        return GenerationRequest(sample=sample, prompt=prompt, continuations=[" " + c for c in choices], labels=labels)

    def finalize(self, request: GenerationRequest, result: GenerationResult) -> GenerationResult:
        if self.mode == "joint" or result.status != "ok":
            return result
        scored = result.extra.get("choice_logprobs") or []
        if not scored:
            result.status, result.error = "error", "the backend returned no choice log-likelihoods"
            return result
        length = self.config.get("normalize", "none") == "length"
        best = max(range(len(scored)), key=lambda i: scored[i]["logprob"] / max(1, scored[i]["n_chars"]) if length else scored[i]["logprob"])
        label = scored[best]["label"]
        result.output = label if self.config.get("answer_format", "label") == "label" else request.continuations[best].strip()
        return result


class RAGAdapter(Adapter):
    """Context passages within a character budget, then the question."""

    kind = "rag"
    allowed = frozenset({"context_budget", "separator"})

    @property
    def template(self) -> str:
        return str(self.config.get("template", RAG_TEMPLATE))

    def request(self, sample: Sample) -> GenerationRequest:
        budget = int(self.config.get("context_budget", 4000))
        separator = str(self.config.get("separator", "\n\n"))
        kept: list[str] = []
        used = 0
        for passage in sample.context:
            room = budget - used - (len(separator) if kept else 0)
            if room <= 0:
                break
            piece = passage if len(passage) <= room else passage[:room]
            kept.append(piece)
            used += len(piece) + (len(separator) if len(kept) > 1 else 0)
        return GenerationRequest(sample=sample, prompt=render(self.template, sample, context=separator.join(kept)))


def _pool_spec(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    pool = config.get("pool", "same")
    if pool in (None, "same"):
        return None
    if not isinstance(pool, Mapping):
        raise AdapterError("adapter 'few_shot': pool must be 'same' or a dataset mapping like {kind: file, path: shots.jsonl}")
    return pool


def make_adapter(config: Mapping[str, Any], samples: Sequence[Sample] | None = None) -> Adapter:
    """The adapter for ``config``; a few-shot pool is loaded here (``same`` uses ``samples``).

    Raises :class:`AdapterError` for an unknown kind (listing the known ones) or bad keys.
    """
    cls = adapter_class(config.get("kind", "generation"))
    kind = cls.kind
    pool: Sequence[Sample] | None = samples
    if kind == "few_shot":
        spec = _pool_spec(config)
        if spec is not None:
            from resources.datasets import make_dataset

            pool = make_dataset(spec).load()
    return cls(config, pool)


def adapter_fingerprint_inputs(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the fingerprint needs beyond the adapter mapping itself: the content hash of a
    few-shot pool read from another dataset, and the adapter's code version when it is not 1.

    Validates the kind and keys first (a bad adapter fails at registration).
    """
    make_adapter_class = adapter_class(config.get("kind", "generation"))
    make_adapter_class(config, [])  # key validation
    extra: dict[str, Any] = {}
    if make_adapter_class.version != "1":
        extra["adapter_code_version"] = make_adapter_class.version
    if make_adapter_class.kind == "few_shot":
        spec = _pool_spec(config)
        if spec is not None:
            from resources.datasets import content_hash, make_dataset

            extra["few_shot_pool_sha256"] = content_hash(make_dataset(spec).load())
    return extra
