"""A scripted OpenAI-compatible server on 127.0.0.1 for the call-layer tests and
``benchmarks/bench_calls.py``: real HTTP (starlette + uvicorn), fixed latency, no model.

Replies are deterministic: a G-Eval steps prompt (asks for ``"steps"``) gets
``{"steps": [...]}``, a scoring prompt (asks for ``"score"``) gets
``{"reasoning": ..., "score": 4}``, anything else ``"answer: <first words of the prompt>"``.
``usage`` counts characters / 4.

Controls, as the issue's tests need them:

- ``latency_s``: every chat/completions reply waits this long (``asyncio.sleep``: the server
  is not the bottleneck at any concurrency);
- ``rpm``: the server's own limit, quantised per second as OpenAI documents (a token bucket
  of ``rpm/60`` requests refilled continuously): a request over it gets 429 with
  ``retry-after``;
- ``refuse_for_s``: every request in the first N seconds (from :meth:`refuse_now`) gets 429
  with ``Retry-After``;
- the Batch API: ``POST /v1/files`` (multipart), ``POST /v1/batches``, ``GET
  /v1/batches/{id}`` (``in_progress`` until ``batch_delay_s`` after creation, then
  ``completed`` with an output file), ``GET /v1/batches`` and ``GET /v1/files/{id}/content``;
- counters: ``calls`` (chat/completions requests answered 200), ``refused`` (429s sent),
  ``files``, ``batches`` (created), ``batch_requests`` (lines in submitted batches).

Run ``python -m tests.support.scripted_llm --port P --latency 0.2`` to serve it in its own
process (the benchmark does, so the server does not share the client's interpreter lock).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from typing import Any

from tests.support.serving import ServedApp, free_port


def reply_text(messages: list[dict[str, Any]]) -> str:
    """The scripted answer to a chat (see the module docstring)."""
    last = str(messages[-1].get("content", "")) if messages else ""
    if '"steps"' in last:
        return json.dumps({"steps": ["Read the response.", "Check it answers the input.", "Give a score."]})
    if '"score"' in last:
        return json.dumps({"reasoning": "The response answers the input.", "score": 4})
    return "answer: " + " ".join(last.split()[:6])


def usage(prompt: str, text: str) -> dict[str, int]:
    tin, tout = max(1, len(prompt) // 4), max(1, len(text) // 4)
    return {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completion object answering ``body``."""
    messages = body.get("messages") or []
    text = reply_text(messages)
    prompt = "".join(str(m.get("content", "")) for m in messages)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "stop"}],
            "usage": usage(prompt, text)}


class ScriptedLLM(ServedApp):
    """The server (see the module docstring). ``start()``/``stop()`` serve it in a thread."""

    server_name = "scripted LLM server"

    def __init__(self, latency_s: float = 0.0, rpm: float | None = None, batch_delay_s: float = 0.5,
                 port: int | None = None) -> None:
        self.latency_s = latency_s
        self.rpm = rpm
        self.batch_delay_s = batch_delay_s
        self.port = port or free_port()
        self.calls = 0
        self.refused = 0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_requests = 0
        self._refuse_until = 0.0
        self._retry_after = "1"
        self._tokens = float(rpm / 60.0) if rpm else 0.0
        self._refilled = time.monotonic()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ controls
    def refuse_now(self, seconds: float, retry_after: str = "1") -> None:
        """Answer every request with 429 and ``Retry-After: retry_after`` for ``seconds``."""
        with self._lock:
            self._refuse_until = time.monotonic() + seconds
            self._retry_after = retry_after

    def reset(self) -> None:
        with self._lock:
            self.calls = self.refused = self.batch_requests = 0

    def _admit(self) -> tuple[bool, str]:
        with self._lock:
            now = time.monotonic()
            if now < self._refuse_until:
                self.refused += 1
                return False, self._retry_after
            if self.rpm:
                rate = self.rpm / 60.0
                self._tokens = min(rate, self._tokens + (now - self._refilled) * rate)  # a second's worth at most
                self._refilled = now
                if self._tokens < 1.0 - 1e-9:
                    self.refused += 1
                    return False, f"{(1.0 - self._tokens) / rate:.3f}"
                self._tokens -= 1.0
            self.calls += 1
            return True, ""

    # ------------------------------------------------------------------ batch API
    def _batch_view(self, batch: dict[str, Any]) -> dict[str, Any]:
        if batch["status"] == "in_progress" and time.time() - batch["created_at"] >= self.batch_delay_s:
            lines = []
            for raw in self.files[batch["input_file_id"]].decode().splitlines():
                if not raw.strip():
                    continue
                item = json.loads(raw)
                lines.append(json.dumps({"id": f"batch_req_{uuid.uuid4().hex[:8]}", "custom_id": item["custom_id"],
                                         "response": {"status_code": 200, "request_id": uuid.uuid4().hex[:8],
                                                      "body": chat_body(item["body"])}, "error": None}))
            out_id = f"file-{uuid.uuid4().hex[:12]}"
            self.files[out_id] = ("\n".join(lines) + "\n").encode()
            batch.update(status="completed", output_file_id=out_id, completed_at=int(time.time()),
                         request_counts={"total": len(lines), "completed": len(lines), "failed": 0})
        return {k: v for k, v in batch.items()}

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            ok, retry = self._admit()
            if not ok:
                return JSONResponse({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                                    status_code=429, headers={"retry-after": retry})
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            return JSONResponse(chat_body(body))

        async def upload(request: Request) -> JSONResponse:
            form = await request.form()
            data = await form["file"].read()
            file_id = f"file-{uuid.uuid4().hex[:12]}"
            with self._lock:
                self.files[file_id] = data
            return JSONResponse({"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                 "filename": getattr(form["file"], "filename", "batch.jsonl"), "purpose": form.get("purpose", "batch"),
                                 "status": "processed"})

        async def create_batch(request: Request) -> JSONResponse:
            body = await request.json()
            if body.get("input_file_id") not in self.files:
                return JSONResponse({"error": {"message": "no such file"}}, status_code=404)
            batch_id = f"batch_{uuid.uuid4().hex[:12]}"
            n = sum(1 for line in self.files[body["input_file_id"]].decode().splitlines() if line.strip())
            batch = {"id": batch_id, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                     "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window", "24h"),
                     "status": "in_progress", "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                     "request_counts": {"total": n, "completed": 0, "failed": 0}, "metadata": body.get("metadata")}
            with self._lock:
                self.batches[batch_id] = batch
                self.batch_requests += n
            return JSONResponse(batch)

        async def get_batch(request: Request) -> JSONResponse:
            batch = self.batches.get(request.path_params["batch_id"])
            if batch is None:
                return JSONResponse({"error": {"message": "no such batch"}}, status_code=404)
            with self._lock:
                return JSONResponse(self._batch_view(batch))

        async def list_batches(request: Request) -> JSONResponse:
            with self._lock:
                data = [self._batch_view(b) for b in sorted(self.batches.values(), key=lambda b: -b["created_at"])]
            return JSONResponse({"object": "list", "data": data, "has_more": False,
                                 "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})

        async def content(request: Request) -> Response:
            data = self.files.get(request.path_params["file_id"])
            if data is None:
                return JSONResponse({"error": {"message": "no such file"}}, status_code=404)
            return Response(data, media_type="application/octet-stream")

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "test"}]})

        return Starlette(routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/files", upload, methods=["POST"]),
            Route("/v1/files/{file_id}/content", content, methods=["GET"]),
            Route("/v1/batches", create_batch, methods=["POST"]),
            Route("/v1/batches", list_batches, methods=["GET"]),
            Route("/v1/batches/{batch_id}", get_batch, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
        ])


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the scripted OpenAI-compatible server (tests/support/scripted_llm.py).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each reply waits (default 0.2)")
    parser.add_argument("--rpm", type=float, default=None)
    args = parser.parse_args()
    import uvicorn

    server = ScriptedLLM(latency_s=args.latency, rpm=args.rpm, port=args.port)
    uvicorn.run(server.app(), host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
