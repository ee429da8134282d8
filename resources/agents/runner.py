"""Live agent episodes: drive a model through the project's backends against a tool
environment (a Python class) and a scripted user, and record each episode in the shape the
``episodes`` table stores (:class:`resources.agents.episodes.EpisodeRecord`).

Pieces:

- the tool environment (:class:`resources.agents.environments.ToolEnvironment`, its tools
  and τ-bench's reward), loaded by name with
  :func:`resources.agents.environments.load_environment`;
- :class:`ScriptedUser`: the user's turns come from the task (``metadata.user_script``, a
  list of messages; default: the instruction alone); when the script is spent the user
  stops (``###STOP###``, τ-bench's end marker). :class:`ModelUser`: a model plays the
  user from the instruction (dataset options ``user: model`` and ``user_model: SPEC``).
- :func:`run_episode`: the loop. The model sees a system prompt with the policy and the
  tool schemas and calls tools by writing ``<tool_call>{"name": ..., "arguments":
  {...}}</tool_call>`` (read with :func:`metric_ops.toolcalls.parse_tool_calls`, which
  also accepts JSON and OpenAI shapes); tool results go back as ``<tool_response>`` user
  turns, so every backend (hf, vLLM, OpenAI-compatible API) can play the agent. The
  trajectory is recorded in OpenAI chat format (assistant ``tool_calls``, ``tool``
  messages) like a precomputed episode, so the same oracles score both.

A reply that is neither a call nor text the user can answer (empty) ends the episode;
``max_turns`` agent replies cut it. A backend error ends the episode with status
``error`` and its message (the run goes on with the next episode).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Mapping

from metric_ops.base import Sample
from metric_ops.toolcalls import parse_tool_calls
from resources.agents.environments import ToolEnvironment
from resources.agents.episodes import EpisodeRecord
from resources.backends import GenerationRequest, ModelBackend

STOP = "###STOP###"
DEFAULT_MAX_TURNS = 12
CALL_FORMAT = (
    "To use a tool, reply with only <tool_call>{\"name\": TOOL, \"arguments\": {...}}</tool_call> "
    "(several blocks for several calls). Tool results come back as <tool_response>...</tool_response>. "
    "Otherwise reply to the user in plain text."
)


class ScriptedUser:
    """A user whose turns are the task's ``metadata.user_script`` (default: the instruction);
    after the last one it answers ``###STOP###``."""

    def __init__(self, task: Sample) -> None:
        script = task.metadata.get("user_script")
        self.turns = [str(t) for t in script] if isinstance(script, list) and script else [task.input]
        self.position = 0

    def first(self) -> str:
        """The user's opening message."""
        self.position = 1
        return self.turns[0]

    def reply(self, agent_text: str) -> str:
        """The next scripted turn, or ``###STOP###`` when the script is spent."""
        if self.position >= len(self.turns):
            return STOP
        self.position += 1
        return self.turns[self.position - 1]


USER_PROMPT = (
    "You are a user talking to a customer-service agent. Your goal:\n{instruction}\n\n"
    "Write only your next message to the agent, one or two sentences; reveal what the goal says only when asked. "
    "When your goal is met, or cannot be met, write ###STOP###."
)


class ModelUser(ScriptedUser):
    """A user simulated by a model (as τ-bench's LLM user): the instruction is its system
    prompt, it sees the conversation with the roles swapped (the agent's words as user
    turns), and it stops when its reply contains ``###STOP###``. ``backend`` is any model
    backend (hf, vLLM, API) and ``settings`` its generation settings."""

    def __init__(self, task: Sample, backend: ModelBackend, settings: Mapping[str, Any]) -> None:
        super().__init__(task)
        self.backend, self.settings, self.task = backend, dict(settings), task
        self.history: list[dict[str, str]] = [{"role": "system", "content": USER_PROMPT.format(instruction=task.input)}]

    def _say(self, agent_text: str) -> str:
        self.history.append({"role": "user", "content": agent_text})
        request = GenerationRequest(sample=self.task, prompt=agent_text, messages=list(self.history))
        result = next(iter(self.backend.generate([request], self.settings)))
        text = (result.output or "").strip() if result.status == "ok" else ""
        text = text or STOP  # a user who cannot answer ends the conversation
        self.history.append({"role": "assistant", "content": text})
        return text

    def first(self) -> str:
        return self._say("Hi! How can I help you today?")

    def reply(self, agent_text: str) -> str:
        return self._say(agent_text)


USERS: dict[str, type[ScriptedUser]] = {"scripted": ScriptedUser, "model": ModelUser}


@dataclass
class _Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    seen_tokens: bool = False


def _backend_view(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The trajectory as plain role/content turns any backend accepts: tool calls written
    back in the ``<tool_call>`` form the model used, tool results as user turns."""
    out: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "user", "content": f"<tool_response>{m['content']}</tool_response>"})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            blocks = [json.dumps({"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])})
                      for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": "\n".join(f"<tool_call>{b}</tool_call>" for b in blocks)})
        else:
            out.append({"role": m["role"], "content": str(m.get("content") or "")})
    return out


def run_episode(
    backend: ModelBackend,
    environment: ToolEnvironment,
    task: Sample,
    trial: int,
    settings: Mapping[str, Any],
    max_turns: int = DEFAULT_MAX_TURNS,
    user: ScriptedUser | None = None,
) -> tuple[EpisodeRecord, str | None]:
    """Run one episode of ``task``; returns the record and an error message (None when the
    episode ran to its end). See the module docstring for the protocol."""
    environment.reset(task)
    user = user or ScriptedUser(task)
    system = "\n\n".join(p for p in (environment.policy, "Tools:\n" + json.dumps(environment.schemas(), indent=1), CALL_FORMAT) if p)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user.first()}]
    usage = _Usage()
    error: str | None = None
    for turn in range(max_turns):
        request = GenerationRequest(sample=task, prompt=messages[-1]["content"] or "", messages=_backend_view(messages))
        t0 = time.perf_counter()
        result = next(iter(backend.generate([request], settings)))
        usage.latency_s += result.latency_s if result.latency_s is not None else time.perf_counter() - t0
        if result.tokens_in is not None or result.tokens_out is not None:
            usage.seen_tokens = True
            usage.tokens_in += int(result.tokens_in or 0)
            usage.tokens_out += int(result.tokens_out or 0)
        if result.status != "ok" or result.output is None:
            error = f"agent turn {turn}: {result.error or 'no output'}"
            break
        parsed = parse_tool_calls(result.output)
        if parsed.status == "calls":
            tool_calls = [{"id": f"call_{trial}_{turn}_{j}", "type": "function",
                           "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)}}
                          for j, c in enumerate(parsed.calls)]
            messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
            for c, tc in zip(parsed.calls, tool_calls):
                messages.append({"role": "tool", "tool_call_id": tc["id"], "name": c.name,
                                 "content": environment.call(c.name, c.arguments)})
            continue
        text = result.output.strip()
        messages.append({"role": "assistant", "content": result.output})
        if not text:
            break
        reply = user.reply(text)
        messages.append({"role": "user", "content": reply})
        if STOP in reply:
            break
    reward, info = environment.reward(task, messages)
    record = EpisodeRecord(
        task_id=task.sample_id, trial=trial, messages=messages,
        task={"instruction": task.input, "actions": task.metadata.get("actions"), "outputs": list(task.metadata.get("outputs") or []),
              "write_tools": list(environment.write_tools)},
        reward=reward if error is None else None,
        reward_info={"reward": reward, "info": info, "environment": environment.name} if error is None else None,
        tokens_in=usage.tokens_in if usage.seen_tokens else None, tokens_out=usage.tokens_out if usage.seen_tokens else None,
        latency_s=usage.latency_s, source="live",
    )
    return record, error
