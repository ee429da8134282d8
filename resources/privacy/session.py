"""A run's privacy session: what the assets open around the work that sends text out or
stores samples.

- :func:`outbound_session`: install the run's anonymiser (its :class:`~resources.privacy.policy.PrivacyPolicy`,
  after the administrator's forcing) and a durable ledger writer (:class:`LedgerWriter`) on
  the outbound path for a block;
- :func:`samples_for_lake` / :func:`store_raw_samples`: the samples as the ``samples`` table
  stores them (anonymised when the policy says so) and the raw text kept apart only on request;
- :func:`anonymised_references`: references with the placeholders the model saw;
- :func:`offline_refusal_rows`: the score rows of an external metric refused in offline mode.

Above the outbound gate (:mod:`resources.privacy.outbound`) and the policy
(:mod:`resources.privacy.policy`): the session hands the gate the run's anonymiser.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import warnings
from typing import Any, Iterator, Mapping, Sequence

from metric_ops.identity import metric_params_json
from metric_ops.scoring.rows import detail_json
from resources.privacy import outbound
from resources.privacy.keys import install_log_redaction
from resources.privacy.ledger import DurableLedger, recover_intents
from resources.privacy.outbound import model_anonymiser_call
from resources.privacy.policy import PrivacyPolicy, resolve_policy

# --------------------------------------------------------------------------- ledger and session


class LedgerWriter(DurableLedger):
    """The outbound-ledger writer of a session: each call's intent row is committed before
    the call is sent and completed after (resources/privacy/ledger.py). ``flush_every``:
    how many completions are merged per commit. Thread-safe (API backends call from workers)."""

    def __init__(self, lake: Any, run_id: str, fingerprint: str | None, model: str | None, flush_every: int = 256) -> None:
        super().__init__(lake, run_id, fingerprint, model, complete_every=flush_every)


@contextlib.contextmanager
def outbound_session(
    lake: Any, *, run_id: str, fingerprint: str | None = None, model: str | None = None,
    privacy: Mapping[str, Any] | None = None, override: str | None = None,
) -> Iterator[PrivacyPolicy]:
    """Install the run's anonymiser and a ledger writer on the outbound path for a block.

    Yields the effective :class:`PrivacyPolicy`; flushes the ledger on exit (also on error).
    """
    policy = resolve_policy(privacy, override)
    recover_intents(lake)  # intents a killed run left in its write-ahead file reach the table first
    ledger = LedgerWriter(lake, run_id, fingerprint, model)
    install_log_redaction()
    with outbound.session(policy.anonymiser(model_call=model_anonymiser_call), ledger, policy.label if policy.active else None):
        try:
            yield policy
        finally:
            ledger.flush()


# --------------------------------------------------------------------------- scoring helpers
def offline_refusal_rows(metric: Any, samples: Sequence[Any]) -> list[dict[str, Any]]:
    """Score rows (status ``error``, naming the metric) for an external metric refused in
    offline mode; no client is built and no connection opened."""
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
    import polars as pl

    policy = resolve_policy(privacy)
    if not (policy.active and policy.references) or not lake.exists("outbound_ledger"):
        return list(samples)
    ledger = lake.read("outbound_ledger", where={"fingerprint": fingerprint, "model": model}, columns=["purpose", "anonymised"])
    if ledger.filter((pl.col("purpose") == "generation") & pl.col("anonymised")).height == 0:
        return list(samples)
    prompts = {r["sample_id"]: r["prompt"] for r in lake.read("generations", where={"model": model, "fingerprint": fingerprint},
                                                               columns=["sample_id", "prompt"]).iter_rows(named=True)}
    anonymiser = policy.anonymiser(model_call=model_anonymiser_call)
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
    Raises :class:`resources.privacy.anonymise.AnonymisationError` when a recogniser fails.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own resolution already warned
        policy = resolve_policy(privacy)
    keep_raw = bool((privacy or {}).get("store_raw"))
    if not policy.active:
        return list(samples), keep_raw
    anonymiser = policy.anonymiser(model_call=model_anonymiser_call)
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
