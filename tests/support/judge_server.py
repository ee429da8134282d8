"""A real OpenAI-compatible HTTP server on 127.0.0.1 serving the tiny local LM, for the
judge wire-path tests (starlette + uvicorn in a background thread).

``POST /v1/chat/completions`` applies the model's chat template, keeps the last
``context_tokens`` prompt tokens (the tiny model has 512 positions), generates greedily up
to ``max_tokens`` (capped) and answers in the OpenAI format, with ``logprobs.content``
(token, logprob, top_logprobs) when ``logprobs`` is asked. ``GET /v1/models`` lists the
model. Every request body is kept in ``server.requests`` so a test can count the calls.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.support.serving import ServedApp, free_port


class JudgeServer(ServedApp):
    """Serve ``model_dir`` (a transformers causal LM folder) as model ``name``."""

    server_name = "judge test server"

    def __init__(self, model_dir: str, name: str = "tiny-judge", max_new_tokens: int = 24, context_tokens: int = 400) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = name
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
        self.max_new_tokens = max_new_tokens
        self.context_tokens = context_tokens
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._torch = torch
        self.port = free_port()

    # ------------------------------------------------------------------ generation
    def _generate(self, messages: list[dict[str, str]], max_tokens: int, logprobs: bool, top: int) -> dict[str, Any]:
        torch = self._torch
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        ids = list(ids)[-self.context_tokens:]
        with self._lock, torch.inference_mode():
            out = self.model.generate(
                torch.tensor([ids]), max_new_tokens=min(max_tokens, self.max_new_tokens), do_sample=False,
                output_scores=True, return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out.sequences[0, len(ids):].tolist()
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        content = []
        if logprobs:
            for step, token_id in enumerate(new):
                lp = torch.log_softmax(out.scores[step][0].float(), dim=-1)
                vals, idx = lp.topk(max(1, top))
                content.append({
                    "token": self.tokenizer.decode([token_id]), "logprob": float(lp[token_id]), "bytes": None,
                    "top_logprobs": [{"token": self.tokenizer.decode([int(i)]), "logprob": float(v), "bytes": None}
                                     for v, i in zip(vals.tolist(), idx.tolist())],
                })
        return {"text": text, "content": content, "prompt_tokens": len(ids), "completion_tokens": len(new)}

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            result = self._generate(body["messages"], int(body.get("max_tokens") or 16), bool(body.get("logprobs")),
                                    int(body.get("top_logprobs") or 1))
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length",
                                      "message": {"role": "assistant", "content": result["text"]}}
            choice["logprobs"] = {"content": result["content"]} if body.get("logprobs") else None
            return JSONResponse({
                "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": self.name, "choices": [choice],
                "usage": {"prompt_tokens": result["prompt_tokens"], "completion_tokens": result["completion_tokens"],
                          "total_tokens": result["prompt_tokens"] + result["completion_tokens"]},
            })

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "test"}]})

        return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])
