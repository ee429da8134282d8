"""A small OpenAI-format HTTP server in front of a local transformers model, for tests.

Built on Starlette + uvicorn, served on 127.0.0.1 over real HTTP. Unlike
``transformers serve`` it returns ``logprobs`` / ``top_logprobs`` (chat) and legacy
completion logprobs with ``echo`` (prompt log-likelihood). Test controls:

- ``fail_next([429, 500])``: answer the next requests with these statuses first
  (with ``retry-after-ms: 10`` so client retries are quick);
- ``hold_after(n)``: requests after the n-th block until :meth:`release`;
- ``api_key``: when set, other bearer tokens get 401; an unknown model gets 404;
- ``calls`` counts generation requests that reached the model; ``received`` keeps every
  request body (for checking what was sent).

Generation is greedy (``temperature`` 0) or sampled, ``max_tokens`` new tokens, stopping
at EOS; its log-probabilities are the log-softmax of the raw logits (the same definition
as the hf backend) computed here independently.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import torch
from tests.support.serving import BackgroundServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from transformers import AutoModelForCausalLM, AutoTokenizer


class TinyOpenAIServer:
    """Serve the model at ``path`` as ``model_name`` on 127.0.0.1 (see module docstring)."""

    def __init__(self, path: str, model_name: str = "tiny", api_key: str | None = None) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path)
        self.model.eval()
        self.model_name = model_name
        self.api_key = api_key
        self.calls = 0
        self.received: list[dict[str, Any]] = []
        self._failures: list[int] = []
        self._hold_after: int | None = None
        self._gate = threading.Event()
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        app = Starlette(routes=[
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
        ])
        self._serving = BackgroundServer(app, name="OpenAI-format test server")
        self.port = self._serving.port
        self.base_url = self._serving.base_url

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "TinyOpenAIServer":
        self._serving.start()
        return self

    def stop(self) -> None:
        self.release()
        self._serving.stop()

    # ------------------------------------------------------------------ controls
    def fail_next(self, statuses: list[int]) -> None:
        with self._lock:
            self._failures.extend(statuses)

    def hold_after(self, n: int | None) -> None:
        self._gate.clear()
        self._hold_after = n

    def release(self) -> None:
        self._hold_after = None
        self._gate.set()

    def reset(self) -> None:
        with self._lock:
            self.calls = 0
            self.received.clear()
            self._failures.clear()

    # ------------------------------------------------------------------ checks
    def _check(self, request: Request, body: dict[str, Any]) -> JSONResponse | None:
        with self._lock:
            self.received.append(body)
            if self._failures:
                status = self._failures.pop(0)
                return JSONResponse({"error": {"message": f"forced {status}", "type": "test"}}, status_code=status,
                                    headers={"retry-after-ms": "10"})
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}}, status_code=401)
        if body.get("model") != self.model_name:
            return JSONResponse({"error": {"message": f"The model {body.get('model')!r} does not exist", "code": "model_not_found"}},
                                status_code=404)
        with self._lock:
            self.calls += 1
            n = self.calls
        if self._hold_after is not None and n > self._hold_after:
            self._gate.wait(timeout=600)
        return None

    # ------------------------------------------------------------------ model
    def _generate(self, text: str, special: bool, body: dict[str, Any]) -> dict[str, Any]:
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=not special)
        temperature = float(body.get("temperature") or 0.0)
        kwargs: dict[str, Any] = {"max_new_tokens": int(body.get("max_tokens") or 16), "return_dict_in_generate": True,
                                  "output_logits": True, "pad_token_id": self.tokenizer.pad_token_id}
        if temperature > 0:
            torch.manual_seed(int(body.get("seed") or 0))
            kwargs.update(do_sample=True, temperature=temperature)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with self._model_lock, torch.no_grad():
            out = self.model.generate(**enc, **kwargs)
        n_in = enc["input_ids"].shape[1]
        ids = out.sequences[0, n_in:].tolist()
        eos = self.tokenizer.eos_token_id
        finish = "length"
        if eos in ids:
            ids = ids[: ids.index(eos)]
            finish = "stop"
        lp = torch.log_softmax(torch.stack(out.logits, dim=1)[0].float(), dim=-1)
        k = int(body.get("top_logprobs") or 0)
        tokens = []
        for i, t in enumerate(ids):
            top = torch.topk(lp[i], k=max(k, 1))
            tokens.append({
                "token": self.tokenizer.decode([t]),
                "logprob": float(lp[i, t]),
                "top": [(self.tokenizer.decode([int(j)]), float(v)) for v, j in zip(top.values.tolist(), top.indices.tolist())][:k],
            })
        return {"text": self.tokenizer.decode(ids, skip_special_tokens=True), "tokens": tokens, "n_in": n_in,
                "n_out": len(ids), "finish": finish}

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "test"}]})

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        refused = await _in_thread(self._check, request, body)
        if refused is not None:
            return refused
        text = self.tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        gen = await _in_thread(self._generate, text, True, body)
        logprobs = None
        if body.get("logprobs"):
            logprobs = {"content": [
                {"token": t["token"], "logprob": t["logprob"], "bytes": list(t["token"].encode()),
                 "top_logprobs": [{"token": a, "logprob": b, "bytes": list(a.encode())} for a, b in t["top"]]}
                for t in gen["tokens"]
            ]}
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()), "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": gen["text"]}, "logprobs": logprobs,
                         "finish_reason": gen["finish"]}],
            "usage": {"prompt_tokens": gen["n_in"], "completion_tokens": gen["n_out"], "total_tokens": gen["n_in"] + gen["n_out"]},
        })

    def _echo_logprobs(self, prompt: str) -> dict[str, Any]:
        ids = self.tokenizer(prompt)["input_ids"]
        with self._model_lock, torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        tokens, values, tops, offsets = [], [], [], []
        text = ""
        for i, t in enumerate(ids):
            piece = self.tokenizer.decode([t], skip_special_tokens=True)
            offsets.append(len(text))
            text += piece
            tokens.append(piece)
            if i == 0:
                values.append(None)
                tops.append(None)
            else:
                values.append(float(lp[i - 1, t]))
                best = int(lp[i - 1].argmax())
                tops.append({self.tokenizer.decode([best]): float(lp[i - 1, best])})
        return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        refused = await _in_thread(self._check, request, body)
        if refused is not None:
            return refused
        prompt = body["prompt"]
        if body.get("echo") and int(body.get("max_tokens") or 0) == 0:
            logprobs = await _in_thread(self._echo_logprobs, prompt)
            text, n_out, finish = prompt, 0, "length"
            n_in = len(logprobs["tokens"])
        else:
            k = int(body.get("logprobs") or 0)
            gen = await _in_thread(self._generate, prompt, False, {**body, "top_logprobs": k})
            text, n_in, n_out, finish = gen["text"], gen["n_in"], gen["n_out"], gen["finish"]
            logprobs = None
            if body.get("logprobs") is not None:
                offsets, pos = [], 0
                for t in gen["tokens"]:
                    offsets.append(pos)
                    pos += len(t["token"])
                logprobs = {"tokens": [t["token"] for t in gen["tokens"]], "token_logprobs": [t["logprob"] for t in gen["tokens"]],
                            "top_logprobs": [dict(t["top"]) for t in gen["tokens"]], "text_offset": offsets}
        return JSONResponse({
            "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()), "model": self.model_name,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        })


async def _in_thread(fn, *args):
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)

