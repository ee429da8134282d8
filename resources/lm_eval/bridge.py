"""lm-evaluation-harness output in the lake: read, map and check (issue 18).

facetlake never re-implements lm-eval: tasks, models, filters and metrics are lm-eval's
own (resources/lm_eval/models.py runs ``lm_eval.simple_evaluate``). This module reads
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

Split for size: shared names and hashing in :mod:`resources.lm_eval.common`, reading an
lm-eval run in :mod:`resources.lm_eval.results`, the ``lm_eval_summary`` rows in
:mod:`resources.lm_eval.summary`; this module keeps the fingerprint, dataset, adapter,
backend and spec-section code (the package face :mod:`resources.lm_eval` exports all of them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from metric_ops.base import Sample
from metric_ops.identity import identity_json
from resources.backends import GenerationRequest, GenerationResult, ModelBackend, ModelSpecError
from resources.datasets import Dataset, DatasetError
from resources.lm_eval.common import (
    LmEvalError,
    _EPISTEMIC,
    _number,
    metric_name,
    score_identity,
    score_signature,
    sha256,
)
from resources.lm_eval.results import TaskRun, load_results, task_run


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
        "model_source": _redact_text(run.results.get("model_source") or config.get("model")),
        "model_name": _redact_text(run.results.get("model_name")),
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


_SECRET_NAME = re.compile(r"(key|token|secret|password)", re.I)  # what imports redacted before the shared detector
REDACTED_ARG = "<redacted>"


def _is_secret(name: str | None, value: Any) -> bool:
    """Whether ``value`` (under argument ``name``) looks like a secret: the name rule imports
    always applied (so identities of earlier imports stay the same), or
    :func:`metric_ops.secrets.find_secrets` (by name and by shape: ``sk-...``, a bearer
    token, ``https://user:KEY@host``, ``?api_key=...``)."""
    from metric_ops.secrets import find_secrets

    if name is not None and _SECRET_NAME.search(name):
        return True
    return bool(find_secrets({name: value} if name is not None else value, limit=1))


def _redact_args(args: Any) -> Any:
    """lm-eval's logged model arguments (a mapping, or ``KEY=VALUE,...`` text) with every value
    that looks like a secret replaced by ``<redacted>`` (:func:`_is_secret`); a mapping key
    that looks like one is replaced too. An output folder is lm-eval's record, not the user's
    spec: importing it keeps what is safe rather than refusing the whole import for a key the
    user can only remove by editing lm-eval's files."""
    if isinstance(args, Mapping):
        return {(REDACTED_ARG if _is_secret(None, str(k)) else k): (REDACTED_ARG if _is_secret(str(k), v) else v)
                for k, v in args.items()}
    if isinstance(args, str):
        parts = []
        for part in args.split(","):
            name, sep, value = part.partition("=")
            if not sep:
                parts.append(REDACTED_ARG if _is_secret(None, part) else part)
            else:
                shown = REDACTED_ARG if _is_secret(None, name) else name
                parts.append(f"{shown}={REDACTED_ARG if _is_secret(name.strip(), value) else value}")
        return ",".join(parts)
    return REDACTED_ARG if args is not None and _is_secret(None, args) else args


def _redact_text(value: Any) -> Any:
    """A logged string (``model_name``, ``model_source``) or ``<redacted>`` when it holds a secret."""
    return REDACTED_ARG if isinstance(value, str) and _is_secret(None, value) else value


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

    The adapter is :class:`resources.prompting.adapters.Adapter` with nothing to do: lm-eval rendered
    the prompt (it is the sample's ``input``). Its mapping (:func:`adapter_block`) records
    the task, its config hash and the few-shot settings, so they enter the fingerprint.
    Defined lazily because resources.backends imports this module while
    resources.prompting.adapters (which imports resources.backends) may still be initialising; every
    spec with an ``lm_eval`` section registers it when parsed (:func:`validate_section`).
    """
    from resources.prompting.adapters import ADAPTERS, Adapter

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
                "lm_eval_version": results.get("lm_eval_version"),
                "model_source": _redact_text(results.get("model_source") or config.get("model")),
                "model_name": _redact_text(results.get("model_name")), "model_args": _redact_args(config.get("model_args")),
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
    from metric_ops.scoring.rows import detail_json

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
            key = (m, filt, row["task"], row["task_version"], row["lm_eval_version"], row["config_sha256"],
                   aggregations.get(m, "mean"), row["n_shot"])
            out = {"sample_id": row["sample_id"], "metric": metric_name(m, filt), "direction": directions[m],
                   "dimension": "epistemic" if m in _EPISTEMIC else "baseline_grounding", "locality": "local",
                   "signature": score_signature(*key), "params": identity_json(score_identity(*key))}
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
    args = value.get("model_args")
    if isinstance(args, str):  # lm-eval's KEY=VALUE,KEY=VALUE form
        args = dict((p.split("=", 1) + [""])[:2] for p in args.split(",") if p.strip())
    from metric_ops.secrets import refuse_secrets

    refuse_secrets(args or {}, where, path="model_args", error=ValueError,
                   fix=lambda _: "put the key in an environment variable and name it with lm_eval.api_key_env: VAR")
    return dict(value)


_adapters_module = sys.modules.get("resources.prompting.adapters")
if _adapters_module is None or hasattr(_adapters_module, "Adapter"):  # not while resources.prompting.adapters initialises
    register_adapter()
