"""Agent episodes: reading a trajectory's messages into tool calls, what the agent said to
the user and its final answer (tau-bench's conventions).

Part of :mod:`metric_ops.agents` (its face exports these names); the oracles read episodes with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from metric_ops.base import Score
from metric_ops.errors import FacetlakeError
from metric_ops.toolcalls import ToolCall, parse_tool_calls


class TrajectoryError(FacetlakeError, ValueError):
    """An episode's trajectory is not a list of chat messages."""


def load_messages(output: Any) -> list[dict[str, Any]]:
    """The messages of a trajectory: a JSON string or value holding a list of messages or
    ``{"messages": [...]}``. Raises :class:`TrajectoryError` naming what was found."""
    value = output
    if isinstance(output, str):
        try:
            value = json.loads(output)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(f"the episode's trajectory is not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(value, Mapping) and "messages" in value:
        value = value["messages"]
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise TrajectoryError(f"the episode's trajectory must be a list of chat messages, got {type(value).__name__}")
    for i, m in enumerate(value):
        if "role" not in m:
            raise TrajectoryError(f"message {i} of the trajectory has no role")
    return [dict(m) for m in value]


@dataclass(frozen=True)
class EpisodeCall:
    """One tool call an agent made: ``call`` (name and decoded arguments), the index of the
    assistant message that made it, its ``call_id``, the tool's ``result`` text (None when
    no result was recorded) and ``failed`` (the result reports an error, so the environment
    was not changed: τ-bench's tools answer ``"Error: ..."``)."""

    call: ToolCall
    message_index: int
    call_id: str | None
    result: str | None
    failed: bool


def episode_calls(messages: Sequence[Mapping[str, Any]], failed_prefix: str = "Error") -> tuple[list[EpisodeCall], list[str]]:
    """Every tool call of a trajectory in order, paired with its result, and the messages of
    assistant turns whose ``tool_calls`` could not be decoded (parsed with
    :func:`metric_ops.toolcalls.parse_tool_calls`).

    A ``tool`` message answers a call still waiting for its result: the one with its
    ``tool_call_id``, else the first waiting call to the tool it names, else the first
    waiting call. Ids are matched among waiting calls only, because some recorders reuse
    them (τ-bench's historical trajectories repeat ids across turns)."""
    calls: list[EpisodeCall] = []
    errors: list[str] = []
    results: dict[int, str] = {}
    waiting: list[int] = []  # indexes into calls
    ids: dict[int, str | None] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            parsed = parse_tool_calls({"tool_calls": m["tool_calls"]})
            if parsed.status != "calls":
                errors.append(f"message {i}: {'; '.join(parsed.errors) or parsed.status}")
                continue
            raw = list(m["tool_calls"])
            for j, call in enumerate(parsed.calls):
                call_id = raw[j].get("id") if j < len(raw) and isinstance(raw[j], Mapping) else None
                ids[len(calls)] = str(call_id) if call_id else None
                waiting.append(len(calls))
                calls.append(EpisodeCall(call, i, ids[len(calls)], None, False))
        elif role == "tool" and waiting:
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            tid, name = m.get("tool_call_id"), m.get("name")
            hit = next((w for w in waiting if tid and ids[w] == str(tid)), None)
            if hit is None:
                hit = next((w for w in waiting if name and calls[w].call.name == name), waiting[0])
            waiting.remove(hit)
            results[hit] = text
    out = [EpisodeCall(c.call, c.message_index, c.call_id, results.get(n),
                       results.get(n) is not None and results[n].lstrip().startswith(failed_prefix)) for n, c in enumerate(calls)]
    return out, errors


def said_to_user(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of every assistant message (what the agent told the user), in order."""
    out = []
    for m in messages:
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip():
            out.append(m["content"])
    return out


def final_answer(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The last thing the agent told the user (None when it never spoke)."""
    said = said_to_user(messages)
    return said[-1] if said else None


def _reference_actions(raw: Any) -> list[ToolCall]:
    if not isinstance(raw, list):
        raise ValueError(f"metadata.actions must be a list of {{name, arguments}}, got {type(raw).__name__}")
    out = []
    for a in raw:
        if not isinstance(a, Mapping) or not isinstance(a.get("name"), str):
            raise ValueError(f"a reference action must be {{name, arguments}}, got {a!r}")
        args = a.get("arguments", a.get("kwargs")) or {}
        if not isinstance(args, Mapping):
            raise ValueError(f"arguments of reference action {a['name']!r} must be an object")
        out.append(ToolCall(a["name"], dict(args)))
    return out


def _normalise(value: Any) -> Any:
    """Strings stripped and case-folded, recursively (the ``normalize_strings`` option)."""
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def _messages_or_error(output: Any) -> tuple[list[dict[str, Any]] | None, Score | None]:
    try:
        return load_messages(output), None
    except TrajectoryError as exc:
        return None, Score.error(str(exc))
