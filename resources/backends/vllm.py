"""The vLLM backend (``vllm:NAME``): vLLM's offline ``LLM`` engine on GPUs.

vLLM is an optional extra (``pip install 'facetlake[vllm]'``), imported only when a
``vllm:`` model is used; without it the backend fails with that install line.

- ``runtime`` options: ``tensor_parallel_size`` (default 1), ``gpu_memory_utilization``
  (default 0.9), ``max_model_len``, ``dtype`` (default ``auto``), ``enforce_eager``.
- Requests with ``messages`` go through ``LLM.chat`` (the model's chat template), plain
  prompts through ``LLM.generate``, all in one call (vLLM batches internally).
- ``SamplingParams(temperature, top_p, max_tokens, seed, stop, logprobs=top_logprobs)``:
  each generated token's log-probability (vLLM returns the sampled token plus the top
  ``k``), written as the same records as every other backend (resources/backends/logprobs.py).
- Multiple-choice log-likelihood with ``prompt_logprobs=1`` over prompt+continuation.

The engine is cached per (name, runtime) in the process.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Iterator, Mapping

from resources.backends import BackendError, GenerationRequest, GenerationResult, ModelBackend
from resources.backends.logprobs import make_records

_ENGINES: dict[str, Any] = {}


def vllm_available() -> bool:
    """Whether the ``vllm`` package can be imported."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class VLLMBackend(ModelBackend):
    """A model served by vLLM's offline engine; see the module docstring."""

    kind = "vllm"
    live = True

    ENGINE_OPTIONS = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "enforce_eager", "trust_remote_code")

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec, runtime)
        self.name = spec.split(":", 1)[1]

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM`` (model name plus the runtime engine options)."""
        options = {"model": self.name, "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9}
        options.update({k: self.runtime[k] for k in self.ENGINE_OPTIONS if k in self.runtime})
        return options

    def _engine(self) -> Any:
        if not vllm_available():
            raise BackendError(
                f"{self.spec!r} needs vLLM, which is not installed: pip install 'facetlake[vllm]' on a machine with a GPU "
                "(or serve the model with `vllm serve` elsewhere and use api:MODEL@http://HOST:8000/v1)"
            )
        key = json.dumps(self.engine_options(), sort_keys=True)
        if key not in _ENGINES:
            from vllm import LLM

            _ENGINES.clear()
            _ENGINES[key] = LLM(**self.engine_options())
        return _ENGINES[key]

    def identity(self) -> dict[str, Any]:
        import importlib.metadata as md

        ident: dict[str, Any] = {"backend": "vllm", "model": self.name, "engine": self.engine_options()}
        try:
            ident["vllm"] = md.version("vllm")
        except md.PackageNotFoundError:
            ident["vllm"] = "absent"
        return ident

    def _sampling(self, settings: Mapping[str, Any], **overrides: Any) -> Any:
        from vllm import SamplingParams

        params: dict[str, Any] = {
            "temperature": float(settings.get("temperature") or 0.0),
            "top_p": float(settings.get("top_p") or 1.0),
            "max_tokens": int(settings.get("max_tokens") or 256),
            "seed": int(settings.get("seed") or 0),
        }
        if settings.get("stop"):
            params["stop"] = settings["stop"]
        if settings.get("logprobs"):
            params["logprobs"] = int(settings.get("top_logprobs") or 0)
        params.update(overrides)
        return SamplingParams(**params)

    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        requests = list(requests)
        if not requests:
            return
        llm = self._engine()
        sampling = self._sampling(settings)
        top_k = int(settings.get("top_logprobs") or 0)
        outputs: list[Any] = [None] * len(requests)
        errors: dict[int, str] = {}
        t0 = time.perf_counter()
        chat_idx = [i for i, r in enumerate(requests) if r.messages]
        plain_idx = [i for i, r in enumerate(requests) if not r.messages]
        for idx, call in ((chat_idx, "chat"), (plain_idx, "generate")):
            if not idx:
                continue
            try:
                if call == "chat":
                    got = llm.chat([requests[i].messages for i in idx], sampling, use_tqdm=False)
                else:
                    got = llm.generate([requests[i].prompt for i in idx], sampling, use_tqdm=False)
                for i, out in zip(idx, got):
                    outputs[i] = out
            except Exception as exc:  # noqa: BLE001 - the whole call failed: every sample in it is an error
                for i in idx:
                    errors[i] = f"{type(exc).__name__}: {exc}"
        latency = time.perf_counter() - t0
        for i, request in enumerate(requests):
            sid = request.sample.sample_id
            if i in errors or outputs[i] is None:
                yield GenerationResult(sid, None, "error", errors.get(i, "vLLM returned no output"))
                continue
            out = outputs[i]
            completion = out.outputs[0]
            text = completion.text
            extra: dict[str, Any] = {"finish_reason": completion.finish_reason}
            if settings.get("logprobs") and completion.logprobs is not None:
                pieces, lps, tops = [], [], []
                for token_id, entry in zip(completion.token_ids, completion.logprobs):
                    chosen = entry[token_id]
                    pieces.append(chosen.decoded_token or "")
                    lps.append(chosen.logprob)
                    ranked = sorted(entry.values(), key=lambda lp: -lp.logprob)[:top_k]
                    tops.append([(lp.decoded_token or "", lp.logprob) for lp in ranked])
                extra["token_logprobs"] = make_records(pieces, lps, tops, text)
            yield GenerationResult(sid, text, "ok", latency_s=latency, tokens_in=len(out.prompt_token_ids or []),
                                   tokens_out=len(completion.token_ids), extra=extra)

    def loglikelihood(self, requests: list[GenerationRequest], settings: Mapping[str, Any]) -> list[GenerationResult]:
        """Per-choice log-likelihood from ``prompt_logprobs=1`` over prompt+continuation."""
        llm = self._engine()
        tokenizer = llm.get_tokenizer()
        sampling = self._sampling({}, max_tokens=1, prompt_logprobs=1, logprobs=None)
        results = []
        for request in requests:
            t0 = time.perf_counter()
            try:
                n_ctx = len(tokenizer(request.prompt)["input_ids"])
                texts = [request.prompt + c for c in request.continuations or []]
                outs = llm.generate(texts, sampling, use_tqdm=False)
                choices = []
                for label, cont, out in zip(request.labels or [], request.continuations or [], outs):
                    ids = out.prompt_token_ids
                    values, greedy = [], True
                    for pos in range(max(1, n_ctx), len(ids)):
                        entry = out.prompt_logprobs[pos]
                        values.append(entry[ids[pos]].logprob)
                        greedy = greedy and entry[ids[pos]].rank == 1
                    choices.append({"label": label, "logprob": float(sum(values)), "n_tokens": len(values),
                                    "n_chars": len(cont), "greedy": bool(greedy)})
                results.append(GenerationResult(request.sample.sample_id, None, "ok", latency_s=time.perf_counter() - t0,
                                                tokens_in=n_ctx, tokens_out=0, extra={"choice_logprobs": choices}))
            except Exception as exc:  # noqa: BLE001
                results.append(GenerationResult(request.sample.sample_id, None, "error", f"{type(exc).__name__}: {exc}"))
        return results
