"""The transformers backend (``hf:PATH``): any local causal LM, CPU or GPU.

- Chat templates: a request with ``messages`` (chat / few-shot chat adapters) is rendered
  with the tokenizer's chat template (``apply_chat_template(..., add_generation_prompt=True)``);
  a plain prompt is tokenised as is. A tokenizer without a chat template gets the
  messages' contents joined by blank lines, and the identity records that.
- Batched generation with left padding (``runtime.batch_size``, default 8), greedy when
  ``temperature == 0`` else sampling (``temperature``, ``top_p``) seeded with
  ``torch.manual_seed(seed)`` before every batch (sampled outputs are reproducible for
  the same batch composition).
- Log-probabilities (``generation.logprobs: true``): the log-softmax of the model's raw
  logits (``output_logits=True``), i.e. the untempered distribution, with the top
  ``generation.top_logprobs`` alternatives; character offsets come from decoding prefixes.
- ``stop`` strings (``generation.stop``) end generation (``stop_strings``) and are cut from
  the output, as the OpenAI API does.
- ``runtime`` options: ``batch_size``, ``device`` (default cuda when available), ``dtype``
  (``float32``/``bfloat16``/``float16``/``auto``).

Loaded models are cached per (path, device, dtype) in the process, so several partitions
of one run load the weights once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from resources.backends import BackendError, GenerationRequest, GenerationResult, ModelBackend
from resources.backends.logprobs import make_records

_CACHE: dict[tuple[str, str, str], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def _batched(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]


def load_hf(path: str, device: str, dtype: str = "auto") -> tuple[Any, Any]:
    """(tokenizer, model) for ``path``, cached; raises :class:`BackendError` naming the fix."""
    key = (path, device, dtype)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"hf:{path}: cannot load a causal LM from {path!r} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                "give a local folder holding config.json, tokenizer files and weights (save_pretrained), "
                "or a hub name already in the local cache"
            ) from None
        model.to(device)
        model.eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        _CACHE.clear()  # keep one model in memory at a time
        _CACHE[key] = (tokenizer, model)
        return tokenizer, model


class HFBackend(ModelBackend):
    """A local transformers causal LM (``hf:/path/to/model`` or a cached hub name)."""

    kind = "hf"
    live = True

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec, runtime)
        self.path = spec.split(":", 1)[1]
        local = Path(self.path).expanduser()
        if local.exists():
            self.path = str(local.resolve())
        elif self.path.startswith(("/", "./", "~")):
            raise BackendError(f"{spec!r}: folder {self.path} does not exist; save a model there (save_pretrained) or fix the path")
        self.batch_size = int(self.runtime.get("batch_size", 8))
        self.dtype = str(self.runtime.get("dtype", "auto"))
        self._device = self.runtime.get("device")

    # ------------------------------------------------------------------ loading
    @property
    def device(self) -> str:
        if self._device:
            return str(self._device)
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _load(self) -> tuple[Any, Any]:
        return load_hf(self.path, self.device, self.dtype)

    def identity(self) -> dict[str, Any]:
        tokenizer, model = self._load()
        config = Path(self.path) / "config.json"
        weights = {p.name: p.stat().st_size for p in sorted(Path(self.path).glob("*.safetensors"))} if Path(self.path).is_dir() else {}
        n_params = sum(p.numel() for p in model.parameters())
        return {
            "backend": "hf",
            "path": self.path,
            "model_type": getattr(model.config, "model_type", None),
            "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest() if config.exists() else None,
            "weights_bytes": weights,
            "n_parameters": int(n_params),
            "size_bytes": int(sum(p.numel() * p.element_size() for p in model.parameters())),
            "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
            "device": self.device,
            "chat_template": bool(getattr(tokenizer, "chat_template", None)),
            "transformers": __import__("transformers").__version__,
        }

    # ------------------------------------------------------------------ prompts
    def prompt_text(self, request: GenerationRequest) -> tuple[str, bool]:
        """(text fed to the tokenizer, whether it already holds special tokens)."""
        tokenizer, _ = self._load()
        if request.messages:
            if getattr(tokenizer, "chat_template", None):
                return tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True), True
            return "\n\n".join(str(m.get("content", "")) for m in request.messages), False
        return request.prompt, False

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        requests = list(requests)
        for chunk in _batched(requests, self.batch_size):
            try:
                results = self._generate_batch(chunk, settings)
            except BackendError:
                raise
            except Exception as exc:  # noqa: BLE001 - isolate the failing sample(s)
                if len(chunk) == 1:
                    results = [GenerationResult(chunk[0].sample.sample_id, None, "error", f"{type(exc).__name__}: {exc}")]
                else:
                    results = []
                    for request in chunk:
                        try:
                            results.extend(self._generate_batch([request], settings))
                        except Exception as one_exc:  # noqa: BLE001 - recorded as this sample's error
                            results.append(GenerationResult(request.sample.sample_id, None, "error", f"{type(one_exc).__name__}: {one_exc}"))
            yield from results

    def _generate_batch(self, chunk: list[GenerationRequest], settings: Mapping[str, Any]) -> list[GenerationResult]:
        import torch

        tokenizer, model = self._load()
        texts, specials = zip(*(self.prompt_text(r) for r in chunk))
        enc = tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=not any(specials)).to(model.device)
        temperature = float(settings.get("temperature") or 0.0)
        stop = settings.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        kwargs: dict[str, Any] = {
            "max_new_tokens": int(settings.get("max_tokens") or 256),
            "do_sample": temperature > 0,
            "pad_token_id": tokenizer.pad_token_id,
            "return_dict_in_generate": True,
            "output_logits": True,
        }
        if temperature > 0:
            kwargs["temperature"] = temperature
            kwargs["top_p"] = float(settings.get("top_p") or 1.0)
            torch.manual_seed(int(settings.get("seed") or 0))
        else:  # greedy: silence the model's sampling defaults
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if stop:
            kwargs.update(stop_strings=stop, tokenizer=tokenizer)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, **kwargs)
        latency = time.perf_counter() - t0
        input_len = enc["input_ids"].shape[1]
        generated = out.sequences[:, input_len:]
        want_lp = bool(settings.get("logprobs"))
        top_k = int(settings.get("top_logprobs") or 0)
        logprobs = torch.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1) if want_lp else None
        eos = set(_as_list(getattr(model.generation_config, "eos_token_id", None))) | set(_as_list(tokenizer.eos_token_id))
        special = set(tokenizer.all_special_ids)
        results = []
        for row, request in enumerate(chunk):
            ids = generated[row].tolist()
            n = next((i for i, t in enumerate(ids) if t in eos), len(ids))
            ids = ids[:n]
            text = tokenizer.decode(ids, skip_special_tokens=True)
            cut = min((text.find(s) for s in stop if s and s in text), default=-1)
            extra: dict[str, Any] = {}
            if want_lp:
                keep = [i for i, t in enumerate(ids) if t not in special]
                spans = _prefix_spans(tokenizer, [ids[i] for i in keep], text)
                pieces = [tokenizer.decode([ids[i]]) for i in keep]
                lps = [float(logprobs[row, i, ids[i]]) for i in keep]
                tops = None
                if top_k > 0:
                    values, indices = torch.topk(logprobs[row, keep], k=top_k, dim=-1) if keep else (None, None)
                    tops = [
                        [(tokenizer.decode([int(t)]), float(v)) for v, t in zip(values[j].tolist(), indices[j].tolist())]
                        for j in range(len(keep))
                    ]
                records = make_records(pieces, lps, tops, text, spans)
                if cut >= 0:
                    records = [r for r in records if r["char_start"] < cut]
                    for r in records:
                        r["char_end"] = min(r["char_end"], cut)
                extra["token_logprobs"] = records
            if cut >= 0:
                text = text[:cut]
            results.append(
                GenerationResult(
                    request.sample.sample_id, text, "ok", latency_s=latency,
                    tokens_in=int(enc["attention_mask"][row].sum()), tokens_out=len(ids), extra=extra,
                )
            )
        return results

    # ------------------------------------------------------------------ log-likelihood
    def loglikelihood(self, requests: list[GenerationRequest], settings: Mapping[str, Any]) -> list[GenerationResult]:
        """Sum of log-probabilities of each continuation after the prompt (lm-eval-harness's
        ``loglikelihood``: context and context+continuation tokenised, the continuation is
        the tail). Per request: ``extra["choice_logprobs"]`` = ``[{label, logprob, n_tokens,
        n_chars, greedy}]``; ``output`` is left to the adapter."""
        import torch

        tokenizer, model = self._load()
        results = []
        for request in requests:
            t0 = time.perf_counter()
            try:
                context = tokenizer(request.prompt)["input_ids"]
                choices = []
                for label, cont in zip(request.labels or [], request.continuations or []):
                    whole = tokenizer(request.prompt + cont)["input_ids"]
                    n_cont = max(1, len(whole) - len(context))
                    ids = torch.tensor([whole], device=model.device)
                    with torch.no_grad():
                        logits = model(ids).logits.float()
                    lp = torch.log_softmax(logits[0, -n_cont - 1 : -1], dim=-1)
                    target = ids[0, -n_cont:]
                    chosen = lp.gather(1, target[:, None])[:, 0]
                    choices.append(
                        {"label": label, "logprob": float(chosen.sum()), "n_tokens": n_cont, "n_chars": len(cont),
                         "greedy": bool((lp.argmax(-1) == target).all())}
                    )
                results.append(GenerationResult(request.sample.sample_id, None, "ok", latency_s=time.perf_counter() - t0,
                                                tokens_in=len(context), tokens_out=0, extra={"choice_logprobs": choices}))
            except Exception as exc:  # noqa: BLE001 - one bad sample never sinks the run
                results.append(GenerationResult(request.sample.sample_id, None, "error", f"{type(exc).__name__}: {exc}"))
        return results


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple, set)) else [int(value)]


def _prefix_spans(tokenizer: Any, ids: list[int], text: str) -> list[tuple[int, int]]:
    """Character span of each token in ``text`` by decoding growing prefixes; a token that
    ends inside a multi-byte character gets an empty span and the next one covers it."""
    spans = []
    prev = 0
    for i in range(len(ids)):
        prefix = tokenizer.decode(ids[: i + 1], skip_special_tokens=True)
        end = len(prefix) if text.startswith(prefix) else prev
        end = max(prev, min(end, len(text)))
        spans.append((prev, end))
        prev = end
    return spans
