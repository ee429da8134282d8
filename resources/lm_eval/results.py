"""lm-eval bridge: reading a run lm-eval wrote (results files and per-sample logs) as
:class:`TaskRun` objects.

Part of :mod:`resources.lm_eval` (the package face exports these names).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from metric_ops.base import Sample
from resources.lm_eval.common import (
    DEFAULT_FILTER,
    LmEvalError,
    _RESULTS_NAME,
    _SAMPLE_KEYS,
    _arguments,
    _flag,
    _number,
    _target_list,
    canonical,
    config_hash,
    sha256,
)


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
