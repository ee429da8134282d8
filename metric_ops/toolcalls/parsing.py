"""Reading tool calls out of model outputs (part of :mod:`metric_ops.toolcalls`,
whose face exports every public name here).

:func:`parse_tool_calls` accepts native OpenAI ``tool_calls`` JSON, lists of
``{"name", "arguments"}``, Hermes/Qwen ``<tool_call>`` blocks, fenced JSON or Python
blocks, JSON embedded in text and Python call syntax ``[f(a=1)]``. A reply with no call
in it is a deliberate no-call; a reply that *attempted* a call that cannot be parsed --
in any of those syntaxes, or behind another model's tool-call tag -- is a parse failure
(issue 15 kind 4: ``get_weather(city=`` cut off is never an abstention). The work it
does is linear in the output's length and counted (:class:`ParseWork`).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from metric_ops.toolcalls.scan import _PY_CALL_START, ParseWork, _json_spans, attempted_call_syntax
from metric_ops.errors import FacetlakeError

# ============================================================================ data model


@dataclass(frozen=True)
class ToolCall:
    """One function call: a name and its arguments (a JSON object)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "arguments"}`` (JSON-ready)."""
        return {"name": self.name, "arguments": dict(self.arguments)}


@dataclass(frozen=True)
class ParsedCalls:
    """What a model output contained.

    ``status``: ``"calls"`` (at least one call parsed), ``"no_call"`` (a deliberate
    reply without a call, including an empty reply or an explicit empty ``tool_calls``)
    or ``"parse_failure"`` (the reply tried to call a tool and nothing could be parsed).
    ``turns``: the calls grouped by response (one turn for an ordinary reply; several
    when the output is a trajectory ``{"turns": [[...], ...]}``). ``source`` names the
    format that was recognised; ``errors`` keeps the messages of fragments that failed.
    """

    status: str
    turns: tuple[tuple[ToolCall, ...], ...] = ()
    source: str = "text"
    errors: tuple[str, ...] = ()

    @property
    def calls(self) -> list[ToolCall]:
        """Every call, in order, flattened across turns."""
        return [c for turn in self.turns for c in turn]


class _Malformed(FacetlakeError, ValueError):
    """A fragment looks like a tool call but cannot be decoded."""


def _loads(text: str, work: ParseWork | None = None) -> Any:
    """``json.loads`` that reports pathological nesting as a ``ValueError``."""
    if work is not None:
        work.decoded += len(text)
        work.spans += 1
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


# ============================================================================ parsing

_ARG_KEYS = ("arguments", "parameters", "args", "input")
_CONTAINER_KEYS = ("tool_calls", "turns", "calls", "function", "trace", "answer", "output")


def _decode_args(raw: Any, name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            value = _loads(text)
        except ValueError as exc:
            raise _Malformed(f"arguments of {name!r} are not valid JSON ({exc})") from None
        if not isinstance(value, Mapping):
            raise _Malformed(f"arguments of {name!r} decode to {type(value).__name__}, expected an object")
        return dict(value)
    raise _Malformed(f"arguments of {name!r} are {type(raw).__name__}, expected an object")


def _as_call(obj: Any, bare_name_ok: bool = False) -> ToolCall | None:
    """A call from one JSON object, or None when the object is not call-shaped."""
    if not isinstance(obj, Mapping):
        return None
    fn = obj.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):  # OpenAI tool_calls item
        return _as_call(fn, bare_name_ok=True)
    name = obj.get("name")
    if isinstance(name, str) and name:
        for key in _ARG_KEYS:
            if key in obj:
                return ToolCall(name, _decode_args(obj[key], name))
        if bare_name_ok or obj.get("type") in ("function", "tool_use"):
            return ToolCall(name, {})
        return None
    if len(obj) == 1:  # BFCL's {"fn": {"arg": value}}
        ((key, value),) = obj.items()
        if isinstance(key, str) and key and key not in _CONTAINER_KEYS and isinstance(value, Mapping):
            return ToolCall(key, dict(value))
    return None


def _calls_from_list(items: Sequence[Any], bare_name_ok: bool) -> list[ToolCall] | None:
    calls = [_as_call(x, bare_name_ok) for x in items]
    return calls if all(c is not None for c in calls) else None  # type: ignore[return-value]


def _interpret(value: Any, bare_name_ok: bool = False) -> list[list[ToolCall]] | None:
    """Turns of calls from a decoded JSON value; ``[]`` = explicit no call; None = not
    call-shaped. Raises :class:`_Malformed` for a call-shaped value that cannot be read."""
    if isinstance(value, Mapping):
        if "tool_calls" in value:  # an OpenAI assistant message
            raw = value["tool_calls"]
            if raw is None or raw == []:
                return []
            if not isinstance(raw, list):
                raise _Malformed(f"tool_calls is {type(raw).__name__}, expected a list")
            calls = _calls_from_list(raw, True)
            if calls is None:
                raise _Malformed("a tool_calls item has no function name")
            return [calls]
        if isinstance(value.get("turns"), list):
            return _interpret_turns(value["turns"])
        if isinstance(value.get("calls"), list):
            calls = _calls_from_list(value["calls"], True)
            if calls is None:
                raise _Malformed("a calls item has no function name")
            return [calls] if calls else []
        if isinstance(value.get("trace"), Mapping):
            return _interpret({k: v for k, v in value["trace"].items() if k in ("tool_calls", "turns", "calls")}) or None
        call = _as_call(value, bare_name_ok)
        return [[call]] if call is not None else None
    if isinstance(value, list):
        if not value:
            return []
        if all(isinstance(x, list) for x in value):
            return _interpret_turns(value)
        calls = _calls_from_list(value, bare_name_ok)
        return [calls] if calls is not None else None
    return None


def _interpret_turns(turns: Sequence[Any]) -> list[list[ToolCall]]:
    out = []
    for turn in turns:
        if not isinstance(turn, list):
            raise _Malformed(f"a turn is {type(turn).__name__}, expected a list of calls")
        calls = _calls_from_list(turn, True)
        if calls is None:
            raise _Malformed("a call in a turn has no function name")
        if calls:
            out.append(calls)
    return out


def _looks_like_call(fragment: str) -> bool:
    return '"name"' in fragment or "'name'" in fragment or '"function"' in fragment or '"tool_calls"' in fragment


def _dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _parse_python_calls(text: str, work: ParseWork | None = None) -> list[ToolCall] | None:
    """``[f(a=1), g.h(b="x")]`` or ``f(a=1)`` (BFCL's prompt format); None if not that."""
    head = text[:1]
    if not (head == "[" or head.isalpha() or head == "_") or not text.endswith((")", "]")):
        return None
    if work is not None:
        work.decoded += len(text)
        work.spans += 1
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    if not nodes or not all(isinstance(n, ast.Call) for n in nodes):
        return None
    calls = []
    for node in nodes:
        name = _dotted_name(node.func)  # type: ignore[attr-defined]
        if name is None:
            return None
        if node.args:  # type: ignore[attr-defined]
            raise _Malformed(f"call {name!r} passes positional arguments; keyword arguments are required")
        args = {}
        for kw in node.keywords:  # type: ignore[attr-defined]
            if kw.arg is None:
                raise _Malformed(f"call {name!r} uses **kwargs")
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError, RecursionError) as exc:
                raise _Malformed(f"argument {kw.arg!r} of {name!r} is not a literal ({exc})") from None
        calls.append(ToolCall(name, _jsonable(args)))
    return calls


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _result(turns: list[list[ToolCall]], source: str, errors: list[str]) -> ParsedCalls:
    turns = [t for t in turns if t]
    if turns:
        return ParsedCalls("calls", tuple(tuple(t) for t in turns), source, tuple(errors))
    return ParsedCalls("no_call", (), source, tuple(errors))


def parse_tool_calls(output: Any, work: ParseWork | None = None) -> ParsedCalls:
    """Read the tool calls out of a model output, in time linear in its length.

    Accepted, in this order:

    1. the whole output as JSON: an OpenAI assistant message (``{"tool_calls": [...]}``),
       a list of OpenAI ``tool_calls`` items (``{"type": "function", "function": {"name",
       "arguments": "<JSON string>"}}``), a list of ``{"name", "arguments"}`` (or
       ``parameters``/``args``/``input``), one such object, BFCL's ``[{"fn": {...}}]``,
       a trajectory ``{"turns": [[call, ...], ...]}``/``[[call, ...], ...]``, or ``[]``
       (explicit no call); a non-string output (already decoded) is read the same way;
    2. Hermes/Qwen ``<tool_call>{...}</tool_call>`` blocks (an unclosed block runs to the
       end of the text);
    3. fenced code blocks holding one of the JSON shapes (```` ```json ... ``` ````) or
       Python call syntax (```` ```python ... ``` ````);
    4. Python call syntax ``[f(a=1), g(b="x")]`` (BFCL's default prompt format);
    5. JSON objects/arrays embedded in prose (balanced-bracket scan, then ``json.loads``).

    Returns a :class:`ParsedCalls`. Status ``parse_failure`` when the output attempted a
    call and no call could be decoded: a ``<tool_call>`` or other tool-call tag, a JSON
    fence, a fragment with ``"name"``/``"function"`` keys, output opening a JSON object,
    or a line opening a Python call (``get_weather(city=`` cut off); see
    :func:`attempted_call_syntax`. Plain prose is ``no_call``. Never raises. ``work``,
    when given, is filled with the work done (:class:`ParseWork`).
    """
    work = work if work is not None else ParseWork()
    errors: list[str] = []
    if output is None:
        return ParsedCalls("no_call", (), "empty")
    if not isinstance(output, str):
        try:
            turns = _interpret(output, bare_name_ok=True)
        except _Malformed as exc:
            return ParsedCalls("parse_failure", (), "native", (str(exc),))
        if turns is None:
            return ParsedCalls("parse_failure", (), "native", (f"not a tool-call shape: {type(output).__name__}",))
        return _result(turns, "native", errors)
    text = output.strip()
    if not text:
        return ParsedCalls("no_call", (), "empty")
    attempted = False

    # 1. the whole output is JSON
    if text[0] in "[{":
        try:
            value = _loads(text, work)
        except ValueError:
            value = _NOT_JSON
            attempted = _looks_like_call(text[:2000])
        if value is not _NOT_JSON:
            try:
                turns = _interpret(value)
            except _Malformed as exc:
                return ParsedCalls("parse_failure", (), "json", (str(exc),))
            if turns is not None:
                return _result(turns, "json", errors)
            if isinstance(value, Mapping) and _looks_like_call(text[:2000]) and not _is_trace(value):
                return ParsedCalls("parse_failure", (), "json", ("JSON object is not a tool call",))
            return ParsedCalls("no_call", (), "json")

    # 2. Hermes / Qwen <tool_call> blocks
    if "<tool_call>" in text:
        attempted = True
        turn: list[ToolCall] = []
        pos = 0
        while True:
            start = text.find("<tool_call>", pos)
            if start < 0:
                break
            body_start = start + len("<tool_call>")
            end = text.find("</tool_call>", body_start)
            body = text[body_start:] if end < 0 else text[body_start:end]
            new_pos = len(text) if end < 0 else end + len("</tool_call>")
            work.scanned += new_pos - pos
            pos = new_pos
            try:
                value = _loads(body.strip(), work)
                got = _interpret(value, bare_name_ok=True)
                if got is None:
                    raise _Malformed("<tool_call> block holds no call")
                turn.extend(c for t in got for c in t)
            except ValueError as exc:  # json.JSONDecodeError and _Malformed
                errors.append(f"<tool_call> block: {exc}")
        if turn:
            return _result([turn], "hermes", errors)
        return ParsedCalls("parse_failure", (), "hermes", tuple(errors) or ("empty <tool_call> block",))

    # 3. fenced code blocks
    if "```" in text:
        turn = []
        pos = 0
        while True:
            open_at = text.find("```", pos)
            if open_at < 0:
                break
            line_end = text.find("\n", open_at + 3)
            if line_end < 0:
                break
            lang = text[open_at + 3 : line_end].strip().lower()
            close_at = text.find("```", line_end + 1)
            body = text[line_end + 1 :] if close_at < 0 else text[line_end + 1 : close_at]
            new_pos = len(text) if close_at < 0 else close_at + 3
            work.scanned += new_pos - pos
            pos = new_pos
            stripped = body.strip()
            if lang in ("python", "py", "") and _PY_CALL_START.match(stripped):
                attempted = True
                try:
                    got_py = _parse_python_calls(stripped, work)
                except _Malformed as exc:
                    errors.append(f"fenced Python block: {exc}")
                    continue
                if got_py:
                    turn.extend(got_py)
                else:
                    errors.append("fenced Python block: not a complete call (truncated?)")
                continue
            is_jsonish = lang in ("json", "tool_call", "tool_calls", "") and stripped[:1] in ("[", "{")
            if not is_jsonish:
                continue
            try:
                got = _interpret(_loads(stripped, work))
            except ValueError as exc:
                if lang == "json" or _looks_like_call(stripped[:2000]):
                    attempted = True
                    errors.append(f"fenced block: {exc}")
                continue
            if got is None:
                continue
            attempted = True
            turn.extend(c for t in got for c in t)
        if turn:
            return _result([turn], "fenced", errors)

    # 4. Python call syntax
    try:
        py_calls = _parse_python_calls(text, work)
    except _Malformed as exc:
        return ParsedCalls("parse_failure", (), "python", (str(exc),))
    if py_calls:
        return _result([py_calls], "python", errors)

    # 5. JSON embedded in prose
    turn = []
    for start, end in _json_spans(text, work=work):
        fragment = text[start:end]
        try:
            got = _interpret(_loads(fragment, work))
        except ValueError as exc:
            if _looks_like_call(fragment):
                attempted = True
                errors.append(f"embedded JSON: {exc}")
            continue
        if got is None:
            if _looks_like_call(fragment) and not _is_trace_text(fragment):
                attempted = True
                errors.append("embedded JSON object is not a tool call")
            continue
        turn.extend(c for t in got for c in t)
    if turn:
        return _result([turn], "embedded", errors)
    syntax = attempted_call_syntax(text)
    work.scanned += len(text)
    if attempted or syntax:
        if syntax and not errors:
            errors.append(f"the reply opens a tool call ({syntax} syntax) that cannot be parsed (truncated or malformed)")
        return ParsedCalls("parse_failure", (), "text" if not syntax else syntax, tuple(errors) or ("unparseable tool call",))
    return ParsedCalls("no_call", (), "text", tuple(errors))


_NOT_JSON = object()
_TRACE_KEYS = ("retrieved", "final_prompt", "prompt_ids", "answer", "citations")


def _is_trace(value: Any) -> bool:
    return isinstance(value, Mapping) and (isinstance(value.get("trace"), Mapping) or any(k in value for k in _TRACE_KEYS))


def _is_trace_text(fragment: str) -> bool:
    return any(f'"{k}"' in fragment for k in _TRACE_KEYS)
