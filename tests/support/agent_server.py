"""An OpenAI-format chat server on 127.0.0.1 that plays a rule-following shop agent, for
live-episode tests over real HTTP (the api backend). No model: the rules read the
conversation the episode runner sends (plain role/content turns, tool results as
``<tool_response>`` user turns) and answer with ``<tool_call>`` blocks or text.

Rules: after a tool response, report it; asked about an order's status, look it up; asked
to cancel, ask for confirmation, and on "yes" cancel the order named earlier.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.serving import BackgroundServer


def reply_for(messages: list[dict[str, Any]]) -> str:
    """The agent's reply to a conversation (see the module docstring)."""
    last = str(messages[-1].get("content") or "")
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user" and not str(m.get("content")).startswith("<tool_response>")]
    if last.startswith("<tool_response>"):
        return f"Here is what I found: {last[len('<tool_response>'):-len('</tool_response>')]}"
    order = next((m.group(0) for u in users for m in [re.search(r"\b[A-Z]\d\b", u)] if m), None)
    if re.search(r"\byes\b", last, re.I) and order:
        return f'<tool_call>{json.dumps({"name": "cancel_order", "arguments": {"order_id": order}})}</tool_call>'
    if "status" in last.lower() and order:
        return f'<tool_call>{json.dumps({"name": "get_order", "arguments": {"order_id": order}})}</tool_call>'
    if "cancel" in last.lower() and order:
        return f"I can cancel order {order}. Shall I proceed? Please answer yes."
    return "How can I help you?"


class AgentServer:
    """Serve :func:`reply_for` as model ``shop-agent``; ``requests`` counts chat calls."""

    def __init__(self) -> None:
        self.requests = 0
        app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                Route("/v1/models", self.models, methods=["GET"])])
        self._serving = BackgroundServer(app, name="agent test server")
        self.base_url = self._serving.base_url

    def start(self) -> "AgentServer":
        self._serving.start()
        return self

    def stop(self) -> None:
        self._serving.stop()

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "shop-agent", "object": "model"}]})

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests += 1
        messages = body.get("messages") or []
        reply = reply_for(messages)
        n_in = sum(len(str(m.get("content") or "").split()) for m in messages)
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "shop-agent"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": len(reply.split()), "total_tokens": n_in + len(reply.split())},
        })
