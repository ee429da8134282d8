"""The one secret detector: refuse API keys, tokens and passwords in anything facetlake stores.

Evaluation specs, judge specs, ``--param``/``--judge``/``--model-args`` values, profiles and
catalog rows are stored in Delta tables (kept in their history after a row is replaced),
Dagster run config, tags and metadata. A key must never reach them: it comes from an
environment variable whose *name* the spec holds (``runtime.api_key_env``). This module
finds what looks like a secret in any nested mapping / list / string, by two rules:

- **by name**: a mapping key whose last word is a credential word (``password``,
  ``secret``, ``authorization``, ``bearer``, ``credential(s)``, ``cookie``, ``apikey``;
  ``key`` or ``token`` when bare or qualified by a credential word: ``api_key``, ``API-Key``,
  ``x-api-key``, ``Ocp-Apim-Subscription-Key``, ``hf_token``, ``access_token``,
  ``OPENAI_KEY``) holding a non-empty string. Names are compared case-, ``-``/``_``/space- and
  camelCase-insensitively. A name whose last word is not a credential word is not a secret by
  name: ``api_key_env`` (the reference to a variable), ``max_tokens``, ``tokens_in``,
  ``tokenizer``, ``key_field``. Other ``*_key``/``*_token`` names (``partition_key``,
  ``eos_token``) are refused only when their value looks random (mixed-case letters and
  digits, 20+ characters; a hex digest is not).
- **by shape**, anywhere, under any name, also inside a longer string: ``Bearer <token>`` /
  ``Basic <base64>``, OpenAI / Anthropic keys (``sk-``, ``sk-proj-``, ``sk-ant-``), AWS access
  key ids (``AKIA``/``ASIA`` + 16), GitHub (``ghp_``, ``github_pat_``), Slack (``xox[bpars]-``),
  Google (``AIza`` + 35), Hugging Face (``hf_`` + 30+), Groq (``gsk_``), Stripe
  (``sk_live_``), Replicate (``r8_``), JSON Web Tokens (``eyJ….eyJ….…``), PEM private-key
  blocks, a password in a URL (``https://user:pass@host``) and a URL query parameter named
  like a credential (``?api_key=…``).

Values that are not secrets stay accepted: dataset paths, model names (``gpt-4o-mini``),
base URLs, 64-hex SHA-256 fingerprints, placeholders (``""``, ``none``, ``not-needed``,
``EMPTY``), numbers and booleans. Findings name the path (``runtime.extra_headers.Authorization``)
and the kind of secret, never the value; a mapping key that itself looks like a secret is
shown as ``<secret-looking key>``.

Patterns follow the token formats documented by the providers and the rules of
gitleaks / Yelp detect-secrets (keyword and high-entropy detectors).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

from metric_ops.errors import FacetlakeError

__all__ = ["SecretInputError", "SecretFinding", "find_secrets", "refuse_secrets", "secret_message", "ENV_FIX", "JUDGE_FIX"]

ENV_FIX = ("put the key in an environment variable and name the variable instead "
           "(in a spec: runtime.api_key_env: MY_PROVIDER_KEY; the API client sends it as the Authorization header)")
JUDGE_FIX = ("put the judge's key in $FACETLAKE_JUDGE_API_KEY (or $OPENAI_API_KEY): a judge spec names only the model and "
             "its base URL, e.g. judge: api:gpt-4o-mini@https://api.openai.com/v1")

def secret_fix(path: str) -> str:
    """How to pass a key instead, for a secret found at ``path`` of a spec (or ``--param``)."""
    if path.startswith(("metric_params", "judge")) or ".judge" in path or path.startswith("--"):
        return JUDGE_FIX
    if path.startswith("privacy"):
        return "put the key in an environment variable and name it in the spec: privacy.model.api_key_env: NER_KEY"
    if path.startswith("lm_eval"):
        return "put the key in an environment variable and name it in the spec: lm_eval.api_key_env: MY_PROVIDER_KEY (or --api-key-env)"
    return ("put the key in an environment variable and name it in the spec: runtime.api_key_env: MY_PROVIDER_KEY "
            "(the API backend sends it as the Authorization: Bearer header)")


# --------------------------------------------------------------------------- names
_ALWAYS = {"password", "passwd", "passphrase", "secret", "secrets", "authorization", "bearer", "credential", "credentials",
           "cookie", "pass", "apikey", "apitoken", "accesstoken", "authtoken", "privatekey", "secretkey", "accesskey", "pwd"}
_QUALIFIED = {"key", "token"}  # credential words only when bare or qualified by one of _CREDENTIAL_QUALIFIERS
_CREDENTIAL_QUALIFIERS = {
    "api", "access", "secret", "private", "subscription", "auth", "client", "master", "license", "licence", "signing",
    "encryption", "session", "refresh", "bearer", "oauth", "personal", "service", "account", "admin", "app", "bot", "user",
    "id", "csrf", "xsrf", "webhook", "deploy", "provider", "hmac", "jwt", "sas", "storage", "write", "read", "root", "sk",
    "openai", "anthropic", "groq", "mistral", "cohere", "together", "hf", "huggingface", "azure", "google", "gemini",
    "aws", "deepseek", "xai", "fireworks", "replicate", "voyage", "perplexity", "openrouter", "github", "gh", "gitlab",
    "slack", "stripe", "wandb", "langsmith", "langfuse", "pinecone", "judge", "model", "llm",
}
# a last word that makes the name a reference to a secret, not the secret (api_key_env, key_file)
_REFERENCE = {"env", "envvar", "var", "variable", "file", "path", "name", "names", "id", "ids", "type", "kind", "url", "uri",
              "header", "location", "source", "mode", "enabled", "required", "count", "limit", "length", "len", "size",
              "field", "column", "col", "prefix", "suffix"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEP = re.compile(r"[^A-Za-z0-9]+")
_PLACEHOLDER = re.compile(r"^(|none|null|nil|empty|unset|not[-_ ]?needed|not[-_ ]?set|n/?a|-+|\*+|x+|redacted|\[redacted\]|<redacted>)$",
                          re.IGNORECASE)


def _words(name: str) -> list[str]:
    return [w.lower() for w in _SEP.split(_CAMEL.sub(" ", name)) if w]


def _name_strength(name: str) -> str | None:
    """``"strong"``: any non-placeholder string under it is a secret; ``"weak"``: only a
    random-looking one; ``"reference"``: it names where a secret is (``api_key_env``);
    None: the name says nothing."""
    words = _words(name)
    if not words:
        return None
    last, joined = words[-1], "".join(words)
    if last in _REFERENCE and len(words) > 1:
        return "reference"
    if last in _ALWAYS or joined in _ALWAYS:
        return "strong"
    if last in _QUALIFIED:
        qualifiers = set(words[:-1])
        if not qualifiers or qualifiers & _CREDENTIAL_QUALIFIERS or words[0] == "x":  # x-api-key, x-auth-token, x-foo-key
            return "strong"
        return "weak"
    return None


# --------------------------------------------------------------------------- shapes
_SHAPES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a PEM private key"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"), "a bearer token"),
    (re.compile(r"\bBasic\s+[A-Za-z0-9+/]{12,}={0,2}(?![A-Za-z0-9+/=])"), "HTTP basic credentials"),
    (re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]*[A-Za-z0-9]{12,}[A-Za-z0-9_-]*"), "an sk-… provider API key"),
    (re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), "a Stripe key"),
    (re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Z0-9])"), "an AWS access key id"),
    (re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"), "a GitHub token"),
    (re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}"), "a GitLab token"),
    (re.compile(r"(?<![A-Za-z0-9])xox[baprse]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"), "a Google API key"),
    (re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(r"(?<![A-Za-z0-9])gsk_[A-Za-z0-9]{30,}"), "a Groq key"),
    (re.compile(r"(?<![A-Za-z0-9])r8_[A-Za-z0-9]{30,}"), "a Replicate token"),
    (re.compile(r"(?<![A-Za-z0-9])xai-[A-Za-z0-9]{30,}"), "an xAI key"),
    (re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "a JSON Web Token"),
]
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{12,}")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(value: str) -> bool:
    """Mixed-case letters and digits, 20+ characters, no spaces, 3.5+ bits per character
    (an API key); a hex digest, a path, a URL or a word list is not."""
    text = value.strip()
    if len(text) < 20 or any(c.isspace() for c in text) or _HEX.match(text) or "/" in text or "://" in text:
        return False
    classes = sum(bool(re.search(p, text)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes == 3 and _entropy(text) >= 3.5


def _sk_is_random(match: str) -> bool:
    """An ``sk-…`` match holds a random run (letters and digits, 12+), not ``sk-learn-benchmarks``."""
    return any(re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run) for run in _RANDOM_RUN.findall(match))


def _shape(text: str) -> str | None:
    """What kind of secret ``text`` holds (anywhere in it), or None."""
    for pattern, label in _SHAPES:
        for match in pattern.finditer(text):
            if label == "an sk-… provider API key" and not _sk_is_random(match.group(0)):
                continue
            if label in ("a bearer token", "HTTP basic credentials") and not re.search(r"[0-9]", match.group(0)):
                continue  # "the bearer of long-standing..." is prose, not a token
            return label
    for url in _URL.findall(text):
        try:
            parts = urlsplit(url)
            password = parts.password
        except ValueError:
            continue
        if password:
            return "a password in a URL"
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if value and (_name_strength(name) == "strong" or (_name_strength(name) == "weak" and _looks_random(value))):
                return "a URL query parameter named like a credential"
    return None


# --------------------------------------------------------------------------- walking
@dataclass(frozen=True)
class SecretFinding:
    """One place that looks like a secret: ``path`` (``runtime.extra_headers.Authorization``,
    ``annotators[1].options.token``; ``""`` for a bare string) and ``reason`` (the kind of
    secret). Never holds the value."""

    path: str
    reason: str


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def find_secrets(value: Any, path: str = "", limit: int = 20) -> list[SecretFinding]:
    """Every place in ``value`` (nested mappings, lists, tuples, strings; anything else is
    ignored) that looks like a secret, by name and by shape (module docstring), in walk
    order, at most ``limit``. ``path`` prefixes the reported paths. Never raises."""
    found: list[SecretFinding] = []
    stack: list[tuple[str, Any, str | None]] = [(path, value, None)]
    while stack and len(found) < limit:
        where, item, strength = stack.pop()
        if isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                key_text = str(key)
                shape = _shape(key_text)
                shown = "<secret-looking key>" if shape else key_text
                if shape:
                    found.append(SecretFinding(_join(where, shown), f"its name is {shape}"))
                own = _name_strength(key_text)
                # under a credential-like mapping (auth: {...}) a random-looking value is refused too
                inherited = "weak" if strength in ("strong", "weak") else None
                children.append((_join(where, shown), child, None if own == "reference" else (own or inherited)))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", child, strength) for i, child in enumerate(item)]))
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            # YAML reads `password: 123456` as a number: under a credential name it is still the secret
            if strength == "strong":
                found.append(SecretFinding(where, "it is named like a credential"))
        elif isinstance(item, (str, bytes)):
            text = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
            shape = _shape(text)
            if shape:
                found.append(SecretFinding(where, f"it holds {shape}"))
            elif strength == "strong" and not _PLACEHOLDER.match(text.strip()):
                found.append(SecretFinding(where, "it is named like a credential"))
            elif strength == "weak" and _looks_random(text):
                found.append(SecretFinding(where, "a random-looking value under a key-like name"))
    return found


class SecretInputError(FacetlakeError, ValueError):
    """Something facetlake would store looks like a secret; the message names where and how
    to pass the key instead (never the value)."""


def secret_message(findings: list[SecretFinding], where: str, fix: str | Callable[[str], str] = ENV_FIX) -> str:
    """One line: ``WHERE: PATH looks like a secret (REASON); ... FIX`` (further paths named);
    ``fix`` may be a function of the first finding's path (a spec's judge vs its runtime)."""
    first = findings[0]
    if callable(fix):
        fix = fix(first.path)
    place = f"{where}: {first.path}" if first.path and where else (first.path or where or "value")
    more = [f.path or "value" for f in findings[1:]]
    also = f" (also {', '.join(more[:5])}{', ...' if len(more) > 5 else ''})" if more else ""
    return (f"{place} looks like a secret ({first.reason}){also}; facetlake never stores keys, so nothing was saved: "
            f"remove it and {fix}")


def refuse_secrets(value: Any, where: str, fix: str | Callable[[str], str] = ENV_FIX, error: type[Exception] = SecretInputError,
                   path: str = "") -> None:
    """Raise ``error`` (default :class:`SecretInputError`) with :func:`secret_message` when
    :func:`find_secrets` finds anything in ``value``; ``where`` names the input (a file, a
    flag), ``fix`` says how to pass the key instead. Returns None when ``value`` is clean."""
    findings = find_secrets(value, path)
    if findings:
        raise error(secret_message(findings, where, fix))
