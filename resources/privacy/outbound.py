"""The one path by which text leaves the process.

Every call to an external service (an API model backend, a remote judge, a model-based
anonymiser) goes through :func:`chat_completion` / :func:`completion` here. This module:

1. refuses in offline mode (``FACETLAKE_OFFLINE=1``) before any connection is opened;
2. anonymises every outgoing text when anonymisation is on: the session's anonymiser
   (:func:`session`, installed by the assets from the run's privacy policy) or, with no
   session, the strategy an administrator forces with ``FACETLAKE_ANONYMISE_FORCE``. All
   messages of one call, and every call about the same sample within a session, share one
   placeholder map, so ``[PERSON_1]`` means the same person throughout. An anonymiser
   failure stops the call (fail closed);
3. asks the call's endpoint for it (resources/backends/endpoints.py): the run's budget
   (refused before anything is written or sent), an in-flight slot, the declared rpm/tpm
   pace; the reply's usage settles the budget and corrects the pace;
4. commits one row per call to the outbound ledger *before* the call is sent (time,
   host, model, purpose, sample id, SHA-256 of the text sent, whether it was anonymised,
   entity counts; never the text or the key) and marks it completed or failed after
   (resources/privacy/ledger.py: after any crash the ledger holds every call sent);
5. calls the ``openai`` client it is given (its own retries apply) and scrubs the
   client's key from any exception it raises.

The interface (``chat_completion(client, ctx, messages=...)``,
``completion(client, ctx, prompt=...)``) is stable.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlparse

from metric_ops.errors import FacetlakeError
from resources.faults import fault_point
from resources.privacy.anonymise import AnonymisationError
from resources.privacy.keys import redact_exception, register_secret, resolve_key
from resources.privacy.policy import forced_policy


class OfflineModeError(FacetlakeError, RuntimeError):
    """An external call was attempted while offline mode is on."""


def offline_mode() -> bool:
    """True when ``FACETLAKE_OFFLINE`` is 1/true/yes."""
    return os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes")


def refuse_if_offline(kind: str, name: str, locality: str) -> None:
    """Raise :class:`OfflineModeError` naming ``kind`` ``name`` when it is ``external`` and
    offline mode is on (call before building any client: nothing is opened)."""
    if locality == "external" and offline_mode():
        raise OfflineModeError(
            f"offline mode is on (FACETLAKE_OFFLINE): the {kind} {name!r} is external and was not run; "
            "unset FACETLAKE_OFFLINE (or drop --offline) or use a local one"
        )


@dataclass
class CallContext:
    """Who is calling: the metric (or ``generation``), the sample, and the model name."""

    purpose: str
    sample_id: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# A plain anonymiser hook: text -> (text_to_send, entity_counts). An
# ``resources.privacy.anonymise.Anonymiser`` object is also accepted (consistent placeholders).
Anonymiser = Callable[[str], tuple[str, dict[str, int]]]


@dataclass
class _State:
    anonymiser: Any = None
    ledger_writer: Callable[[dict[str, Any]], None] | None = None
    strategy: str | None = None
    mappings: dict[str, Any] = field(default_factory=dict)


_state = _State()
_lock = threading.RLock()
_forced_cache: dict[str, Any] = {}


def install(anonymiser: Any = None, ledger_writer: Callable[[dict[str, Any]], None] | None = None, strategy: str | None = None) -> None:
    """Install (or clear with None) the anonymiser and the ledger writer process-wide."""
    global _state
    with _lock:
        _state = _State(anonymiser, ledger_writer, strategy or (getattr(anonymiser, "strategy", None) if anonymiser else None))


@contextlib.contextmanager
def session(anonymiser: Any = None, ledger_writer: Callable[[dict[str, Any]], None] | None = None, strategy: str | None = None) -> Iterator[None]:
    """Install hooks for the duration of a ``with`` block (e.g. one asset materialisation),
    restoring the previous ones after. Process-wide, so worker threads see them too."""
    global _state
    with _lock:
        previous = _state
    install(anonymiser, ledger_writer, strategy)
    try:
        yield
    finally:
        with _lock:
            _state = previous


def forced_anonymiser() -> Any:
    """The anonymiser an administrator forces with ``FACETLAKE_ANONYMISE_FORCE`` (None when
    unset): :func:`resources.privacy.policy.forced_policy`, built with this module's model call."""
    policy = forced_policy()
    if not policy.active:
        return None
    with _lock:
        if policy.label not in _forced_cache:
            _forced_cache[policy.label] = policy.anonymiser(model_call=model_anonymiser_call)
        return _forced_cache[policy.label]


def _guard(base_url: str, ctx: CallContext) -> str:
    host = urlparse(base_url).hostname or base_url
    if offline_mode():
        raise OfflineModeError(
            f"offline mode is on (FACETLAKE_OFFLINE): refusing the external call to {host} for {ctx.purpose}; "
            "unset FACETLAKE_OFFLINE or use local metrics/backends"
        )
    return host


def _current(anonymise: bool | None) -> tuple[Any, str | None, _State]:
    with _lock:
        state = _state
    if anonymise is False:
        return None, None, state
    anonymiser = state.anonymiser
    strategy = state.strategy
    if anonymiser is None:
        anonymiser = forced_anonymiser()
        strategy = getattr(anonymiser, "strategy", None) if anonymiser is not None else None
    return anonymiser, strategy, state


def _scrub_texts(texts: list[str], ctx: CallContext, anonymise: bool | None) -> tuple[list[str], dict[str, int], bool, str | None, _State]:
    anonymiser, strategy, state = _current(anonymise)
    if anonymiser is None:
        return texts, {}, False, None, state
    if hasattr(anonymiser, "anonymise_many"):
        mapping = state.mappings.get(ctx.sample_id) if ctx.sample_id else None
        sent, counts, mapping = anonymiser.anonymise_many(texts, mapping)
        if ctx.sample_id:
            state.mappings[ctx.sample_id] = mapping
        return sent, counts, True, strategy, state
    sent, counts = [], {}
    for text in texts:
        out, c = anonymiser(text)
        sent.append(out)
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
    return sent, counts, True, strategy, state


def _scrub_messages(messages: list[dict[str, Any]], ctx: CallContext, anonymise: bool | None
                    ) -> tuple[list[dict[str, Any]], dict[str, int], bool, str | None, _State]:
    """Chat messages as they will be sent: each text content through :func:`_scrub_texts` (one
    placeholder map for the whole call), other messages copied as they are."""
    positions = [i for i, m in enumerate(messages) if isinstance(m.get("content"), str)]
    sent, counts, anonymised, strategy, state = _scrub_texts([messages[i]["content"] for i in positions], ctx, anonymise)
    out = [dict(m) for m in messages]
    for i, text in zip(positions, sent):
        out[i]["content"] = text
    return out, counts, anonymised, strategy, state


def text_sha256(texts: list[str]) -> str:
    """SHA-256 of the texts sent (joined by the ASCII record separator), as in the ledger."""
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()


def _ledger(state: _State, host: str, ctx: CallContext, texts: list[str], anonymised: bool, strategy: str | None, counts: dict[str, int]) -> Any:
    """Commit the call's intent row (durable before the call is sent); returns its call id."""
    if state.ledger_writer is None:
        return None
    return state.ledger_writer(
        {"called_at": dt.datetime.now(dt.timezone.utc), "host": host, "model": ctx.model, "purpose": ctx.purpose,
         "sample_id": ctx.sample_id, "text_sha256": text_sha256(texts), "n_chars": sum(len(t) for t in texts),
         "anonymised": anonymised, "strategy": strategy if anonymised else None, "entity_counts": dict(sorted(counts.items()))}
    )


def _call(state: _State, call_id: Any, fn: Callable[..., Any], **kwargs: Any) -> Any:
    complete = getattr(state.ledger_writer, "complete", None)
    fault_point("outbound.before_send")
    try:
        reply = fn(**kwargs)
    except Exception as exc:
        if complete is not None:
            complete(call_id, ok=False)
        raise redact_exception(exc)
    fault_point("outbound.after_send")
    if complete is not None:
        complete(call_id, ok=True)
    return reply


def _paced(client: Any, ctx: CallContext, texts: list[str], kwargs: Mapping[str, Any], send: Callable[[], Any]) -> Any:
    """Run ``send`` (the ledger's intent, then the call) as one call of the client's endpoint
    (resources/backends/endpoints.py): the run's budget reserves the call's estimate first
    (``BudgetExhausted`` before anything is written or sent), then an in-flight slot and the
    declared pace; the reply's usage settles the budget and corrects the pace."""
    from resources.backends.endpoints import endpoint_for, estimate_tokens, price_of, usd_estimate

    endpoint = endpoint_for(str(client.base_url))
    price = price_of(str(kwargs.get("model") or ctx.model))
    max_tokens = kwargs.get("max_tokens")
    with endpoint.call(estimate_tokens(texts, max_tokens), usd_estimate(price, texts, max_tokens)) as ticket:
        ticket.sending()
        reply = send()
        ticket.done(getattr(reply, "usage", None), price)
    return reply


def chat_completion(client: Any, ctx: CallContext, *, messages: list[dict[str, Any]], anonymise: bool | None = None, **kwargs: Any) -> Any:
    """``client.chat.completions.create(messages=..., **kwargs)`` through the guard, the
    anonymiser and the ledger. ``client`` is an ``openai.OpenAI`` instance.

    ``anonymise``: None = the session's setting; False = send as is (only the model-based
    anonymiser itself uses this). Raises :class:`OfflineModeError` before anything is
    opened in offline mode, ``resources.privacy.anonymise.AnonymisationError`` when anonymisation
    fails (nothing is sent), else whatever the client raises (key scrubbed).
    """
    host = _guard(str(client.base_url), ctx)
    register_secret(getattr(client, "api_key", None))
    sent_messages, counts, anonymised, strategy, state = _scrub_messages(messages, ctx, anonymise)
    texts_sent = [str(m.get("content")) for m in sent_messages]
    return _paced(client, ctx, texts_sent, kwargs, lambda: _call(
        state, _ledger(state, host, ctx, texts_sent, anonymised, strategy, counts), client.chat.completions.create,
        messages=sent_messages, model=kwargs.pop("model", ctx.model), **kwargs))


def completion(client: Any, ctx: CallContext, *, prompt: str, anonymise: bool | None = None, **kwargs: Any) -> Any:
    """``client.completions.create(prompt=..., **kwargs)`` through the guard, anonymiser and ledger
    (same errors as :func:`chat_completion`)."""
    host = _guard(str(client.base_url), ctx)
    register_secret(getattr(client, "api_key", None))
    sent, counts, anonymised, strategy, state = _scrub_texts([prompt], ctx, anonymise)
    return _paced(client, ctx, sent, kwargs, lambda: _call(
        state, _ledger(state, host, ctx, sent, anonymised, strategy, counts), client.completions.create,
        prompt=sent[0], model=kwargs.pop("model", ctx.model), **kwargs))


def deferred_chat(base_url: str, ctx: CallContext, *, messages: list[dict[str, Any]], anonymise: bool | None = None
                  ) -> tuple[list[dict[str, Any]], Any]:
    """A chat request that will leave later as one line of a Batch API file
    (resources/backends/batch.py), through the same guard, anonymiser and ledger as
    :func:`chat_completion`: returns ``(messages as they will be sent, ledger call id)``; the
    intent row is committed before this returns, so it precedes the upload. Same errors as
    :func:`chat_completion` (nothing is sent here)."""
    host = _guard(base_url, ctx)
    out, counts, anonymised, strategy, state = _scrub_messages(messages, ctx, anonymise)
    return out, _ledger(state, host, ctx, [str(m.get("content")) for m in out], anonymised, strategy, counts)


def complete_deferred(call_id: Any, ok: bool) -> None:
    """Mark a deferred call (:func:`deferred_chat`) completed or failed in the session's ledger."""
    with _lock:
        state = _state
    complete = getattr(state.ledger_writer, "complete", None)
    if complete is not None and call_id:
        complete(call_id, ok=ok)


# --------------------------------------------------------------------------- the model anonymiser's call
def model_anonymiser_call(conf: Mapping[str, Any]) -> Callable[[list[dict[str, str]]], str]:
    """The ``model`` anonymiser's LLM call for its options ``conf`` (``base_url``, ``model``,
    ``api_key_env``, ``timeout_s``): one chat completion at temperature 0 asking for a JSON
    object, through :func:`chat_completion` (offline guard, ledger entry
    ``anonymiser:model``) with anonymisation off. The client is built on the first call.

    The call raises ``OfflineModeError`` in offline mode and
    :class:`resources.privacy.anonymise.AnonymisationError` for any other failure (fail closed,
    naming only the exception type)."""
    client: list[Any] = []

    def complete(messages: list[dict[str, str]]) -> str:
        ctx = CallContext(purpose="anonymiser:model", model=conf["model"])
        try:
            if not client:
                import openai

                key = resolve_key(env=conf.get("api_key_env"), required=False) or "not-needed"
                client.append(openai.OpenAI(base_url=conf["base_url"], api_key=key, timeout=float(conf.get("timeout_s", 60.0)),
                                            max_retries=2))
            reply = chat_completion(client[0], ctx, anonymise=False, messages=messages, temperature=0,
                                             response_format={"type": "json_object"})
            return reply.choices[0].message.content or ""
        except OfflineModeError:
            raise
        except Exception as exc:  # noqa: BLE001 - fail closed with the reason
            raise AnonymisationError(f"model anonymiser call failed ({type(exc).__name__}); nothing was sent onward") from None

    return complete
