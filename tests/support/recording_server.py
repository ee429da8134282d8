"""A small OpenAI-format HTTP server that records every request, for privacy tests.

Starlette + uvicorn on 127.0.0.1 over real HTTP; no model. Replies:

- chat completions whose system message asks for named entities (the model-based
  anonymiser's prompt) get ``{"entities": [...]}`` from ``ner`` (a function of the text);
- other chat completions and completions get ``"Answer: <the last user text>. Score: 4"``,
  so the output carries whatever placeholders were sent.

``received`` keeps every raw request body (bytes) and ``authorizations`` every bearer
token seen; ``api_key`` (when set) makes other tokens a 401; ``delay_s`` holds each
reply that long (to kill a worker or start a rival while a run is mid-generation).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Callable

from tests.support.serving import BackgroundServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class RecordingServer:
    """See the module docstring."""

    def __init__(self, api_key: str | None = None, ner: Callable[[str], list[dict[str, str]]] | None = None, ner_reply: str | None = None,
                 delay_s: float = 0.0) -> None:
        self.api_key = api_key
        self.delay_s = delay_s
        self.ner = ner
        self.ner_reply = ner_reply
        self.received: list[bytes] = []
        self.authorizations: list[str] = []
        app = Starlette(routes=[
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
        ])
        self._serving = BackgroundServer(app, name="recording server")
        self.port = self._serving.port
        self.base_url = self._serving.base_url

    def start(self) -> "RecordingServer":
        self._serving.start()
        return self

    def stop(self) -> None:
        self._serving.stop()

    def texts(self) -> str:
        """Every request body received, decoded and joined (JSON escapes resolved)."""
        out = []
        for raw in self.received:
            try:
                out.append(json.dumps(json.loads(raw), ensure_ascii=False))
            except ValueError:
                out.append(raw.decode("utf-8", "replace"))
        return "\n".join(out)

    async def _record(self, request: Request) -> tuple[dict[str, Any], JSONResponse | None]:
        raw = await request.body()
        self.received.append(raw)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        auth = request.headers.get("authorization", "")
        self.authorizations.append(auth)
        if self.api_key and auth != f"Bearer {self.api_key}":
            return {}, JSONResponse({"error": {"message": "invalid api key", "type": "invalid_request_error"}}, status_code=401)
        return json.loads(raw or b"{}"), None

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "recording", "object": "model"}]})

    @staticmethod
    def _usage(text: str, reply: str) -> dict[str, int]:
        return {"prompt_tokens": len(text.split()), "completion_tokens": len(reply.split()), "total_tokens": len(text.split()) + len(reply.split())}

    async def chat(self, request: Request) -> JSONResponse:
        body, refused = await self._record(request)
        if refused:
            return refused
        messages = body.get("messages") or []
        system = " ".join(m.get("content", "") for m in messages if m.get("role") == "system")
        user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        if "named-entity recogniser" in system:
            reply = self.ner_reply if self.ner_reply is not None else json.dumps({"entities": self.ner(user) if self.ner else []})
        else:
            reply = f"Answer: {user}. Score: 4"
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "recording"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": self._usage(user, reply),
        })

    async def completions(self, request: Request) -> JSONResponse:
        body, refused = await self._record(request)
        if refused:
            return refused
        prompt = body.get("prompt") or ""
        prompt = prompt if isinstance(prompt, str) else " ".join(prompt)
        reply = f"Answer: {prompt}. Score: 4"
        return JSONResponse({
            "id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "text_completion", "created": int(time.time()),
            "model": body.get("model", "recording"),
            "choices": [{"index": 0, "text": reply, "finish_reason": "stop", "logprobs": None}],
            "usage": self._usage(prompt, reply),
        })
