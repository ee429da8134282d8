"""lm-eval bridge: shared constants, canonical hashing, score names and signatures, and the
small value parsers for lm-eval's records.

Part of :mod:`resources.lm_eval` (the package face exports these names).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metric_ops.errors import FacetlakeError


PREFIX = "lm_eval:"
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
DEFAULT_FILTER = "none"
AGREEMENT_TOLERANCE = 1e-12
# results[task] keys that are not metric values
_RESULT_META = {"name", "alias", "sample_len", " ", ""}
# keys of a logged sample that are not per-sample metric values
_SAMPLE_KEYS = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash", "task_name"}
_RESULTS_NAME = re.compile(r"^results_(?P<date>.+)\.json$")
# perplexity-style metrics measure the model's confidence, not agreement with a gold answer
_EPISTEMIC = {"perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"}


class LmEvalError(FacetlakeError, ValueError):
    """An lm-eval output folder, task or setting cannot be used; the message names the fix."""


def require_lm_eval() -> str:
    """The installed lm-eval version; raises :class:`LmEvalError` naming the extra to install."""
    try:
        import lm_eval
    except ImportError:
        raise LmEvalError("lm-eval is not installed; install the extra: pip install 'facetlake[lmeval]'") from None
    return str(getattr(lm_eval, "__version__", "unknown"))


def canonical(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces, non-JSON values as strings) for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256(text: str) -> str:
    """SHA-256 hex of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# config keys left out of the hash: labels, and the metadata block (see config_hash)
CONFIG_UNHASHED = frozenset({"metadata", "tag", "group", "task_alias", "group_alias"})


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of a task config as lm-eval dumps it, without :data:`CONFIG_UNHASHED`.

    lm-eval merges the model arguments (``pretrained=...``) and the YAML's location
    (``config_source``) into ``metadata``, so hashing it would give each model and each
    checkout its own config; the task version it holds is recorded separately. ``tag``,
    ``group``, ``task_alias`` and ``group_alias`` only label the task (which collections
    list it, how tables show it), and lm-eval versions differ in whether they dump them
    (0.4.11 dumps ``tag``, 0.4.13 does not).
    """
    return sha256(canonical({k: v for k, v in config.items() if k not in CONFIG_UNHASHED}))


def metric_name(metric: str, filter_name: str) -> str:
    """The scores name of lm-eval metric ``metric`` under filter ``filter_name``:
    ``lm_eval:acc`` for the default filter ``none``, else ``lm_eval:exact_match,strict-match``."""
    return f"{PREFIX}{metric}" if filter_name == DEFAULT_FILTER else f"{PREFIX}{metric},{filter_name}"


def score_signature(metric: str, filter_name: str, task: str, task_version: str, lm_eval_version: str,
                    config_sha256: str, aggregation: str, n_shot: int) -> str:
    """The signature of an lm-eval score (sacrebleu style: every setting that changes the
    number), e.g. ``lm_eval:acc|task:arc_easy|task_version:1.0|lm_eval:0.4.13|config_sha256:…|
    filter:none|aggregation:mean|n_shot:0``: the fields of :func:`score_identity` in order."""
    identity = score_identity(metric, filter_name, task, task_version, lm_eval_version, config_sha256, aggregation, n_shot)
    return "|".join([identity["metric"], *(f"{k}:{v}" for k, v in identity["params"].items())])


def score_identity(metric: str, filter_name: str, task: str, task_version: str, lm_eval_version: str,
                   config_sha256: str, aggregation: str, n_shot: int) -> dict[str, Any]:
    """The structured identity of an lm-eval score (the ``scores.params`` column,
    :mod:`metric_ops.identity`): ``{"metric": "lm_eval:acc", "version": None, "params":
    {"task", "task_version", "lm_eval", "config_sha256", "filter", "aggregation",
    "n_shot"}}``, every value text as :func:`score_signature` writes it."""
    return {"metric": metric_name(metric, filter_name), "version": None,
            "params": {"task": str(task), "task_version": str(task_version), "lm_eval": str(lm_eval_version),
                       "config_sha256": str(config_sha256), "filter": str(filter_name), "aggregation": str(aggregation),
                       "n_shot": str(n_shot)}}


def _number(value: Any) -> float | None:
    """A per-sample value as a float (bools and numeric strings too); None when it is not one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("True", "False", "true", "false"):
        return value in ("True", "true")
    return None


def _arguments(record: Mapping[str, Any]) -> list[list[Any]]:
    """A logged sample's request arguments as a list of argument lists, in request order.

    lm-eval's tracker writes ``{"gen_args_0": {"arg_0": ctx, "arg_1": ...}, ...}``; the
    in-memory (and some older) form is ``[[ctx, ...], ...]``.
    """
    args = record.get("arguments")
    if isinstance(args, Mapping):
        def order(key: str) -> int:
            return int(key.rsplit("_", 1)[-1]) if key.rsplit("_", 1)[-1].isdigit() else 0

        return [[a[k] for k in sorted(a, key=order)] if isinstance(a, Mapping) else [a] for _, a in sorted(args.items(), key=lambda kv: order(kv[0]))]
    if isinstance(args, (list, tuple)):
        return [list(a) if isinstance(a, (list, tuple)) else [a] for a in args]
    raise LmEvalError(f"sample {record.get('doc_id')!r} has no request arguments; was it written by lm-eval with log_samples on?")


def _target_list(target: Any) -> list[str]:
    """The target(s) of a logged sample: lm-eval writes ``str(target)``, so a multi-target
    task's list arrives as its Python repr and is read back as a list."""
    if isinstance(target, (list, tuple)):
        return [str(t) for t in target]
    text = "" if target is None else str(target)
    if text.startswith("[") and text.endswith("]"):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [text]
        if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
            return [str(v) for v in value]
    return [text]
