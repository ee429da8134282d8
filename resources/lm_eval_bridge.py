"""lm-evaluation-harness output in the lake: read, map and check (issue 18).

facetlake never re-implements lm-eval: tasks, models, filters and metrics are lm-eval's
own (resources/lm_eval_models.py runs ``lm_eval.simple_evaluate``). This module reads
what lm-eval writes with ``log_samples`` on (``results_<date>.json`` and
``samples_<task>_<date>.jsonl``, the format of lm-eval's ``EvaluationTracker``, written by
lm-eval 0.4.3 and later) and maps it onto the lake:

==========================  ==================================================================
lm-eval                     facetlake
==========================  ==================================================================
task docs                   ``samples`` (dataset kind ``lm_eval``): ``sample_id`` = doc id,
                            ``input`` = the rendered prompt (the first request's context,
                            few-shot examples and chat template included), ``references`` =
                            the target (the gold choice's text for multiple choice; every
                            target of a multi-target task), ``metadata.lm_eval`` = task,
                            doc, output type, choices, gold index, raw target and lm-eval's
                            doc/prompt/target hashes
model responses             ``generations`` (backend ``lm_eval:<results file>``): ``output`` =
                            the first raw generation (generate-until), the choice with the
                            highest log-likelihood (multiple choice, the one ``acc`` grades)
                            or null (loglikelihood / rolling tasks: nothing was generated);
                            and ``lm_eval_responses``: one row per doc x filter with the raw
                            ``resps``, ``filtered_resps``, the filter name, the
                            log-likelihoods and is-greedy flags, and the per-sample metrics
per-sample metric values    ``scores``: ``lm_eval:<metric>`` (filter ``none``) or
                            ``lm_eval:<metric>,<filter>``; direction from the task's
                            ``higher_is_better``; signature = task, task version, lm-eval
                            version, SHA-256 of the task config, filter, aggregation, n-shot
aggregate and stderr        ``lm_eval_summary`` (assets/lm_eval.py), next to facetlake's own
                            mean, standard error and interval for the same numbers
==========================  ==================================================================

The configuration fingerprint of an lm-eval evaluation covers the task config as lm-eval
dumps it (``results["configs"][task]`` without its ``metadata`` block, into which lm-eval
merges the model arguments; the task version is kept separately), the few-shot settings
(n-shot, and the few-shot seed, chat template and system instruction where they apply)
and the content hash of the samples (every doc, rendered prompt and target evaluated).
So the same task, settings and docs give the same fingerprint whichever model ran them and
whether facetlake ran lm-eval or imported a folder lm-eval wrote (see :func:`adapter_block`).
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from metric_ops.base import Sample
from resources.backends import GenerationRequest, GenerationResult, ModelBackend, ModelSpecError
from resources.datasets import Dataset, DatasetError

PREFIX = "lm_eval:"
TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"
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


class LmEvalError(ValueError):
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
    filter:none|aggregation:mean|n_shot:0``."""
    return (f"{metric_name(metric, filter_name)}|task:{task}|task_version:{task_version}|lm_eval:{lm_eval_version}"
            f"|config_sha256:{config_sha256}|filter:{filter_name}|aggregation:{aggregation}|n_shot:{n_shot}")


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


# --------------------------------------------------------------------------- reading a run
@dataclass
class TaskRun:
    """One task of one lm-eval results file, with its logged samples.

    ``results`` is the whole ``results_<date>.json``; ``samples_file`` the matching
    ``samples_<task>_<date>.jsonl``. Properties expose the parts facetlake maps.
    """

    task: str
    results_file: Path
    samples_file: Path
    results: Mapping[str, Any]

    # ---------------------------------------------------------------- task-level facts
    @cached_property
    def config(self) -> dict[str, Any]:
        """The task config as lm-eval dumped it."""
        return dict((self.results.get("configs") or {}).get(self.task) or {})

    @cached_property
    def config_sha256(self) -> str:
        """:func:`config_hash` of :attr:`config`."""
        return config_hash(self.config)

    @property
    def output_type(self) -> str:
        """``generate_until``, ``multiple_choice``, ``loglikelihood`` or ``loglikelihood_rolling``."""
        return str(self.config.get("output_type") or "generate_until")

    @property
    def task_version(self) -> str:
        """The task's version (``metadata.version`` of its YAML) as a string."""
        version = (self.results.get("versions") or {}).get(self.task)
        if version is None:
            version = (self.config.get("metadata") or {}).get("version")
        return "unknown" if version is None else str(version)

    @property
    def lm_eval_version(self) -> str:
        """The lm-eval version that wrote the file (``unknown`` when it did not record it)."""
        return str(self.results.get("lm_eval_version") or "unknown")

    @cached_property
    def num_fewshot(self) -> int:
        """The n-shot lm-eval used for the task."""
        value = (self.results.get("n-shot") or {}).get(self.task, self.config.get("num_fewshot", 0))
        try:
            return int(value or 0)
        except (TypeError, ValueError):
            return 0

    @property
    def aggregates(self) -> dict[str, Any]:
        """lm-eval's ``results[task]`` block (``"acc,none": 0.25, "acc_stderr,none": 0.1, ...``)."""
        return dict((self.results.get("results") or {}).get(self.task) or {})

    @property
    def run_config(self) -> dict[str, Any]:
        """lm-eval's ``config`` block (model, model_args, batch size, limit, seeds, ...)."""
        return dict(self.results.get("config") or {})

    def higher_is_better(self, metric: str) -> bool:
        """Whether a higher value of ``metric`` is better, from the task's ``higher_is_better``
        (else lm-eval's metric registry); raises :class:`LmEvalError` when neither says."""
        value = ((self.results.get("higher_is_better") or {}).get(self.task) or {}).get(metric)
        if value is None:
            for entry in self.config.get("metric_list") or []:
                if isinstance(entry, Mapping) and entry.get("metric") == metric and entry.get("higher_is_better") is not None:
                    value = entry["higher_is_better"]
        if value is None:
            try:
                from lm_eval.api.registry import is_higher_better

                value = is_higher_better(metric)
            except Exception:  # noqa: BLE001 - lm-eval absent or the metric unknown to it
                value = None
        if value is None:
            raise LmEvalError(
                f"task {self.task!r}: lm-eval did not record whether higher is better for metric {metric!r} "
                f"(no higher_is_better in {self.results_file.name} or the task's metric_list); add it to the task's metric_list"
            )
        return bool(value)

    def aggregation(self, metric: str) -> str:
        """The name of lm-eval's aggregation of ``metric`` (``mean``, ``bleu``, ``perplexity``, ...):
        the task's metric_list entry, else lm-eval's registry default, else ``mean`` (as lm-eval does)."""
        for entry in self.config.get("metric_list") or []:
            if isinstance(entry, Mapping) and entry.get("metric") == metric and isinstance(entry.get("aggregation"), str):
                name = entry["aggregation"]
                return name if "\n" not in name else "custom"
        try:
            from lm_eval.api.registry import AGGREGATION_REGISTRY, get_metric_aggregation

            fn = get_metric_aggregation(metric)
            for name, candidate in AGGREGATION_REGISTRY.items():
                if candidate is fn:
                    return str(name)
        except Exception:  # noqa: BLE001 - lm-eval absent or the metric unknown to it
            pass
        return "mean"

    def fewshot_settings(self) -> dict[str, Any]:
        """Few-shot settings that can change what the model saw (for the fingerprint).

        ``num_fewshot`` always; the few-shot seed only with examples; the chat template's
        and system instruction's SHA-256 and ``fewshot_as_multiturn`` only when a chat
        template was applied (without one they change nothing).
        """
        settings: dict[str, Any] = {"num_fewshot": self.num_fewshot}
        if self.num_fewshot > 0:
            settings["fewshot_seed"] = self.run_config.get("fewshot_seed")
        chat_sha = self.results.get("chat_template_sha") or (sha256(self.results["chat_template"]) if self.results.get("chat_template") else None)
        if chat_sha:
            settings["chat_template_sha256"] = chat_sha
            settings["fewshot_as_multiturn"] = bool(self.results.get("fewshot_as_multiturn"))
        if self.results.get("system_instruction_sha") or self.results.get("system_instruction"):
            settings["system_instruction_sha256"] = self.results.get("system_instruction_sha") or sha256(str(self.results["system_instruction"]))
        return settings

    # ---------------------------------------------------------------- per-sample records
    @cached_property
    def records(self) -> list[dict[str, Any]]:
        """Every line of the samples file (one per doc x filter), in file order."""
        rows = []
        with self.samples_file.open(encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LmEvalError(f"{self.samples_file}:{lineno}: not valid JSON ({exc.msg}); is the file complete?") from None
                if not isinstance(row, Mapping) or "doc_id" not in row:
                    raise LmEvalError(f"{self.samples_file}:{lineno}: not an lm-eval sample (no doc_id)")
                rows.append(row)
        if not rows:
            raise LmEvalError(f"{self.samples_file} holds no samples; run lm-eval with --log_samples")
        return rows

    @cached_property
    def filters(self) -> list[str]:
        """Filter names in the order lm-eval logged them."""
        return list(dict.fromkeys(str(r.get("filter", DEFAULT_FILTER)) for r in self.records))

    @cached_property
    def docs(self) -> list[dict[str, Any]]:
        """One record per doc id (its first filter's), in logged order."""
        seen: dict[str, dict[str, Any]] = {}
        for row in self.records:
            seen.setdefault(str(row["doc_id"]), row)
        return list(seen.values())

    @cached_property
    def doc_index(self) -> dict[str, dict[str, Any]]:
        """:attr:`docs` by doc id (as a string)."""
        return {str(d["doc_id"]): d for d in self.docs}

    def metric_keys(self, record: Mapping[str, Any]) -> list[str]:
        """The per-sample metric names in ``record`` (its ``metrics`` list when lm-eval wrote one)."""
        listed = record.get("metrics")
        if isinstance(listed, list) and listed:
            return [str(m) for m in listed]
        known = set(((self.results.get("higher_is_better") or {}).get(self.task) or {}))
        known |= {str(e.get("metric")) for e in self.config.get("metric_list") or [] if isinstance(e, Mapping)}
        return [k for k in record if k not in _SAMPLE_KEYS and k in known]

    def choices(self, record: Mapping[str, Any]) -> list[str]:
        """A multiple-choice doc's choices: each request's continuation without the target delimiter."""
        delimiter = str(self.config.get("target_delimiter", " "))
        out = []
        for args in _arguments(record):
            text = str(args[1]) if len(args) > 1 else ""
            out.append(text[len(delimiter):] if delimiter and text.startswith(delimiter) else text)
        return out

    def sample(self, record: Mapping[str, Any]) -> Sample:
        """The :class:`Sample` of one logged doc (see the module docstring)."""
        args = _arguments(record)
        prompt = args[0][0] if args and args[0] else ""
        if not isinstance(prompt, str):
            prompt = canonical(prompt)
        meta: dict[str, Any] = {
            "task": self.task, "doc_id": record["doc_id"], "output_type": self.output_type, "doc": record.get("doc"),
            "target": record.get("target"), "doc_hash": record.get("doc_hash"), "prompt_hash": record.get("prompt_hash"),
            "target_hash": record.get("target_hash"),
        }
        targets = _target_list(record.get("target"))
        if self.output_type == "multiple_choice":
            choices = self.choices(record)
            meta["choices"] = choices
            gold = _gold_index(targets, choices)
            meta["gold"] = gold
            references = [choices[i] for i in gold] if gold else targets
        elif self.output_type == "loglikelihood":
            meta["continuation"] = str(args[0][1]) if args and len(args[0]) > 1 else ""
            references = targets
        elif self.output_type == "loglikelihood_rolling":
            references = []
        else:
            references = targets
        return Sample(sample_id=str(record["doc_id"]), input=str(prompt), references=tuple(references),
                      metadata={"lm_eval": meta})

    def output(self, record: Mapping[str, Any]) -> str | None:
        """The ``generations.output`` of one doc (see the module docstring)."""
        resps = record.get("resps") or []
        if self.output_type == "generate_until":
            first = resps[0] if resps else None
            first = first[0] if isinstance(first, list) and first else first
            return None if first is None else str(first)
        if self.output_type == "multiple_choice":
            lls = _loglikelihoods(resps)
            choices = self.choices(record)
            if lls and len(lls) == len(choices) and all(v is not None for v in lls):
                return choices[max(range(len(lls)), key=lambda i: lls[i])]
        return None

    def response_rows(self) -> list[dict[str, Any]]:
        """``lm_eval_responses`` rows (without model / fingerprint / dataset / run id / time):
        one per doc x filter, in logged order."""
        rows = []
        directions = {}
        aggregations = {}
        for record in self.records:
            for m in self.metric_keys(record):
                if m not in directions:
                    directions[m] = "maximize" if self.higher_is_better(m) else "minimize"
                    aggregations[m] = self.aggregation(m)
        for record in self.records:
            resps = record.get("resps") or []
            lls = _loglikelihoods(resps) if self.output_type != "generate_until" else None
            greedy = _greedy(resps) if self.output_type != "generate_until" else None
            metrics = {m: record.get(m) for m in self.metric_keys(record)}
            rows.append({
                "sample_id": str(record["doc_id"]),
                "task": self.task,
                "filter": str(record.get("filter", DEFAULT_FILTER)),
                "output_type": self.output_type,
                "arguments": canonical(_arguments(record)),
                "resps": canonical(resps),
                "filtered_resps": canonical(record.get("filtered_resps")),
                "loglikelihoods": lls,
                "is_greedy": greedy,
                "target": None if record.get("target") is None else str(record.get("target")),
                "metrics": canonical(metrics),
                "doc_hash": record.get("doc_hash"),
                "prompt_hash": record.get("prompt_hash"),
                "target_hash": record.get("target_hash"),
                "task_version": self.task_version,
                "lm_eval_version": self.lm_eval_version,
                "config_sha256": self.config_sha256,
                "n_shot": self.num_fewshot,
                "directions": canonical(directions),
                "aggregations": canonical(aggregations),
            })
        return rows

    def samples(self) -> list[Sample]:
        """The task's samples, one per doc, in logged order."""
        return [self.sample(r) for r in self.docs]


def _gold_index(targets: list[str], choices: list[str]) -> list[int]:
    """Index(es) of the gold choice(s): lm-eval logs a multiple-choice target as its index
    (``"2"``, or ``"[0, 2]"``) or, for some tasks, as the choice text."""
    out = []
    for t in targets:
        if t.lstrip("-").isdigit() and 0 <= int(t) < len(choices):
            out.append(int(t))
        elif t in choices:
            out.append(choices.index(t))
        else:
            return []
    return out


def _pairs(resps: Sequence[Any]) -> list[Any]:
    """The first repeat's response of each request (``resps`` is requests x repeats)."""
    return [r[0] if isinstance(r, list) and r and isinstance(r[0], (list, tuple)) else r for r in resps]


def _loglikelihoods(resps: Sequence[Any]) -> list[float | None]:
    """Each request's log-likelihood (natural log) from ``[[ [ll, is_greedy] ], ...]``
    (lm-eval's tracker writes them as strings)."""
    out = []
    for pair in _pairs(resps):
        value = pair[0] if isinstance(pair, (list, tuple)) and pair else pair
        out.append(_number(value))
    return out


def _greedy(resps: Sequence[Any]) -> list[bool | None]:
    """Each request's is-greedy flag (None for rolling log-likelihoods, which have none)."""
    return [_flag(pair[1]) if isinstance(pair, (list, tuple)) and len(pair) > 1 else None for pair in _pairs(resps)]


def _results_files(path: Path) -> list[Path]:
    if path.is_file():
        if not _RESULTS_NAME.match(path.name):
            raise LmEvalError(f"{path} is not an lm-eval results file (results_<date>.json)")
        return [path]
    if not path.is_dir():
        raise LmEvalError(f"{path} does not exist; give an lm-eval --output_path folder or one of its results_*.json files")
    files = sorted(p for p in path.rglob("results_*.json") if _RESULTS_NAME.match(p.name))
    if not files:
        raise LmEvalError(f"no results_*.json under {path}; is it an lm-eval --output_path folder?")
    return files


def load_results(file: Path) -> dict[str, Any]:
    """A results file's JSON; raises :class:`LmEvalError` when it is not lm-eval's."""
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LmEvalError(f"{file}: cannot read lm-eval results ({exc})") from None
    if not isinstance(data, Mapping) or "results" not in data or "configs" not in data:
        raise LmEvalError(f"{file}: not an lm-eval results file (no 'results' and 'configs'); lm-eval 0.4.3 or later writes them")
    return dict(data)


def find_task_runs(path: str | Path, tasks: Iterable[str] | None = None) -> list[TaskRun]:
    """Every task with logged samples under ``path`` (an ``--output_path`` folder, a model
    folder inside it, or one ``results_<date>.json``).

    A task is taken from each model folder's newest results file that holds it; its
    samples are ``samples_<task>_<date>.jsonl`` with the same date. Raises
    :class:`LmEvalError` when nothing (or a requested task) is found, or a task's samples
    file is missing (lm-eval was run without ``--log_samples``).
    """
    path = Path(path).expanduser().resolve()
    wanted = list(tasks) if tasks else None
    found: dict[tuple[Path, str], TaskRun] = {}
    for file in sorted(_results_files(path), key=lambda p: _RESULTS_NAME.match(p.name).group("date"), reverse=True):  # type: ignore[union-attr]
        date = _RESULTS_NAME.match(file.name).group("date")  # type: ignore[union-attr]
        results = load_results(file)
        for task in results.get("configs") or {}:
            if wanted is not None and task not in wanted:
                continue
            key = (file.parent, task)
            if key in found:
                continue  # a newer results file already gave this task for this model folder
            samples = file.parent / f"samples_{task}_{date}.jsonl"
            if not samples.exists():
                raise LmEvalError(
                    f"{file.name} has task {task!r} but {samples.name} is missing next to it; "
                    "run lm-eval with --log_samples (facetlake needs the per-sample results)"
                )
            found[key] = TaskRun(task=task, results_file=file, samples_file=samples, results=results)
    if wanted is not None:
        missing = sorted(set(wanted) - {t for _, t in found})
        if missing:
            have = sorted({t for _, t in found}) or ["none"]
            raise LmEvalError(f"task(s) {missing} not found under {path}; tasks there: {', '.join(have)}")
    if not found:
        raise LmEvalError(f"no task results under {path}")
    return sorted(found.values(), key=lambda r: (r.task, str(r.results_file)))


def task_run(results_file: str | Path, task: str) -> TaskRun:
    """The :class:`TaskRun` of ``task`` in one results file."""
    runs = find_task_runs(Path(results_file), [task])
    return runs[0]


# --------------------------------------------------------------------------- fingerprint
ADAPTER_KEYS = frozenset({"task", "task_version", "task_config_sha256", "output_type", "fewshot"})


def adapter_block(run: TaskRun) -> dict[str, Any]:
    """The evaluation's ``adapter`` mapping for an lm-eval task (it enters the fingerprint):
    task name and version, SHA-256 of the dumped config (:func:`config_hash`), output type
    and :meth:`TaskRun.fewshot_settings`. Not the lm-eval version (that is in each score's
    signature), so an upgrade that changes no config keeps recurring evaluations comparable."""
    return {
        "kind": "lm_eval",
        "version": "1",
        "template": "{input}",
        "task": run.task,
        "task_version": run.task_version,
        "task_config_sha256": run.config_sha256,
        "output_type": run.output_type,
        "fewshot": run.fewshot_settings(),
    }


def run_record(run: TaskRun, model_spec: str | None = None) -> dict[str, Any]:
    """What the evaluation spec's ``lm_eval.runs[<model>]`` keeps about one model's run:
    the results file, lm-eval's aggregates for the task (the numbers ``lm_eval_summary``
    checks facetlake's against), sample counts, model and settings (never a key)."""
    config = run.run_config
    return {
        "model_spec": model_spec,
        "results_file": str(run.results_file),
        "samples_file": str(run.samples_file),
        "lm_eval_version": run.lm_eval_version,
        "model_source": run.results.get("model_source") or config.get("model"),
        "model_name": run.results.get("model_name"),
        "model_args": _redact_args(config.get("model_args")),
        "model_revision": config.get("model_revision"),
        "model_sha": config.get("model_sha"),
        "limit": config.get("limit"),
        "bootstrap_iters": config.get("bootstrap_iters"),
        "aggregates": run.aggregates,
        "n_samples": (run.results.get("n-samples") or {}).get(run.task),
        "task_hash": (run.results.get("task_hashes") or {}).get(run.task),
        "date": run.results.get("date"),
    }


def _redact_args(args: Any) -> Any:
    """Model arguments without anything that looks like a secret."""
    secret = re.compile(r"(key|token|secret|password)", re.I)
    if isinstance(args, Mapping):
        return {k: ("<redacted>" if secret.search(str(k)) else v) for k, v in args.items()}
    if isinstance(args, str):
        return ",".join(("{}=<redacted>".format(p.split("=", 1)[0]) if "=" in p and secret.search(p.split("=", 1)[0]) else p)
                        for p in args.split(","))
    return args


# --------------------------------------------------------------------------- dataset kind
@dataclass
class LmEvalDataset(Dataset):
    """Docs of one lm-eval task as logged in an lm-eval output (``samples_<task>_*.jsonl``).

    Config: ``{kind: lm_eval, path: <results_<date>.json or its folder>, task: NAME}``.
    One sample per doc id (see the module docstring for the fields).
    """

    task: str | None = None

    kind: ClassVar[str] = "lm_eval"
    version: ClassVar[str] = "1"

    def _run(self) -> TaskRun:
        cached = self.__dict__.get("_task_run")
        if cached is not None:
            return cached
        if not self.path:
            raise DatasetError(
                "an lm_eval dataset needs path: (an lm-eval results file) and task:; "
                "`facetlake run SPEC` runs lm-eval first, `facetlake import lm-eval PATH` reads an existing output"
            )
        if not self.task:
            raise DatasetError("an lm_eval dataset needs task: (the lm-eval task name)")
        try:
            run = task_run(self.path, self.task)
        except LmEvalError as exc:
            raise DatasetError(str(exc)) from None
        self.__dict__["_task_run"] = run
        return run

    def resolved_path(self) -> Path:
        return self._run().samples_file

    def rows(self) -> list[Any]:
        return self._run().docs

    def load(self) -> list[Sample]:
        run = self._run()
        docs = run.docs[: self.limit] if self.limit is not None else run.docs
        return [run.sample(d) for d in docs]

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        return self._run().sample(row)

    @property
    def display_name(self) -> str:
        return self.name or str(self.task or "lm_eval")

    def config(self) -> dict[str, Any]:
        return {**super().config(), "task": self.task}


# --------------------------------------------------------------------------- adapter kind
def register_adapter() -> type:
    """Register (once) and return the ``lm_eval`` adapter kind.

    The adapter is :class:`resources.adapters.Adapter` with nothing to do: lm-eval rendered
    the prompt (it is the sample's ``input``). Its mapping (:func:`adapter_block`) records
    the task, its config hash and the few-shot settings, so they enter the fingerprint.
    Defined lazily because resources.backends imports this module while
    resources.adapters (which imports resources.backends) may still be initialising; every
    spec with an ``lm_eval`` section registers it when parsed (:func:`validate_section`).
    """
    from resources.adapters import ADAPTERS, Adapter

    if "lm_eval" not in ADAPTERS:
        class LmEvalAdapter(Adapter):
            """lm-eval rendered the prompt; the request is the sample's input."""

            kind = "lm_eval"
            allowed = ADAPTER_KEYS

            def request(self, sample: Sample) -> GenerationRequest:
                return GenerationRequest(sample=sample, prompt=sample.input)

    return ADAPTERS["lm_eval"]


# --------------------------------------------------------------------------- backend kind
class LmEvalOutputBackend(ModelBackend):
    """Responses lm-eval already produced: ``lm_eval:<results_<date>.json>``.

    ``generate`` returns each doc's output (see the module docstring); the raw responses,
    filters, log-likelihoods and per-sample metrics go to ``lm_eval_responses`` through
    :meth:`response_rows` (the generations asset writes them in the same run).
    """

    kind = "lm_eval"
    locality = "local"
    measures_throughput = False  # responses read from lm-eval's files, not generated here

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec, runtime)
        target = spec.split(":", 1)[1]
        if not target:
            raise ModelSpecError(f"{spec!r}: name the lm-eval results file, e.g. lm_eval:out/model/results_2026-01-01T00-00-00.json")
        self.results_file = Path(target).expanduser()
        self._runs: dict[str, TaskRun] = {}

    def run_for(self, task: str) -> TaskRun:
        """The :class:`TaskRun` of ``task`` in this backend's results file (cached)."""
        if task not in self._runs:
            try:
                self._runs[task] = task_run(self.results_file, task)
            except LmEvalError as exc:
                from resources.backends import BackendError

                raise BackendError(str(exc)) from None
        return self._runs[task]

    def identity(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.results_file.read_bytes()).hexdigest() if self.results_file.exists() else None
        results = load_results(self.results_file) if self.results_file.exists() else {}
        config = dict(results.get("config") or {})
        return {"backend": "lm_eval", "results_file": str(self.results_file), "results_sha256": digest,
                "lm_eval_version": results.get("lm_eval_version"), "model_source": results.get("model_source") or config.get("model"),
                "model_name": results.get("model_name"), "model_args": _redact_args(config.get("model_args")),
                "model_revision": config.get("model_revision"), "model_sha": config.get("model_sha")}

    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        for request in requests:
            sid = request.sample.sample_id
            task = (request.sample.metadata.get("lm_eval") or {}).get("task")
            if not task:
                yield GenerationResult(sid, None, "error", f"sample {sid} carries no lm_eval task; it is not from an lm-eval dataset")
                continue
            run = self.run_for(task)
            record = run.doc_index.get(sid)
            if record is None:
                yield GenerationResult(sid, None, "error", f"doc {sid} is not in {run.samples_file.name}")
                continue
            output = run.output(record)
            yield GenerationResult(sid, output, "ok", tokens_out=len(output.split()) if output else None)

    def response_rows(self, samples: Sequence[Sample]) -> list[dict[str, Any]]:
        """``lm_eval_responses`` rows for ``samples`` (every filter of each doc)."""
        wanted = {s.sample_id for s in samples}
        tasks = sorted({(s.metadata.get("lm_eval") or {}).get("task") for s in samples} - {None})
        rows = []
        for task in tasks:
            rows.extend(r for r in self.run_for(task).response_rows() if r["sample_id"] in wanted)
        return rows


def write_responses(lake: Any, backend: ModelBackend, model: str, fingerprint: str, dataset: str, samples: Sequence[Sample],
                    run_id: str) -> int | None:
    """Replace the ``lm_eval_responses`` partition (model x fingerprint) with ``backend``'s
    rows for ``samples``; called by the generations asset for ``lm_eval:`` models.
    Returns the table version written (None when the backend is not an lm-eval one)."""
    if not isinstance(backend, LmEvalOutputBackend):
        return None
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{**r, "model": model, "fingerprint": fingerprint, "dataset": dataset, "run_id": run_id, "created_at": now}
            for r in backend.response_rows(samples)]
    return lake.replace("lm_eval_responses", rows, {"model": model, "fingerprint": fingerprint})


def stored_score_rows(lake: Any, model: str, fingerprint: str) -> list[dict[str, Any]]:
    """``scores`` rows of lm-eval's per-sample values for one partition, rebuilt from the
    ``lm_eval_responses`` rows the generations asset stored (no file is read): the scores
    asset calls this for ``lm_eval:`` models when it scores the whole partition."""
    frame = lake.read("lm_eval_responses", where={"model": model, "fingerprint": fingerprint})
    if frame.height == 0:
        return []
    return list(score_rows_from_responses(frame))


def score_rows_from_responses(frame: Any) -> Iterator[dict[str, Any]]:
    """``scores`` rows from ``lm_eval_responses`` rows (a polars frame), one per doc x
    filter x per-sample metric: a numeric value is ``scored``; NaN or a non-numeric item
    (a corpus metric's ``(reference, prediction)`` pair) is ``unscored`` with the item in
    ``detail``; a doc lacking a metric that others of its task and filter have is
    ``unscored`` too (never a zero)."""
    from metric_ops.runner import detail_json

    metrics_by_filter: dict[tuple[str, str], list[str]] = {}
    for row in frame.iter_rows(named=True):
        for m in json.loads(row["metrics"] or "{}"):
            lst = metrics_by_filter.setdefault((row["task"], row["filter"]), [])
            if m not in lst:
                lst.append(m)
    for row in frame.iter_rows(named=True):
        values = json.loads(row["metrics"] or "{}")
        directions = json.loads(row["directions"] or "{}")
        aggregations = json.loads(row["aggregations"] or "{}")
        filt = row["filter"]
        for m in metrics_by_filter[(row["task"], filt)]:
            signature = score_signature(m, filt, row["task"], row["task_version"], row["lm_eval_version"],
                                        row["config_sha256"], aggregations.get(m, "mean"), row["n_shot"])
            out = {"sample_id": row["sample_id"], "metric": metric_name(m, filt), "direction": directions[m],
                   "dimension": "epistemic" if m in _EPISTEMIC else "baseline_grounding", "locality": "local",
                   "signature": signature}
            if m not in values:
                out.update(value=None, status="unscored",
                           detail=detail_json({"reason": f"lm-eval logged no {m} value for this doc under filter {filt}"}))
            else:
                raw = values[m]
                value = _number(raw)
                if value is not None and math.isfinite(value):
                    out.update(value=value, status="scored", detail=detail_json({"task": row["task"], "filter": filt}))
                else:
                    reason = ("lm-eval's per-sample value is not finite" if value is not None else
                              f"per-sample item of a corpus-level metric (aggregated by lm-eval's "
                              f"{aggregations.get(m, 'mean')!r}); the aggregate is in lm_eval_summary")
                    out.update(value=None, status="unscored", detail=detail_json({"reason": reason, "item": raw}))
            yield out


# --------------------------------------------------------------------------- spec section
SECTION_KEYS = frozenset({
    "task", "num_fewshot", "limit", "batch_size", "device", "gen_kwargs", "apply_chat_template", "fewshot_as_multiturn",
    "system_instruction", "include_path", "model_args", "api_mode", "api_key_env", "output_path", "bootstrap_iters",
    "fewshot_seed", "metadata", "runs", "task_config",
})


def validate_section(value: Any, where: str = "lm_eval") -> dict[str, Any]:
    """Check an evaluation spec's ``lm_eval:`` section; returns it as a plain dict.

    Run settings: ``task`` (one lm-eval task; required), ``num_fewshot``, ``limit``,
    ``batch_size``, ``device``, ``gen_kwargs``, ``apply_chat_template``,
    ``fewshot_as_multiturn``, ``system_instruction``, ``include_path`` (folder or list of
    folders of task YAML), ``model_args`` (``KEY=VALUE,...`` for every model),
    ``api_mode`` (completions / chat), ``api_key_env``, ``output_path``,
    ``bootstrap_iters``, ``fewshot_seed``, ``metadata``. facetlake adds ``runs`` (per
    model: results file, lm-eval's aggregates) and ``task_config`` when it registers the
    evaluation. None of them is in the fingerprint as such: the task config, few-shot
    settings and docs that lm-eval actually used are (the ``adapter`` block). Raises
    :class:`ValueError` naming the key and the fix.
    """
    if value in (None, {}):
        return {}
    register_adapter()
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a mapping such as {{task: facetlake_selfaware_qa, limit: 50}}")
    unknown = sorted(set(value) - SECTION_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; allowed: {sorted(SECTION_KEYS)}")
    task = value.get("task")
    if not isinstance(task, str) or not task or "," in task:
        raise ValueError(f"{where}.task: name one lm-eval task (one evaluation per task), e.g. task: arc_easy; "
                         "`facetlake lm-eval TASK,TASK` runs several tasks as several evaluations")
    for key in ("num_fewshot", "bootstrap_iters", "fewshot_seed"):
        if value.get(key) is not None and (not isinstance(value[key], int) or isinstance(value[key], bool) or value[key] < 0):
            raise ValueError(f"{where}.{key}: expected a whole number >= 0, got {value[key]!r}")
    limit = value.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ValueError(f"{where}.limit: expected a number of docs (> 0) or a fraction below 1, got {limit!r}")
    if value.get("api_mode") not in (None, "completions", "chat"):
        raise ValueError(f"{where}.api_mode: completions or chat, got {value['api_mode']!r}")
    for key in value.get("model_args") and str(value["model_args"]).split(",") or []:
        name = key.split("=", 1)[0].strip()
        if re.search(r"(^|_)(api_key|key|token|secret|password)$", name):
            raise ValueError(f"{where}.model_args: {name} looks like a secret; name its environment variable with api_key_env")
    return dict(value)


# --------------------------------------------------------------------------- summary
def _float_or_none(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def summary_rows(lake: Any, fingerprint: str, section: Mapping[str, Any], dataset: str) -> list[dict[str, Any]]:
    """``lm_eval_summary`` rows for one fingerprint: per model x lm-eval metric x filter,
    lm-eval's aggregate and stderr (from its results file, kept in the spec's
    ``lm_eval.runs``) next to facetlake's value, standard error and interval for the same
    numbers, read back from the lake.

    - ``mean`` aggregations: facetlake's value is the mean of the stored per-sample
      ``scores``, its standard error ``sd(ddof=1)/sqrt(n)`` (lm-eval's ``mean_stderr``), its
      interval :func:`metric_ops.stats.mean_interval` (Wilson for 0/1 values, percentile
      bootstrap otherwise; the comparisons table's interval);
    - other aggregations (corpus BLEU, perplexity, F1 over the corpus...): facetlake's value
      is lm-eval's own aggregation function (``lm_eval.api.registry.get_aggregation``)
      applied to the per-sample items stored in ``lm_eval_responses``; no interval.

    ``agrees``: both values within :data:`AGREEMENT_TOLERANCE` (1e-12) and, where both have
    one, both standard errors too; null when lm-eval reported no number.
    """
    import numpy as np
    import polars as pl

    from metric_ops import stats

    out: list[dict[str, Any]] = []
    for model, record in sorted((section.get("runs") or {}).items()):
        aggregates = dict(record.get("aggregates") or {})
        scores = lake.read("scores", where={"fingerprint": fingerprint, "model": model},
                           columns=["sample_id", "metric", "value", "status", "direction"])
        responses = lake.read("lm_eval_responses", where={"fingerprint": fingerprint, "model": model},
                              columns=["task", "filter", "metrics", "aggregations"])
        aggregations: dict[str, str] = {}
        for text in responses["aggregations"].unique().to_list() if responses.height else []:
            aggregations.update(json.loads(text or "{}"))
        task = str(section.get("task") or (responses["task"][0] if responses.height else ""))
        for key, raw_value in aggregates.items():
            if key in _RESULT_META or "," not in key or "_stderr," in key:
                continue
            metric, filt = key.split(",", 1)
            name = metric_name(metric, filt)
            rows = scores.filter(pl.col("metric") == name)
            aggregation = aggregations.get(metric, "mean")
            lm_value = _float_or_none(raw_value)
            lm_stderr = _float_or_none(aggregates.get(f"{metric}_stderr,{filt}"))
            values = rows.filter(pl.col("status") == "scored")["value"].to_numpy().astype(float)
            fl_value = fl_stderr = None
            interval = None
            note = None
            if aggregation == "mean" and rows.height and values.size == rows.height:
                fl_value = float(np.mean(values))
                fl_stderr = float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else None
                interval = stats.mean_interval(values)
            else:
                items = [json.loads(m)[metric] for m, f in zip(responses["metrics"].to_list(), responses["filter"].to_list())
                         if f == filt and metric in json.loads(m)]
                try:
                    from lm_eval.api.registry import get_aggregation

                    fn = get_aggregation(aggregation)
                    fl_value = _float_or_none(fn(items)) if fn is not None and items else None
                    note = (f"recomputed with lm-eval's {aggregation!r} aggregation over the {len(items)} stored per-sample items"
                            if fn is not None else f"lm-eval has no aggregation named {aggregation!r}")
                except ImportError:
                    note = "lm-eval is not installed here: the corpus-level aggregate was not recomputed"
            diff = abs(fl_value - lm_value) if fl_value is not None and lm_value is not None else None
            sdiff = abs(fl_stderr - lm_stderr) if fl_stderr is not None and lm_stderr is not None else None
            agrees = None if diff is None else bool(diff <= AGREEMENT_TOLERANCE and (sdiff is None or sdiff <= AGREEMENT_TOLERANCE))
            direction = rows["direction"][0] if rows.height else None
            out.append({
                "fingerprint": fingerprint, "dataset": dataset, "model": model, "task": task, "metric": name,
                "lm_eval_metric": key, "filter": filt, "aggregation": aggregation, "direction": direction,
                "lm_eval_value": lm_value, "lm_eval_stderr": lm_stderr, "facetlake_value": fl_value,
                "facetlake_stderr": fl_stderr, "ci_low": interval.low if interval else None,
                "ci_high": interval.high if interval else None, "ci_method": interval.method if interval else None,
                "n_scored": int(values.size), "n_total": int(rows.height), "abs_diff": diff, "stderr_abs_diff": sdiff,
                "agrees": agrees,
                "detail": canonical({"results_file": record.get("results_file"), "lm_eval_version": record.get("lm_eval_version"),
                                     **({"note": note} if note else {}),
                                     **({"interval_note": interval.note} if interval is not None and interval.note else {})}),
            })
    return out


_adapters_module = sys.modules.get("resources.adapters")
if _adapters_module is None or hasattr(_adapters_module, "Adapter"):  # not while resources.adapters initialises
    register_adapter()
