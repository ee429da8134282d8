"""The one path by which text leaves the process.

Every call to an external service (an API model backend, a remote judge, a model-based
anonymiser) goes through :func:`chat_completion` / :func:`completion` here. This module:

1. refuses in offline mode (``FACETLAKE_OFFLINE=1``) before any connection is opened;
2. anonymises every outgoing text when anonymisation is on (privacy issue);
3. appends one row per call to the outbound ledger (privacy issue);
4. calls the ``openai`` client it is given (its own retries apply).

The interface is stable; the anonymiser and the ledger plug in behind it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlparse


class OfflineModeError(RuntimeError):
    """An external call was attempted while offline mode is on."""


def offline_mode() -> bool:
    """True when ``FACETLAKE_OFFLINE`` is 1/true/yes."""
    return os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes")


@dataclass
class CallContext:
    """Who is calling: the metric (or ``generation``), the sample, and the model name."""

    purpose: str
    sample_id: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# Hooks the privacy layer installs: text -> (text_to_send, entity_counts); and a ledger writer.
Anonymiser = Callable[[str], tuple[str, dict[str, int]]]
_anonymiser: Anonymiser | None = None
_ledger_writer: Callable[[dict[str, Any]], None] | None = None


def install(anonymiser: Anonymiser | None = None, ledger_writer: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Install (or clear with None) the anonymiser and the ledger writer."""
    global _anonymiser, _ledger_writer
    _anonymiser = anonymiser
    _ledger_writer = ledger_writer


def _guard(base_url: str, ctx: CallContext) -> str:
    host = urlparse(base_url).hostname or base_url
    if offline_mode():
        raise OfflineModeError(
            f"offline mode is on (FACETLAKE_OFFLINE): refusing the external call to {host} for {ctx.purpose}; "
            "unset FACETLAKE_OFFLINE or use local metrics/backends"
        )
    return host


def _scrub(text: str) -> tuple[str, dict[str, int], bool]:
    if _anonymiser is None:
        return text, {}, False
    sent, counts = _anonymiser(text)
    return sent, counts, True


def _ledger(host: str, ctx: CallContext, texts: list[str], anonymised: bool, counts: dict[str, int]) -> None:
    if _ledger_writer is None:
        return
    import hashlib

    digest = hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()
    _ledger_writer(
        {"host": host, "model": ctx.model, "purpose": ctx.purpose, "sample_id": ctx.sample_id,
         "text_sha256": digest, "anonymised": anonymised, "entity_counts": counts}
    )


def chat_completion(client: Any, ctx: CallContext, *, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    """``client.chat.completions.create(messages=..., **kwargs)`` through the guard, the
    anonymiser and the ledger. ``client`` is an ``openai.OpenAI`` instance."""
    host = _guard(str(client.base_url), ctx)
    sent_messages, all_counts, anonymised = [], {}, False
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content, counts, anonymised = _scrub(content)
            for k, v in counts.items():
                all_counts[k] = all_counts.get(k, 0) + v
        sent_messages.append({**message, "content": content})
    _ledger(host, ctx, [str(m.get("content")) for m in sent_messages], anonymised, all_counts)
    return client.chat.completions.create(messages=sent_messages, model=kwargs.pop("model", ctx.model), **kwargs)


def completion(client: Any, ctx: CallContext, *, prompt: str, **kwargs: Any) -> Any:
    """``client.completions.create(prompt=..., **kwargs)`` through the guard, anonymiser and ledger."""
    host = _guard(str(client.base_url), ctx)
    sent, counts, anonymised = _scrub(prompt)
    _ledger(host, ctx, [sent], anonymised, counts)
    return client.completions.create(prompt=sent, model=kwargs.pop("model", ctx.model), **kwargs)
