"""The OpenAI-compatible API backend (``api:MODEL@BASE_URL``).

Any server speaking the OpenAI REST format: OpenAI, vLLM ``serve``, Ollama, DeepSeek,
Groq, Mistral, xAI, Together, a local server. Every request goes through
:mod:`resources.privacy.outbound` (offline guard, anonymiser, outbound ledger); nothing here
opens a connection by itself.

- Endpoint: chat completions by default; ``runtime.api_mode: completions`` uses
  ``/v1/completions`` with the plain prompt (base models). Multiple-choice
  log-likelihood always uses ``/v1/completions`` with ``echo=True, logprobs=1,
  max_tokens=0`` (vLLM serve supports it; OpenAI's chat-only models do not).
- Key: through :func:`resources.privacy.keys.resolve_key` with ``env`` = ``runtime.api_key_env``
  (default ``OPENAI_API_KEY``): a per-run key provided under that name
  (``resources.privacy.keys.provide_key(NAME, key)``, bring-your-own-key), else that environment
  variable. A loopback server (127.0.0.1, localhost) needs none. The key is read when the
  client is built, registered for redaction, and never written to a table, a log,
  metadata or an error message.
- Concurrency, rate limits, budgets: the endpoint's (resources/backends/endpoints.py):
  ``runtime.concurrency`` requests in flight (default
  :data:`~resources.backends.endpoints.DEFAULT_CONCURRENCY`, measured), ``runtime.rpm`` /
  ``runtime.tpm`` paced, a 429's ``Retry-After`` pausing the endpoint, the run's budget checked
  before each call. Results stream: :meth:`APIBackend.generate` yields in request order while
  later requests are in flight, so the asset writes finished rows without a barrier.
- Batch mode: ``runtime.mode: batch`` sends the requests through the OpenAI Batch API
  (resources/backends/batch.py) at the batch price; the generations asset resumes a
  submitted batch instead of sending again.
- Retries: the ``openai`` client's own exponential backoff on 408/409/429/5xx and
  timeouts (``runtime.max_retries``, default 4; ``runtime.timeout_s``, default 60).
  A 401 or 404 stops the run at once with what to fix (every other request would fail
  the same way); any other failure after the retries is that sample's ``error``.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import urlparse

from resources.privacy import outbound
from metric_ops.errors import BudgetExhausted
from resources.backends import BackendError, GenerationRequest, GenerationResult, ModelBackend, ModelSpecError
from resources.backends.logprobs import make_records

_SPEC = re.compile(r"^api:(?P<model>[^@\s]+)@(?P<url>https?://\S+)$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}



def parse_api_spec(spec: str) -> tuple[str, str]:
    """(model, base_url) of ``api:MODEL@BASE_URL``; raises :class:`ModelSpecError` with an example."""
    match = _SPEC.match(spec)
    if not match:
        raise ModelSpecError(
            f"{spec!r}: an API spec is api:MODEL@BASE_URL with an http(s) URL, e.g. "
            "api:gpt-4o-mini@https://api.openai.com/v1 or api:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1"
        )
    return match["model"], match["url"].rstrip("/")


class APIBackend(ModelBackend):
    """An OpenAI-compatible endpoint; see the module docstring."""

    kind = "api"
    live = True
    streams = True  # generate() yields while later requests are in flight (the asset writes without a barrier)
    locality = "external"

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec, runtime)
        self.model, self.base_url = parse_api_spec(spec)
        self.host = urlparse(self.base_url).hostname or self.base_url
        from resources.backends.endpoints import endpoint_options

        self.options = endpoint_options(self.runtime, self.base_url)
        self.concurrency = self.options.concurrency
        self.batch_mode = self.options.mode == "batch"  # the generations asset sends through resources/backends/batch.py
        self.mode = str(self.runtime.get("api_mode", "chat"))
        if self.mode not in ("chat", "completions"):
            raise BackendError(f"runtime.api_mode must be chat or completions, got {self.mode!r}")
        self.purpose = "generation"
        self._client: Any = None
        self._key: str | None = None

    # ------------------------------------------------------------------ client and key
    def _key_env(self) -> str:
        return str(self.runtime.get("api_key_env") or "OPENAI_API_KEY")

    def _resolve_key(self) -> str:
        from resources.privacy.keys import resolve_key

        key = resolve_key(env=self._key_env(), provided=self._key_env(), required=False)
        if key:
            return key
        if self.host in _LOOPBACK:
            return "EMPTY"  # local servers (vLLM serve, Ollama, test servers) need no key
        raise BackendError(
            f"no API key for {self.host}: set ${self._key_env()} in the environment "
            "(or name another variable with runtime.api_key_env, or pass one for this run)"
        )

    def client(self) -> Any:
        """The ``openai.OpenAI`` client (built once; its retries and timeout from ``runtime``)."""
        if self._client is None:
            from resources.backends.endpoints import openai_client

            self._key = self._resolve_key()
            self._client = openai_client(self.base_url, self._key, runtime=self.runtime)
        return self._client

    def identity(self) -> dict[str, Any]:
        return {"backend": "api", "model": self.model, "base_url": self.base_url, "api_mode": self.mode,
                "key_variable": self._key_env()}

    def _scrub(self, message: str) -> str:
        from resources.privacy.keys import redact

        key = self._key
        if key and len(key) >= 4:
            message = message.replace(key, "[REDACTED]")
        return redact(message)

    def _fatal(self, exc: Exception) -> BackendError | None:
        import openai

        if isinstance(exc, openai.AuthenticationError):
            return BackendError(
                f"{self.host} refused the API key (401) for model {self.model!r}: check ${self._key_env()} "
                "(or runtime.api_key_env) holds a valid key for this endpoint"
            )
        if isinstance(exc, openai.PermissionDeniedError):
            return BackendError(f"{self.host} denied access (403) to model {self.model!r}: check the key's project and permissions")
        if isinstance(exc, openai.NotFoundError):
            return BackendError(
                f"{self.host} answered 404 for model {self.model!r} at {self.base_url}: check the model name "
                "(GET BASE_URL/models lists them) and that the base URL ends with /v1"
            )
        return None

    # ------------------------------------------------------------------ generation
    def _request_kwargs(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_tokens": int(settings.get("max_tokens") or 256),
                                  "temperature": float(settings.get("temperature") or 0.0)}
        if settings.get("top_p") is not None:
            kwargs["top_p"] = float(settings["top_p"])
        if settings.get("seed") is not None:
            kwargs["seed"] = int(settings["seed"])
        if settings.get("stop"):
            kwargs["stop"] = settings["stop"]
        return kwargs

    def _one(self, request: GenerationRequest, settings: Mapping[str, Any]) -> GenerationResult:
        sid = request.sample.sample_id
        kwargs = self._request_kwargs(settings)
        want_lp = bool(settings.get("logprobs"))
        top_k = int(settings.get("top_logprobs") or 0)
        ctx = outbound.CallContext(purpose=self.purpose, sample_id=sid, model=self.model)
        t0 = time.perf_counter()
        try:
            if self.mode == "chat":
                messages = request.messages or [{"role": "user", "content": request.prompt}]
                if want_lp:
                    kwargs["logprobs"] = True
                    if top_k:
                        kwargs["top_logprobs"] = top_k
                response = outbound.chat_completion(self.client(), ctx, messages=messages, **kwargs)
                choice = response.choices[0]
                text = choice.message.content or ""
                records = _chat_records(choice, text) if want_lp else None
            else:
                if want_lp:
                    kwargs["logprobs"] = max(1, top_k)
                response = outbound.completion(self.client(), ctx, prompt=request.prompt, **kwargs)
                choice = response.choices[0]
                text = choice.text or ""
                records = _completion_records(choice, text, top_k) if want_lp else None
        except (outbound.OfflineModeError, BackendError, BudgetExhausted):
            raise
        except Exception as exc:  # noqa: BLE001 - classified below
            fatal = self._fatal(exc)
            if fatal is not None:
                raise fatal from None
            return GenerationResult(sid, None, "error", self._scrub(f"{type(exc).__name__}: {exc}"), latency_s=time.perf_counter() - t0)
        usage = getattr(response, "usage", None)
        extra: dict[str, Any] = {"finish_reason": getattr(choice, "finish_reason", None)}
        if records is not None:
            if records:
                extra["token_logprobs"] = records
            else:
                extra["logprobs_missing"] = "the server returned no logprobs"
        return GenerationResult(
            sid, text, "ok", latency_s=time.perf_counter() - t0,
            tokens_in=getattr(usage, "prompt_tokens", None), tokens_out=getattr(usage, "completion_tokens", None), extra=extra,
        )

    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        """Results in request order, each as soon as it and those before it are back (up to
        the endpoint's concurrency in flight). When the run's budget refuses a call, the
        calls already in flight finish and are yielded, nothing more is sent, and
        :class:`~resources.backends.endpoints.BudgetExhausted` is raised at the end with
        ``undone`` = the number of requests not sent."""
        requests = list(requests)
        if not requests:
            return
        refused: BudgetExhausted | None = None
        undone = 0
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="facetlake-api") as pool:
            futures = [pool.submit(self._one, r, settings) for r in requests]
            try:
                for future in futures:
                    if refused is not None and future.cancel():
                        undone += 1
                        continue
                    try:
                        yield future.result()
                    except BudgetExhausted as exc:
                        refused = refused or exc
                        undone += 1
            finally:
                for future in futures:
                    future.cancel()
        if refused is not None:
            refused.undone = undone  # type: ignore[attr-defined]
            raise refused

    # ------------------------------------------------------------------ log-likelihood
    def loglikelihood(self, requests: list[GenerationRequest], settings: Mapping[str, Any]) -> list[GenerationResult]:
        """Per-choice log-likelihood through ``/v1/completions`` with ``echo=True,
        logprobs=1, max_tokens=0``: the continuation's tokens are those whose
        ``text_offset`` is at or past the prompt's length."""
        results = []
        for request in requests:
            sid = request.sample.sample_id
            t0 = time.perf_counter()
            choices = []
            try:
                for label, cont in zip(request.labels or [], request.continuations or []):
                    ctx = outbound.CallContext(purpose=self.purpose, sample_id=sid, model=self.model)
                    response = outbound.completion(self.client(), ctx, prompt=request.prompt + cont, max_tokens=0,
                                                   echo=True, logprobs=1, temperature=0.0)
                    lp = response.choices[0].logprobs
                    offsets = list(lp.text_offset)
                    idx = [i for i, off in enumerate(offsets) if off >= len(request.prompt)]
                    values = [lp.token_logprobs[i] for i in idx]
                    if not idx or any(v is None for v in values):
                        raise BackendError(f"{self.host} returned no prompt logprobs for the continuation (needs echo+logprobs support)")
                    greedy = all(
                        (lp.top_logprobs[i] or {}) and max(lp.top_logprobs[i], key=lp.top_logprobs[i].get) == lp.tokens[i] for i in idx
                    )
                    choices.append({"label": label, "logprob": float(sum(values)), "n_tokens": len(idx),
                                    "n_chars": len(cont), "greedy": bool(greedy)})
                results.append(GenerationResult(sid, None, "ok", latency_s=time.perf_counter() - t0, extra={"choice_logprobs": choices}))
            except (outbound.OfflineModeError, BackendError, BudgetExhausted):
                raise
            except Exception as exc:  # noqa: BLE001
                fatal = self._fatal(exc)
                if fatal is not None:
                    raise fatal from None
                results.append(GenerationResult(sid, None, "error", self._scrub(f"{type(exc).__name__}: {exc}")))
        return results


def _chat_records(choice: Any, text: str) -> list[dict[str, Any]]:
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    pieces = [c.token for c in content]
    lps = [c.logprob for c in content]
    tops = [[(t.token, t.logprob) for t in (c.top_logprobs or [])] for c in content]
    return make_records(pieces, lps, tops, text)


def _completion_records(choice: Any, text: str, top_k: int) -> list[dict[str, Any]]:
    lp = getattr(choice, "logprobs", None)
    if lp is None or not lp.tokens:
        return []
    tops = []
    for entry in lp.top_logprobs or [None] * len(lp.tokens):
        items = sorted((entry or {}).items(), key=lambda kv: -kv[1])[:top_k] if top_k else []
        tops.append(items)
    return make_records(list(lp.tokens), list(lp.token_logprobs), tops, text)
