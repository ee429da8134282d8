"""Tool environments of live agent episodes: :class:`ToolEnvironment` (subclass it; each tool
is a method marked with :func:`tool`, with a description and JSON-schema parameters;
``write_tools`` names the tools that change ``self.state``; :meth:`ToolEnvironment.reset`
builds the initial state for a task) and :func:`load_environment` (``module:Class``).

The default reward is τ-bench's (Yao et al., 2024): replay the task's ground-truth actions on
a fresh environment and compare the final states (1.0 when equal), and, when the task
requires outputs, each must appear in what the agent said.

Below both the dataset and the episode loop: the ``episodes`` dataset kind reads a live
task's write tools from its environment, and :mod:`resources.agents.runner` drives a model
through it.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Callable, ClassVar, Mapping

from metric_ops.agents.trajectory import said_to_user
from metric_ops.agents.oracles import tau_bench_output_found
from metric_ops.base import Sample
from metric_ops.errors import FacetlakeError


class EnvironmentLoadError(FacetlakeError, RuntimeError):
    """A tool environment cannot be loaded or built; the message names it and the fix."""


def tool(description: str, parameters: Mapping[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a :class:`ToolEnvironment` method as a tool with its description and JSON-schema
    ``parameters`` (``{"type": "object", "properties": {...}, "required": [...]}``)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__tool__ = {"name": fn.__name__, "description": description,  # type: ignore[attr-defined]
                       "parameters": dict(parameters or {"type": "object", "properties": {}})}
        return fn

    return mark


class ToolEnvironment:
    """Base class of a tool environment (see the module docstring).

    Subclasses set ``name``, ``policy`` (the system prompt's rules), ``write_tools``,
    implement :meth:`reset` (fill ``self.state`` for the task) and define tools with
    :func:`tool`. A tool returns a JSON-serialisable value or raises; a raised error
    becomes the result ``"Error: <message>"`` and the state is left as it was.
    """

    name: ClassVar[str] = "environment"
    policy: ClassVar[str] = ""
    write_tools: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def reset(self, task: Sample) -> None:  # pragma: no cover - abstract
        """Build the initial ``self.state`` for ``task``."""
        raise NotImplementedError

    def tools(self) -> dict[str, Callable[..., Any]]:
        """Tool name -> bound method."""
        out = {}
        for attr in dir(type(self)):
            fn = getattr(type(self), attr)
            if callable(fn) and hasattr(fn, "__tool__"):
                out[fn.__tool__["name"]] = getattr(self, attr)
        return out

    def schemas(self) -> list[dict[str, Any]]:
        """The tools as OpenAI ``tools`` entries (``{"type": "function", "function": {...}}``)."""
        return [{"type": "function", "function": dict(fn.__tool__)} for _, fn in sorted(self.tools().items())]

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run tool ``name``; the result as text (JSON for structured values), ``"Error: ..."``
        for an unknown tool, bad arguments or a tool that raised (state restored)."""
        fn = self.tools().get(name)
        if fn is None:
            return f"Error: unknown tool {name!r}; tools are {', '.join(sorted(self.tools()))}"
        snapshot = json.loads(json.dumps(self.state))
        try:
            value = fn(**dict(arguments))
        except Exception as exc:  # noqa: BLE001 - a tool error is an observation for the agent
            self.state = snapshot
            return f"Error: {exc}"
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)

    def reward(self, task: Sample, messages: list[dict[str, Any]]) -> tuple[float | None, dict[str, Any]]:
        """τ-bench's reward: 1.0 when the final state equals the state the task's ground-truth
        ``actions`` produce on a fresh environment and (when the task requires outputs)
        every output was said; else 0.0. ``(None, info)`` when the task has no actions."""
        actions = task.metadata.get("actions")
        info: dict[str, Any] = {}
        reward = 1.0
        if task.metadata.get("outputs"):
            said = said_to_user(messages)
            found = {o: any(tau_bench_output_found(o, m) for m in said) for o in task.metadata["outputs"]}
            info["outputs"] = found
            info["r_outputs"] = float(all(found.values()))
            reward = min(reward, info["r_outputs"])
        if actions is None:
            return (reward if "r_outputs" in info else None), info
        fresh = type(self)()
        fresh.reset(task)
        for action in actions:
            fresh.call(action["name"], action.get("arguments") or {})
        info["r_actions"] = float(fresh.state == self.state)
        return min(reward, info["r_actions"]), info


def load_environment(spec: str) -> type[ToolEnvironment]:
    """The environment class named ``module:Class``; raises :class:`EnvironmentLoadError`."""
    if not spec or ":" not in spec:
        raise EnvironmentLoadError(f"environment {spec!r} must be written module:Class, e.g. my_envs.shop:ShopEnvironment")
    module_name, _, cls_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EnvironmentLoadError(f"cannot import the environment module {module_name!r} ({exc}); is it on PYTHONPATH?") from None
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, ToolEnvironment)):
        raise EnvironmentLoadError(f"{spec!r} is not a ToolEnvironment subclass (resources/agents/environments.py)")
    return cls
