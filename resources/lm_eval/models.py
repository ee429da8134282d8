"""Running lm-evaluation-harness for facetlake: model mapping, the outbound gate, the run.

A facetlake model spec names lm-eval's own model class (issue 18):

=============================  ====================================================
facetlake spec                 lm-eval model (``simple_evaluate(model=...)``)
=============================  ====================================================
``hf:PATH``                    ``hf`` with ``pretrained=PATH``
``vllm:NAME``                  ``vllm`` with ``pretrained=NAME``
``api:MODEL@BASE_URL``         ``local-completions`` (``BASE_URL/completions``), or
                               ``local-chat-completions`` (``BASE_URL/chat/completions``)
                               with ``api_mode="chat"``; both wrapped as below
=============================  ====================================================

The outbound path. lm-eval's API classes send their requests with their own HTTP code
(``requests`` / ``aiohttp``), not through :mod:`resources.privacy.outbound`, and for
log-likelihood requests they send token ids, so facetlake cannot anonymise what they
send. Therefore, for ``api:`` models:

- offline mode (``FACETLAKE_OFFLINE``) refuses the model before lm-eval is called (before
  any client is built or socket opened; :func:`check_outbound`), and the wrapper refuses
  again right before each request as a second guard;
- an active anonymisation policy (the spec's ``privacy.anonymise`` or the administrator's
  ``FACETLAKE_ANONYMISE_FORCE``) refuses the combination with a message saying why
  (:class:`LmEvalPrivacyError`);
- the outbound ledger still records every request: lm-eval's classes are used through thin
  subclasses (registered in lm-eval as ``facetlake-local-completions`` and
  ``facetlake-local-chat-completions``) whose ``_create_payload`` writes one ledger row
  per request (host, API model, purpose ``lm_eval:generate_until`` or
  ``lm_eval:loglikelihood``, SHA-256 and length of the prompt text or token ids, never the
  text or a key) and whose API key comes from ``api_key_env`` through
  :func:`resources.privacy.keys.resolve_key` (registered for redaction). Payloads, parsing,
  retries and batching stay lm-eval's.

``hf:`` and ``vllm:`` models run in this process: nothing leaves it. In offline mode the run
also sets ``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1``, so a task whose dataset lives
on the Hugging Face hub fails with the hub's own offline error instead of downloading.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import functools
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import urlparse

from resources.lm_eval.common import TASKS_DIR, LmEvalError, require_lm_eval

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class LmEvalPrivacyError(LmEvalError):
    """The run's privacy settings forbid this model through lm-eval (see the module docstring)."""


@dataclass(frozen=True)
class LmEvalModel:
    """How facetlake runs one model spec through lm-eval.

    ``name``: the lm-eval model registry name; ``args``: its model arguments;
    ``locality``: ``local`` (hf, vllm) or ``external`` (api); ``host``/``api_model`` for
    API models (the ledger's host and model).
    """

    spec: str
    name: str
    args: dict[str, Any]
    locality: str = "local"
    host: str | None = None
    api_model: str | None = None
    lm_eval_class: str = field(default="")

    @property
    def slug(self) -> str:
        """A model name for the lake derived from the spec (the folder or API model's last part)."""
        from resources.catalog.spec import slugify_model

        return slugify_model(self.spec.split(":", 1)[-1].split("@", 1)[0].rstrip("/").rsplit("/", 1)[-1])


def parse_model_args(text: str | None) -> dict[str, Any]:
    """``KEY=VALUE,KEY=VALUE`` (lm-eval's ``--model_args`` form) as a dict; values stay strings
    except ``true``/``false`` and numbers. Raises :class:`LmEvalError` for an item without ``=``."""
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise LmEvalError(f"--model-args item {item!r} is not KEY=VALUE (e.g. dtype=float32,trust_remote_code=true)")
        key, value = item.split("=", 1)
        low = value.lower()
        if low in ("true", "false"):
            out[key.strip()] = low == "true"
        else:
            try:
                out[key.strip()] = int(value) if value.lstrip("-").isdigit() else float(value) if _is_float(value) else value
            except ValueError:
                out[key.strip()] = value
    return out


def _is_float(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return "." in value or "e" in value.lower()


def lm_eval_model(spec: str, *, model_args: Mapping[str, Any] | None = None, api_mode: str = "completions",
                  api_key_env: str | None = None) -> LmEvalModel:
    """The lm-eval model for facetlake model spec ``spec`` (module docstring table).

    ``model_args`` are added to lm-eval's model arguments (e.g. ``dtype``, ``tokenizer``,
    ``tokenizer_backend``, ``max_length``); ``api_mode`` picks completions or chat for
    ``api:``; ``api_key_env`` names the variable holding the API key (default
    ``OPENAI_API_KEY``). Raises :class:`LmEvalError` for a spec lm-eval cannot run
    (precomputed outputs, heuristics) or an unknown ``api_mode``, and for a spec or model
    argument that looks like a secret (:mod:`metric_ops.secrets`; checked before lm-eval runs).
    """
    from metric_ops.secrets import refuse_secrets
    from resources.backends import ModelSpecError, parse_model_spec

    refuse_secrets({"model": spec, "model_args": dict(model_args or {})}, "lm-eval model", error=LmEvalError,
                   fix=lambda _: "put the key in an environment variable and name it: --api-key-env VAR "
                                 "(lm_eval.api_key_env: VAR in a spec)")

    try:
        kind, target = parse_model_spec(spec)
    except ModelSpecError as exc:
        raise LmEvalError(str(exc)) from None
    extra = dict(model_args or {})
    if kind == "hf":
        return LmEvalModel(spec, "hf", {"pretrained": target, **extra}, lm_eval_class="hf")
    if kind == "vllm":
        return LmEvalModel(spec, "vllm", {"pretrained": target, **extra}, lm_eval_class="vllm")
    if kind == "api":
        from resources.backends.api import parse_api_spec

        try:
            model, base_url = parse_api_spec(spec)
        except ModelSpecError as exc:
            raise LmEvalError(str(exc)) from None
        if api_mode not in ("completions", "chat"):
            raise LmEvalError(f"api mode must be completions or chat, got {api_mode!r}")
        endpoint = f"{base_url}/chat/completions" if api_mode == "chat" else f"{base_url}/completions"
        name = "facetlake-local-chat-completions" if api_mode == "chat" else "facetlake-local-completions"
        args = {"model": model, "base_url": endpoint, **({"api_key_env": api_key_env} if api_key_env else {}), **extra}
        return LmEvalModel(spec, name, args, "external", urlparse(base_url).hostname or base_url, model,
                           lm_eval_class="local-chat-completions" if api_mode == "chat" else "local-completions")
    raise LmEvalError(
        f"lm-eval runs a model itself; {spec!r} is a {kind}: spec (outputs made elsewhere). Use hf:PATH, vllm:NAME or "
        "api:MODEL@BASE_URL, or import an lm-eval output folder with `facetlake import lm-eval PATH`"
    )


def check_outbound(model: LmEvalModel, privacy: Mapping[str, Any] | None = None) -> None:
    """Refuse what the outbound rules forbid, before lm-eval is called (module docstring).

    Raises :class:`resources.privacy.outbound.OfflineModeError` for an external model in offline
    mode, :class:`LmEvalPrivacyError` for an external model while anonymisation is on.
    Local models always pass.
    """
    from resources.privacy.outbound import refuse_if_offline
    from resources.privacy.policy import resolve_policy

    if model.locality != "external":
        return
    refuse_if_offline("lm-eval model", model.spec, model.locality)
    policy = resolve_policy(privacy)
    if policy.active:
        raise LmEvalPrivacyError(
            f"anonymisation is on ({policy.label}{', forced by the administrator' if policy.forced else ''}) but lm-eval's API "
            f"client ({model.lm_eval_class}) sends prompts, and token ids for log-likelihood requests, with its own HTTP code, "
            "so facetlake cannot anonymise them; run this model with facetlake's own api: backend (`facetlake run`), "
            "use a local model (hf:, vllm:), or turn anonymisation off for this run"
        )


# --------------------------------------------------------------------------- ledger hook
_ledger_lock = threading.Lock()
_ledger_writer: Any = None


@contextlib.contextmanager
def outbound_ledger(lake: Any, run_id: str, model: str | None) -> Iterator[Any]:
    """Record the requests of lm-eval's API classes in the ``outbound_ledger`` table for a
    block (one row per request, flushed at the end, also on error). The rows carry the run
    id and model; their fingerprint is empty (lm-eval batches the requests of every task
    of a run together, so a request belongs to no single evaluation)."""
    global _ledger_writer
    from resources.privacy.keys import install_log_redaction
    from resources.privacy.session import LedgerWriter

    writer = LedgerWriter(lake, run_id, None, model)
    install_log_redaction()
    with _ledger_lock:
        previous, _ledger_writer = _ledger_writer, writer
    try:
        yield writer
    finally:
        with _ledger_lock:
            _ledger_writer = previous
        writer.flush()


def _sent_texts(payload: Mapping[str, Any]) -> list[str]:
    """What one lm-eval request sends, as the ledger hashes it: the chat messages (one JSON
    text), or each prompt of a completions batch (a string, or a token-id list as JSON)."""
    def dump(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)

    if "messages" in payload:
        return [dump(payload["messages"])]
    prompt = payload.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return [dump(p) for p in prompt]
    return [dump(prompt)]


def _record_request(base_url: str, api_model: str | None, purpose: str, payload: Mapping[str, Any]) -> None:
    """Offline guard and ledger row for one lm-eval API request (called before it is sent)."""
    from resources.privacy.outbound import OfflineModeError, offline_mode, text_sha256

    host = urlparse(base_url).hostname or base_url
    if offline_mode():
        raise OfflineModeError(
            f"offline mode is on (FACETLAKE_OFFLINE): refusing lm-eval's request to {host} for {purpose}; "
            "unset FACETLAKE_OFFLINE or use a local model"
        )
    texts = _sent_texts(payload)
    with _ledger_lock:
        writer = _ledger_writer
    if writer is not None:
        call_id = writer({"called_at": dt.datetime.now(dt.timezone.utc), "host": host, "model": api_model, "purpose": purpose,
                          "sample_id": None, "text_sha256": text_sha256(texts), "n_chars": sum(len(t) for t in texts),
                          "anonymised": False, "strategy": None, "entity_counts": {}})
        attempts = _CALL_ATTEMPTS.get()
        if attempts is not None:
            attempts.append((writer, call_id))


# the ledger intents of the request being sent in this thread / asyncio task (each retry is one attempt)
_CALL_ATTEMPTS: contextvars.ContextVar[list | None] = contextvars.ContextVar("facetlake_lm_eval_attempts", default=None)


@contextlib.contextmanager
def _ledgered_call() -> Iterator[dict]:
    """Complete the ledger intents of one lm-eval request when it returns: every attempt
    but the last ``failed`` (lm-eval retried it), the last ``completed`` when a response
    came back, ``failed`` when the request raised or lm-eval gave up (it returns None)."""
    attempts: list = []
    outcome = {"ok": False}
    token = _CALL_ATTEMPTS.set(attempts)
    try:
        yield outcome
    finally:
        _CALL_ATTEMPTS.reset(token)
        for i, (writer, call_id) in enumerate(attempts):
            writer.complete(call_id, ok=outcome["ok"] and i == len(attempts) - 1)


@functools.lru_cache(maxsize=1)
def register_api_classes() -> tuple[type, type]:
    """Register facetlake's ledgered subclasses of lm-eval's ``local-completions`` and
    ``local-chat-completions`` (once) and return them."""
    require_lm_eval()
    from lm_eval.api.registry import register_model
    from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI

    class _Outbound:
        """Mixin: offline guard + outbound ledger per request; API key from ``api_key_env``."""

        def __init__(self, *args: Any, api_key_env: str | None = None, **kwargs: Any) -> None:
            self._facetlake_key_env = api_key_env or "OPENAI_API_KEY"
            super().__init__(*args, **kwargs)

        def model_call(self, *args: Any, **kwargs: Any) -> Any:
            with _ledgered_call() as outcome:
                result = super().model_call(*args, **kwargs)
                outcome["ok"] = result is not None
                return result

        async def amodel_call(self, *args: Any, **kwargs: Any) -> Any:
            with _ledgered_call() as outcome:
                result = await super().amodel_call(*args, **kwargs)
                outcome["ok"] = result is not None
                return result

        def _create_payload(self, messages: Any, generate: bool = False, *args: Any, **kwargs: Any) -> dict:
            payload = super()._create_payload(messages, generate, *args, **kwargs)
            _record_request(self.base_url, self.model, "lm_eval:generate_until" if generate else "lm_eval:loglikelihood", payload)
            return payload

        @property
        def api_key(self) -> str:  # lm-eval reads it to build the Authorization header
            from resources.privacy.keys import resolve_key

            key = resolve_key(env=self._facetlake_key_env, provided=self._facetlake_key_env, required=False)
            if key:
                return key
            if (urlparse(self.base_url).hostname or "") in _LOOPBACK:
                return "EMPTY"  # local servers need none
            raise LmEvalError(f"no API key for {urlparse(self.base_url).hostname}: set ${self._facetlake_key_env} "
                              "(or name another variable with --api-key-env)")

    @register_model("facetlake-local-completions")
    class FacetlakeLocalCompletions(_Outbound, LocalCompletionsAPI):
        """lm-eval's ``local-completions`` with facetlake's offline guard and outbound ledger."""

    @register_model("facetlake-local-chat-completions")
    class FacetlakeLocalChatCompletions(_Outbound, LocalChatCompletion):
        """lm-eval's ``local-chat-completions`` with facetlake's offline guard and outbound ledger."""

    return FacetlakeLocalCompletions, FacetlakeLocalChatCompletions


# --------------------------------------------------------------------------- running
@contextlib.contextmanager
def _hub_offline(active: bool) -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1`` for a block when ``active``."""
    if not active:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass
class RunSettings:
    """lm-eval settings of one run (``simple_evaluate``'s arguments of the same names).

    ``limit``: docs per task (a fraction below 1 as lm-eval reads it); ``num_fewshot``:
    None keeps each task's own; ``gen_kwargs``: ``KEY=VALUE,...`` overriding generation
    settings of generate-until tasks; ``include_path``: folders of extra task YAML
    (facetlake's own tasks are always included); ``metadata``: task metadata (lm-eval
    merges the model arguments into it, as its CLI does).
    """

    limit: float | None = None
    num_fewshot: int | None = None
    batch_size: int | str = 1
    device: str | None = None
    gen_kwargs: str | None = None
    apply_chat_template: bool = False
    fewshot_as_multiturn: bool | None = None
    system_instruction: str | None = None
    include_path: Sequence[str] = ()
    bootstrap_iters: int = 100000
    fewshot_seed: int = 1234
    metadata: Mapping[str, Any] = field(default_factory=dict)


def task_manager(include_path: Sequence[str] = (), metadata: Mapping[str, Any] | None = None) -> Any:
    """lm-eval's ``TaskManager`` with facetlake's own tasks (resources/lm_eval/tasks) and ``include_path``."""
    require_lm_eval()
    from lm_eval.tasks import TaskManager

    paths = [str(TASKS_DIR), *[str(Path(p).expanduser().resolve()) for p in include_path]]
    return TaskManager(include_path=paths, metadata=dict(metadata or {}) or None)


def run_tasks(tasks: Sequence[str], model: LmEvalModel, output_path: str | Path, settings: RunSettings | None = None) -> Path:
    """Run ``tasks`` on ``model`` with ``lm_eval.simple_evaluate(log_samples=True)`` and save
    the output as lm-eval's CLI does (``EvaluationTracker``: ``results_<date>.json`` and
    ``samples_<task>_<date>.jsonl`` under ``output_path/<model name>/``).

    Returns the results file. Call :func:`check_outbound` first (and, for API models, run
    inside :func:`outbound_ledger`). Raises :class:`LmEvalError` for an unknown task (with
    lm-eval's suggestions) or when lm-eval wrote no results.
    """
    settings = settings or RunSettings()
    require_lm_eval()
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    if model.locality == "external":
        register_api_classes()
    from resources.privacy.outbound import offline_mode

    manager = task_manager(settings.include_path, {**{k: v for k, v in model.args.items() if k != "api_key_env"}, **settings.metadata})
    unknown = [t for t in tasks if t not in manager.all_subtasks and t not in manager.all_tasks]
    if unknown:
        import difflib

        hints = {t: difflib.get_close_matches(t, manager.all_tasks, n=3) for t in unknown}
        raise LmEvalError("unknown lm-eval task(s): " + "; ".join(
            f"{t!r}" + (f" (did you mean {', '.join(h)}?)" if h else "") for t, h in hints.items())
            + "; list them with `lm_eval ls tasks`, or add a folder of task YAML with --include-path")
    tracker = EvaluationTracker(output_path=str(output_path))
    chat = bool(settings.apply_chat_template) or model.name == "facetlake-local-chat-completions"
    with _hub_offline(offline_mode()):
        results = lm_eval.simple_evaluate(
            model=model.name,
            model_args=dict(model.args),
            tasks=list(tasks),
            num_fewshot=settings.num_fewshot,
            batch_size=settings.batch_size,
            device=settings.device,
            limit=settings.limit,
            log_samples=True,
            evaluation_tracker=tracker,
            task_manager=manager,
            gen_kwargs=settings.gen_kwargs,
            apply_chat_template=chat,
            fewshot_as_multiturn=settings.fewshot_as_multiturn if settings.fewshot_as_multiturn is not None else chat,
            system_instruction=settings.system_instruction,
            bootstrap_iters=settings.bootstrap_iters,
            fewshot_random_seed=settings.fewshot_seed,
        )
    if results is None:
        raise LmEvalError("lm-eval returned no results (not rank 0 of a distributed run?)")
    samples = results.pop("samples")
    # the same calls and order as lm-eval's own CLI (lm_eval/_cli/run.py)
    tracker.save_results_aggregated(results=results, samples=samples)
    for task_name in results["configs"]:
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    folder = Path(output_path) / str(tracker.general_config_tracker.model_name_sanitized)
    results_file = folder / f"results_{tracker.date_id}.json"
    if not results_file.exists():  # lm-eval logs a warning and goes on when saving fails
        raise LmEvalError(f"lm-eval did not write {results_file}; check that {output_path} is writable")
    return results_file
