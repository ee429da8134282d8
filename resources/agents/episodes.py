"""Agent episodes as data: the ``episodes`` dataset kind, the two file formats, table rows.

An **episode** is one trial of an agent on a task: the full message trajectory (OpenAI
chat format, tool calls and tool results included), the environment's recorded reward
and the usage counts. Files hold episodes in one of two formats (``format: auto`` tells
them apart):

``tau_bench``: τ-bench's historical trajectories (Yao et al., 2024), a JSON array of
    ``{task_id, trial, reward, info: {task: {user_id, instruction, actions: [{name,
    kwargs}], outputs: [str]}, reward_info: {reward, info: {r_actions | r_outputs,
    outputs?}, actions}, user_cost, source}, traj: [messages]}``.

``openai_jsonl``: one episode per line, what any agent framework can write::

    {"task_id": "t1", "trial": 0,                          # trial optional: order per task
     "messages": [{"role": "user", "content": "..."},
                  {"role": "assistant", "content": null,
                   "tool_calls": [{"id": "c1", "type": "function",
                                   "function": {"name": "f", "arguments": "{...}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "..."}, ...],
     "reward": 1.0,                                         # optional
     "task": {"instruction": "...", "actions": [{"name": "f", "arguments": {...}}],
              "outputs": ["..."], "write_tools": ["f"]},   # optional
     "usage": {"prompt_tokens": 812, "completion_tokens": 95}, "cost": 0.0031}  # optional

A line without ``messages`` is a task only (for live runs, which produce the episodes).

The ``episodes`` dataset kind reads such a file and yields **one sample per task**
(``sample_id`` = task id, ``input`` = the instruction, ``references`` = required outputs,
``metadata``: ``actions``, ``outputs``, ``write_tools`` and the task's other fields), so its
content hash, and the evaluation's fingerprint, cover the tasks and not any agent's
trajectories: two agents run on the same tasks share a fingerprint and are compared
task-paired. The agent's episodes go to the ``episodes`` table (assets/episodes.py), one
row per (task, trial), from ``precomputed:FILE`` or from a live backend
(resources/agents/runner.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from metric_ops.agents.trajectory import episode_calls, final_answer
from metric_ops.base import Sample
from resources.agents.environments import EnvironmentLoadError, load_environment
from resources.datasets import Dataset, DatasetError
from resources.datasets.files import _read_json_or_jsonl

FORMATS: tuple[str, ...] = ("auto", "tau_bench", "openai_jsonl")

# τ-bench's tools that change the database (airline and retail domains); reads, `think`,
# `calculate` and `transfer_to_human_agents` leave it unchanged
TAU_BENCH_WRITE_TOOLS: tuple[str, ...] = (
    # airline
    "book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
    "update_reservation_flights", "update_reservation_passengers",
    # retail
    "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
    "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
)


@dataclass
class EpisodeRecord:
    """One episode read from a file, in the uniform shape every format is normalised to.

    ``task``: ``{"instruction", "actions" (list of {name, arguments} or None when unknown),
    "outputs" (list of str), "write_tools" (list or None)}`` plus the format's other task
    fields; ``messages`` is None for a task-only line. ``where`` names file and row.
    """

    task_id: str
    trial: int | None
    messages: list[dict[str, Any]] | None
    task: dict[str, Any]
    reward: float | None = None
    reward_info: dict[str, Any] | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    user_cost: float | None = None
    latency_s: float | None = None
    source: str = "openai_jsonl"
    where: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _number(value: Any, what: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DatasetError(f"{where}: {what} must be a number, got {value!r}")
    return float(value)


def _int(value: Any, what: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise DatasetError(f"{where}: {what} must be a whole number, got {value!r}")
    return value


def _messages(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(m, Mapping) and "role" in m for m in value):
        raise DatasetError(f"{where}: messages must be a list of chat messages with a role each")
    return [dict(m) for m in value]


def _actions(value: Any, where: str) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise DatasetError(f"{where}: task actions must be a list of {{name, arguments}}")
    out = []
    for a in value:
        if not isinstance(a, Mapping) or not isinstance(a.get("name"), str):
            raise DatasetError(f"{where}: a task action must be {{name, arguments}}, got {a!r}")
        args = a.get("arguments", a.get("kwargs")) or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                raise DatasetError(f"{where}: arguments of action {a['name']!r} are not valid JSON") from None
        if not isinstance(args, Mapping):
            raise DatasetError(f"{where}: arguments of action {a['name']!r} must be an object")
        out.append({"name": a["name"], "arguments": dict(args)})
    return out


def _tau_bench(row: Mapping[str, Any], where: str) -> EpisodeRecord:
    for key in ("task_id", "traj", "info"):
        if key not in row:
            raise DatasetError(f"{where}: τ-bench episode has no {key!r}; columns are: {', '.join(map(str, row))}")
    info = row["info"] if isinstance(row["info"], Mapping) else {}
    task = info.get("task")
    if not isinstance(task, Mapping) or "instruction" not in task:
        raise DatasetError(f"{where}: info.task with an instruction is missing (is this a τ-bench results file?)")
    reward_info = info.get("reward_info")
    others = {k: v for k, v in task.items() if k not in ("instruction", "actions", "outputs")}
    return EpisodeRecord(
        task_id=str(row["task_id"]),
        trial=_int(row.get("trial"), "trial", where),
        messages=_messages(row["traj"], where),
        task={"instruction": str(task["instruction"]), "actions": _actions(task.get("actions"), where),
              "outputs": [str(o) for o in task.get("outputs") or []], "write_tools": list(TAU_BENCH_WRITE_TOOLS), **others},
        reward=_number(row.get("reward"), "reward", where),
        reward_info=dict(reward_info) if isinstance(reward_info, Mapping) else None,
        user_cost=_number(info.get("user_cost"), "info.user_cost", where),
        source="tau_bench",
        where=where,
        extra={"source": info.get("source")},
    )


def _openai(row: Mapping[str, Any], where: str) -> EpisodeRecord:
    if "task_id" not in row:
        raise DatasetError(f"{where}: episode has no task_id; columns are: {', '.join(map(str, row))}")
    task = row.get("task") or {}
    if not isinstance(task, Mapping):
        raise DatasetError(f"{where}: task must be an object {{instruction, actions, outputs, write_tools}}")
    messages = _messages(row["messages"], where) if row.get("messages") is not None else None
    instruction = task.get("instruction")
    if instruction is None and messages:
        instruction = next((m.get("content") for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)), None)
    if instruction is None:
        raise DatasetError(f"{where}: no task.instruction and no user message to take it from")
    write_tools = task.get("write_tools")
    if write_tools is not None and (not isinstance(write_tools, list) or not all(isinstance(t, str) for t in write_tools)):
        raise DatasetError(f"{where}: task.write_tools must be a list of tool names")
    usage = row.get("usage") or {}
    others = {k: v for k, v in task.items() if k not in ("instruction", "actions", "outputs", "write_tools")}
    return EpisodeRecord(
        task_id=str(row["task_id"]),
        trial=_int(row.get("trial"), "trial", where),
        messages=messages,
        task={"instruction": str(instruction), "actions": _actions(task.get("actions"), where),
              "outputs": [str(o) for o in task.get("outputs") or []], "write_tools": write_tools, **others},
        reward=_number(row.get("reward"), "reward", where),
        reward_info=dict(row["reward_info"]) if isinstance(row.get("reward_info"), Mapping) else None,
        tokens_in=_int(usage.get("prompt_tokens"), "usage.prompt_tokens", where),
        tokens_out=_int(usage.get("completion_tokens"), "usage.completion_tokens", where),
        cost=_number(row.get("cost"), "cost", where),
        latency_s=_number(row.get("latency_s"), "latency_s", where),
        source="openai_jsonl",
        where=where,
    )


def detect_format(rows: Sequence[Any], path: Path) -> str:
    """``tau_bench`` when rows carry ``traj`` and ``info``, ``openai_jsonl`` when they carry
    ``messages`` or ``task``; raises :class:`DatasetError` otherwise."""
    first = next((r for r in rows if isinstance(r, Mapping)), None)
    if first is None:
        raise DatasetError(f"{path}: no episode found (expected a JSON array or JSON lines of objects)")
    if "traj" in first and "info" in first:
        return "tau_bench"
    if "messages" in first or "task" in first:
        return "openai_jsonl"
    raise DatasetError(
        f"{path}: not an episodes file: rows have {', '.join(map(str, first))}; expected τ-bench's "
        "{task_id, trial, reward, info, traj} or OpenAI-messages lines {task_id, trial, messages, reward, task}"
    )


def read_episodes(path: str | Path, format: str = "auto") -> list[EpisodeRecord]:
    """Every episode (or task-only line) of ``path`` in file order, normalised.

    Trials missing from a line are numbered per task in order of appearance; a repeated
    (task, trial) raises :class:`DatasetError` naming both rows, as does a malformed row
    (file and row named, with the fix).
    """
    path = Path(path).expanduser()
    if format not in FORMATS:
        raise DatasetError(f"unknown episodes format {format!r}; use one of {', '.join(FORMATS)}")
    if not path.exists():
        raise DatasetError(f"episodes file {path} does not exist; check the path")
    data = _read_json_or_jsonl(path)
    rows = data if isinstance(data, list) else [data]
    fmt = detect_format(rows, path) if format == "auto" else format
    reader = _tau_bench if fmt == "tau_bench" else _openai
    records: list[EpisodeRecord] = []
    seen: dict[tuple[str, int], str] = {}
    next_trial: dict[str, int] = {}
    for i, row in enumerate(rows, start=1):
        where = f"{path}: row {i}"
        if not isinstance(row, Mapping):
            raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
        record = reader(row, where)
        if record.messages is not None:
            if record.trial is None:
                record.trial = next_trial.get(record.task_id, 0)
            next_trial[record.task_id] = max(next_trial.get(record.task_id, 0), record.trial + 1)
            key = (record.task_id, record.trial)
            if key in seen:
                raise DatasetError(f"{where}: task {record.task_id!r} trial {record.trial} already appears at {seen[key]}; trials must be unique per task")
            seen[key] = where
        records.append(record)
    return records


def check_episodes_file(path: str | Path) -> int:
    """Read a model's precomputed episodes file now (as ``facetlake run`` does before any
    Dagster run) and return the number of episodes in it; raises :class:`DatasetError`
    naming the file, the row and the fix, also when the file holds tasks but no episode."""
    records = read_episodes(path, "auto")
    n = sum(1 for r in records if r.messages is not None)
    if not n:
        raise DatasetError(f"{path}: holds {len(records)} task line(s) but no episode (no trajectory or messages); "
                           "a model's precomputed file must hold its episodes")
    return n


def tasks_of(records: Iterable[EpisodeRecord]) -> list[tuple[str, dict[str, Any]]]:
    """(task_id, task) in order of first appearance; raises :class:`DatasetError` when two
    rows of one task disagree on its instruction, actions or outputs."""
    tasks: dict[str, tuple[dict[str, Any], str]] = {}
    for r in records:
        if r.task_id not in tasks:
            tasks[r.task_id] = (r.task, r.where)
            continue
        first, where = tasks[r.task_id]
        for key in ("instruction", "actions", "outputs"):
            if first.get(key) != r.task.get(key):
                raise DatasetError(f"{r.where}: task {r.task_id!r} has another {key} than at {where}; one task id, one definition")
    return [(t, v[0]) for t, v in tasks.items()]


@dataclass
class EpisodesDataset(Dataset):
    """Agent tasks from an episodes file (τ-bench historical results or OpenAI-messages
    JSONL, see the module docstring): one sample per task.

    Options: ``format`` (``auto``, ``tau_bench``, ``openai_jsonl``); ``write_tools`` (tool
    names that change the environment's state, overriding the file's; τ-bench files get
    τ-bench's airline and retail write tools); for live runs ``environment`` (a
    ``module:Class`` tool environment, resources/agents/environments.py), ``max_turns`` (agent
    turns before an episode is cut), ``user`` (``scripted``, the default, or ``model``) and
    ``user_model`` (the model spec that plays the user when ``user: model``). Every option
    is copied into each sample's metadata, so it is part of the content hash.
    """

    format: str = "auto"
    write_tools: list[str] | None = None
    environment: str | None = None
    max_turns: int | None = None
    user: str | None = None
    user_model: str | None = None

    kind: ClassVar[str] = "episodes"
    version: ClassVar[str] = "1"

    def rows(self) -> list[Any]:
        path = self.resolved_path()
        return [{"task_id": t, **task} for t, task in tasks_of(read_episodes(path, self.format))]

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        task_id = str(row["task_id"])
        metadata = {k: v for k, v in row.items() if k not in ("instruction",)}
        if self.write_tools is not None:
            metadata["write_tools"] = list(self.write_tools)
        for key in ("environment", "max_turns", "user", "user_model"):
            value = getattr(self, key)
            if value is not None:
                metadata.setdefault(key, value)
        if metadata.get("write_tools") is None and metadata.get("environment"):
            try:  # a live task's write tools are its environment's
                metadata["write_tools"] = list(load_environment(str(metadata["environment"])).write_tools)
            except EnvironmentLoadError as exc:
                raise DatasetError(f"task {task_id}: {exc}") from None
        return Sample(sample_id=task_id, input=str(row["instruction"]), references=tuple(row.get("outputs") or ()), metadata=metadata)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "format": self.format, "write_tools": self.write_tools,
                "environment": self.environment, "max_turns": self.max_turns, "user": self.user, "user_model": self.user_model}


# ============================================================================ table rows


def episode_id(task_id: str, trial: int) -> str:
    """The id of one episode in the ``scores`` table: ``<task_id>#<trial>``."""
    return f"{task_id}#{trial}"


def episode_row(record: EpisodeRecord, *, model: str, fingerprint: str, dataset: str, run_id: str, created_at: Any,
                backend: str, status: str = "ok", error: str | None = None) -> dict[str, Any]:
    """The ``episodes`` table row of one episode (see resources/lake/schemas.py SCHEMAS)."""
    messages = record.messages or []
    calls, _ = episode_calls(messages)
    return {
        "model": model,
        "fingerprint": fingerprint,
        "dataset": dataset,
        "task_id": record.task_id,
        "trial": int(record.trial or 0),
        "episode_id": episode_id(record.task_id, int(record.trial or 0)),
        "messages": json.dumps(messages, ensure_ascii=False),
        "tool_calls": json.dumps([{"name": c.call.name, "arguments": dict(c.call.arguments), "id": c.call_id,
                                   "message_index": c.message_index, "result": c.result, "failed": c.failed} for c in calls],
                                 ensure_ascii=False),
        "final_answer": final_answer(messages),
        "n_messages": len(messages),
        "n_turns": sum(1 for m in messages if m.get("role") == "assistant"),
        "n_tool_calls": len(calls),
        "reward": record.reward,
        "reward_info": json.dumps(record.reward_info, ensure_ascii=False, default=str) if record.reward_info is not None else None,
        "status": status,
        "error": error,
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "cost": record.cost,
        "user_cost": record.user_cost,
        "latency_s": record.latency_s,
        "source": record.source,
        "backend": backend,
        "run_id": run_id,
        "created_at": created_at,
    }


def episode_scoring_inputs(lake: Any, model: str, fingerprint: str, tasks: Sequence[Sample]) -> tuple[list[Sample], list[str | None]] | None:
    """What the scores asset scores for an agent partition: one sample per stored episode
    (``sample_id`` = ``<task>#<trial>``, the task's fields plus ``task_id``, ``trial``,
    ``reward`` and ``reward_info`` in metadata) and its trajectory (messages as JSON; None
    for an episode stored as an error). None when the partition holds no episodes (an
    ordinary generation partition). Episodes come in task order, then trial order."""
    if not lake.exists("episodes"):
        return None
    frame = lake.read("episodes", where={"model": model, "fingerprint": fingerprint},
                      columns=["task_id", "trial", "episode_id", "messages", "reward", "reward_info", "status"])
    if frame.height == 0:
        return None
    order = {s.sample_id: i for i, s in enumerate(tasks)}
    by_id = {s.sample_id: s for s in tasks}
    samples: list[Sample] = []
    outputs: list[str | None] = []
    rows = sorted(frame.iter_rows(named=True), key=lambda r: (order.get(r["task_id"], len(order)), r["task_id"], r["trial"]))
    for r in rows:
        task = by_id.get(r["task_id"])
        if task is None:
            continue  # stored as an error row by the episodes asset: not one of the evaluation's tasks
        metadata = {**dict(task.metadata), "task_id": r["task_id"], "trial": r["trial"], "reward": r["reward"],
                    "reward_info": json.loads(r["reward_info"]) if r["reward_info"] else None}
        samples.append(Sample(sample_id=r["episode_id"], input=task.input, references=task.references, context=task.context,
                              metadata=metadata))
        outputs.append(r["messages"] if r["status"] == "ok" else None)
    return samples, outputs


def has_episodes(lake: Any, fingerprint: str) -> bool:
    """Whether any agent episode is stored under ``fingerprint``."""
    if not lake.exists("episodes"):
        return False
    return lake.read("episodes", where={"fingerprint": fingerprint}, columns=["trial"]).height > 0
