"""Stage 2, ``model`` strategy: :class:`ModelNER`, an LLM asked at temperature 0 for
JSON entities. It is handed its LLM call (a callable) by whoever builds it
(:func:`resources.privacy.outbound.model_anonymiser_call` goes through resources.privacy.outbound); it
imports no transport itself."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Callable

from resources.privacy.anonymise.base import AnonymisationError, Entity
from resources.privacy.anonymise.presidio import _PRESIDIO_TYPES

# --------------------------------------------------------------------------- stage 2: model
MODEL_NER_PROMPT = (
    "You are a named-entity recogniser for anonymisation. List every person name, location (city, country, "
    "street address, region) and organisation in the user's text. Reply with JSON only, exactly: "
    '{"entities": [{"type": "PERSON" | "LOCATION" | "ORGANIZATION", "text": "<exact substring>"}]}. '
    "Copy each entity's text exactly as it appears. Reply {\"entities\": []} when there are none."
)


def _private_host(host: str) -> bool:
    if host in {"localhost"}:
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private


# the model anonymiser's LLM call: chat messages -> the reply's text. It raises
# AnonymisationError when the call fails (fail closed) and lets an offline-mode refusal through
LLMCall = Callable[[list[dict[str, str]]], str]


class ModelNER:
    """An LLM as recogniser: one chat call per text at temperature 0, JSON entities back.

    ``base_url``: an OpenAI-compatible endpoint; ``model``: its model name; ``api_key_env``:
    the environment variable holding the key (never configuration). Because the model sees
    the raw text, a non-local endpoint is refused unless ``allow_remote`` is true.
    ``complete``: the LLM call (:data:`LLMCall`), handed in by the builder --
    :func:`resources.privacy.outbound.model_anonymiser_call` sends it through :mod:`resources.privacy.outbound`
    (offline guard, ledger) with anonymisation off; this module imports no transport.
    Without one, :meth:`find` raises :class:`AnonymisationError` (nothing is sent). A reply
    that is not the JSON shape raises :class:`AnonymisationError` (fail closed); an entity
    text not found verbatim is ignored.
    """

    name = "model"

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, allow_remote: bool = False, timeout_s: float = 60.0,
                 complete: LLMCall | None = None) -> None:
        from urllib.parse import urlparse

        host = urlparse(base_url).hostname or ""
        if not allow_remote and not _private_host(host):
            raise AnonymisationError(
                f"the model anonymiser would send raw text to {host!r}; point it at a local endpoint "
                "(127.0.0.1, a private address) or set allow_remote: true in privacy.model"
            )
        self.base_url, self.model, self.api_key_env, self.timeout_s = base_url, model, api_key_env, timeout_s
        self.complete = complete

    def find(self, text: str) -> list[Entity]:
        if self.complete is None:
            raise AnonymisationError("the model anonymiser has no LLM call configured; nothing was sent onward")
        content = self.complete([{"role": "system", "content": MODEL_NER_PROMPT}, {"role": "user", "content": text}])
        return self.parse(text, content)

    def parse(self, text: str, content: str) -> list[Entity]:
        """Entities from a JSON reply; raises :class:`AnonymisationError` on any other shape."""
        body = content.strip()
        fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.S)
        if fence:
            body = fence.group(1)
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            raise AnonymisationError(f"model anonymiser reply is not JSON ({len(content)} characters); nothing was sent onward") from None
        items = data.get("entities") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise AnonymisationError("model anonymiser reply has no 'entities' list; nothing was sent onward")
        out = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise AnonymisationError("model anonymiser entity without a 'text' string; nothing was sent onward")
            kind = _PRESIDIO_TYPES.get(str(item.get("type", "")).upper())
            needle = item["text"].strip()
            if not kind or len(needle) < 2:
                continue
            for m in re.finditer(re.escape(needle), text):
                out.append(Entity(kind, m.start(), m.end(), needle, self.name, 0.9))
        return out
