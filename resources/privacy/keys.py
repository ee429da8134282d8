"""Provider keys: from the environment, a Dagster ``EnvVar``, or per run (bring-your-own-key).

A key is read when a client is built and held only in memory. Nothing here writes it
anywhere; every key this process has seen is registered for redaction, and
:func:`redact` / :class:`RedactingFilter` replace it by ``[REDACTED]`` in any text
(exception messages, log records) before that text can reach a table, a log or the
Dagster event log.

Per-run keys (``facetlake run --api-key-env VAR`` or ``--ask-key``) are put in this
process's memory with :func:`provide_key` under a name; they are never put in run
config, tags or metadata (Dagster stores those in its event log).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from metric_ops.errors import FacetlakeError

_LOCK = threading.Lock()
_SECRETS: set[str] = set()
_PROVIDED: dict[str, str] = {}
REDACTED = "[REDACTED]"


class MissingKeyError(FacetlakeError, RuntimeError):
    """No key was found; the message names where one may come from (never a key)."""


def register_secret(value: str | None) -> None:
    """Remember ``value`` so :func:`redact` hides it (values under 8 characters are ignored)."""
    if value and len(value) >= 8:
        with _LOCK:
            _SECRETS.add(value)


def provide_key(name: str, value: str) -> None:
    """Bring-your-own-key: hold ``value`` in memory under ``name`` for this process."""
    register_secret(value)
    with _LOCK:
        _PROVIDED[name] = value


def forget_keys() -> None:
    """Drop the per-run keys held in memory (redaction list is kept)."""
    with _LOCK:
        _PROVIDED.clear()


def resolve_key(env: str | None = None, value: Any = None, provided: str | None = None, required: bool = True) -> str | None:
    """The key to use, in order: a per-run key provided under ``provided`` (or ``env``),
    an explicit ``value`` (a string or a ``dagster.EnvVar``, resolved now), the
    environment variable ``env``.

    Raises :class:`MissingKeyError` naming the variable when ``required`` and none is found.
    """
    key: str | None = None
    with _LOCK:
        for name in (provided, env):
            if name and name in _PROVIDED:
                key = _PROVIDED[name]
                break
    if key is None and value is not None:
        get_value = getattr(value, "get_value", None)
        key = get_value() if callable(get_value) else str(value)
    if key is None and env:
        key = os.environ.get(env) or None
    if key is None and required:
        where = f"set the environment variable {env}" if env else "pass a key per run"
        raise MissingKeyError(f"no API key found: {where} (or use --api-key-env / --ask-key with facetlake run)")
    register_secret(key)
    return key


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[REDACTED]``."""
    if not text:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_exception(exc: BaseException) -> BaseException:
    """Scrub registered secrets from an exception's args, ``message`` and ``body`` in place
    (also along its ``__cause__``/``__context__`` chain); returns it for ``raise``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(a) if isinstance(a, str) else a for a in current.args)
        for attr in ("message", "body"):
            value = getattr(current, attr, None)
            if isinstance(value, str):
                try:
                    setattr(current, attr, redact(value))
                except AttributeError:
                    pass
            elif value is not None and attr == "body" and redact(repr(value)) != repr(value):
                try:
                    setattr(current, attr, None)
                except AttributeError:
                    pass
        current = current.__cause__ or current.__context__
    return exc


class RedactingFilter(logging.Filter):
    """A logging filter that redacts registered secrets from each record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


def install_log_redaction(*logger_names: str) -> None:
    """Add :class:`RedactingFilter` to the handlers of the root logger and of ``logger_names``
    (default: openai, httpx, httpcore, dagster); idempotent."""
    names = logger_names or ("openai", "httpx", "httpcore", "dagster")
    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in names)]:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
