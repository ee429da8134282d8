"""Tool-call metrics: parsing, argument matching, bipartite call matching, BFCL's AST rules.

Agents fail in ways text metrics miss: the wrong tool, a wrong argument, calls that
should have gone out together, a call that should not have been made at all. Everything
here is deterministic, local and pure (no I/O).

Shapes
------
Offered tools (``sample.metadata["tools"]``): a list of JSON schemas, each either
``{"name", "description", "parameters": {"type", "properties", "required"}}`` (BFCL and
OpenAI ``function`` objects; BFCL writes ``"dict"``/``"float"``/``"tuple"``/``"any"`` as
types), ``{"type": "function", "function": {...}}`` (OpenAI ``tools`` entries) or
``{"name", "input_schema"}`` (Anthropic).

Reference (``sample.metadata["reference_calls"]``): a list of turns, each the list of calls
made in one response: ``[[a, b], [c]]`` means a and b are independent (may be batched
in one response), c comes after them; ``[]`` means no call should be made. Several valid
routes: ``{"any_of": [route, route, ...]}``, each route a list of turns. A call is
``{"name": str, "arguments": {...}}`` or BFCL's ``{name: {...}}``. Under the ``bfcl``
argument mode each reference argument is the list of accepted values (BFCL
``possible_answer``); otherwise it is the literal expected value.

Predictions (``outputs[i]``): a string, parsed by :func:`parse_tool_calls` (native
OpenAI ``tool_calls`` JSON, a list of ``{"name", "arguments"}``, Hermes/Qwen
``<tool_call>`` blocks, fenced JSON, JSON embedded in text, Python call syntax
``[f(a=1)]``). A reply with no call in it is a deliberate no-call; a reply that tried to
make a call that cannot be parsed is a parse failure, reported apart
(``tool_call_parse_failure``).

Argument modes (``arg_match``): ``exact`` (same arguments and values; an argument the
schema declares optional may be omitted, and an extra one equal to its declared default
is allowed), ``subset`` (every reference argument present and equal, extras allowed),
``name`` (function names only), ``bfcl`` (BFCL's accepted-value rules, see
:func:`bfcl_match_call`), ``auto`` (``sample.metadata["arg_match"]``, else ``exact``).
Values compare with :func:`values_equal`: ``1 == 1.0``, ``True != 1``.

References: Patil et al., *The Berkeley Function Calling Leaderboard* (BFCL, 2024) and
its ``ast_checker`` rules; maximum bipartite matching by augmenting paths (Kuhn, 1955).
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths

ARG_MODES: tuple[str, ...] = ("exact", "subset", "name", "bfcl", "auto")

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


class _Malformed(ValueError):
    """A fragment looks like a tool call but cannot be decoded."""


def _loads(text: str) -> Any:
    """``json.loads`` that reports pathological nesting as a ``ValueError``."""
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


def _json_spans(text: str, max_restarts: int = 16) -> Iterator[tuple[int, int]]:
    """(start, end) of top-level balanced ``{...}`` / ``[...]`` spans, string-aware.

    One pass over the text; an opener that never closes (or closes with the wrong
    bracket) restarts the scan one character after it, at most ``max_restarts`` times,
    so the cost stays linear in ``len(text)``.
    """
    n = len(text)
    i = 0
    restarts = 0
    while i < n:
        if text[i] not in "{[":
            i += 1
            continue
        start = i
        stack = [text[i]]
        j = i + 1
        in_str = escaped = closed = False
        while j < n:
            c = text[j]
            if in_str:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c in "{[":
                stack.append(c)
            elif c in "}]":
                if (c == "}") != (stack[-1] == "{"):
                    break
                stack.pop()
                if not stack:
                    closed = True
                    break
            j += 1
        if closed:
            yield start, j + 1
            i = j + 1
        else:
            restarts += 1
            if restarts > max_restarts:
                return
            i = start + 1


def _looks_like_call(fragment: str) -> bool:
    return '"name"' in fragment or "'name'" in fragment or '"function"' in fragment or '"tool_calls"' in fragment


def _dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _parse_python_calls(text: str) -> list[ToolCall] | None:
    """``[f(a=1), g.h(b="x")]`` or ``f(a=1)`` (BFCL's prompt format); None if not that."""
    head = text[:1]
    if not (head == "[" or head.isalpha() or head == "_") or not text.endswith((")", "]")):
        return None
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


def parse_tool_calls(output: Any) -> ParsedCalls:
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
    3. fenced code blocks (```` ```json ... ``` ````) holding one of the JSON shapes;
    4. Python call syntax ``[f(a=1), g(b="x")]`` (BFCL's default prompt format);
    5. JSON objects/arrays embedded in prose (balanced-bracket scan, then ``json.loads``).

    Returns a :class:`ParsedCalls`. Status ``parse_failure`` when the output tried to
    make a call (a ``<tool_call>`` tag, a JSON fence, or a fragment with ``"name"`` /
    ``"function"`` keys) and no call could be decoded; plain prose is ``no_call``.
    Never raises.
    """
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
            value = _loads(text)
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
            pos = len(text) if end < 0 else end + len("</tool_call>")
            try:
                value = _loads(body.strip())
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
            pos = len(text) if close_at < 0 else close_at + 3
            stripped = body.strip()
            is_jsonish = lang in ("json", "tool_call", "tool_calls", "") and stripped[:1] in ("[", "{")
            if not is_jsonish:
                continue
            try:
                got = _interpret(_loads(stripped))
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
        py_calls = _parse_python_calls(text)
    except _Malformed as exc:
        return ParsedCalls("parse_failure", (), "python", (str(exc),))
    if py_calls:
        return _result([py_calls], "python", errors)

    # 5. JSON embedded in prose
    turn = []
    for start, end in _json_spans(text):
        fragment = text[start:end]
        try:
            got = _interpret(_loads(fragment))
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
    if attempted:
        return ParsedCalls("parse_failure", (), "text", tuple(errors) or ("unparseable tool call",))
    return ParsedCalls("no_call", (), "text", tuple(errors))


_NOT_JSON = object()
_TRACE_KEYS = ("retrieved", "final_prompt", "prompt_ids", "answer", "citations")


def _is_trace(value: Any) -> bool:
    return isinstance(value, Mapping) and (isinstance(value.get("trace"), Mapping) or any(k in value for k in _TRACE_KEYS))


def _is_trace_text(fragment: str) -> bool:
    return any(f'"{k}"' in fragment for k in _TRACE_KEYS)


# ============================================================================ tools and references


def normalize_tools(tools: Any) -> dict[str, dict[str, Any]]:
    """``{name: {"properties": {...}, "required": [...], "additional": bool}}`` from a list
    of tool schemas (BFCL/OpenAI function objects, OpenAI ``tools`` entries, Anthropic
    ``input_schema``). Entries without a name are skipped; ``None`` gives ``{}``."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        if isinstance(tool.get("function"), Mapping):
            tool = tool["function"]
        name = tool.get("name")
        if not isinstance(name, str):
            continue
        params = tool.get("parameters") or tool.get("input_schema") or {}
        props = params.get("properties") or {}
        extra = params.get("additionalProperties", False)
        out[name] = {
            "properties": dict(props),
            "required": list(params.get("required") or []),
            "additional": bool(extra),
        }
    return out


def _call_from_reference(obj: Any) -> ToolCall:
    call = _as_call(obj, bare_name_ok=True) if isinstance(obj, Mapping) else None
    if call is None:
        raise ValueError(f"reference call {obj!r} is neither {{name, arguments}} nor {{name: arguments}}")
    return call


def reference_routes(reference: Any) -> list[list[list[ToolCall]]]:
    """The valid routes of a reference: a list of routes, each a list of turns of calls.

    ``reference`` is a list of turns (``[]`` = no call), a flat list of calls (read as
    one turn), or ``{"any_of": [route, ...]}``. Raises ``ValueError`` on another shape.
    """
    if isinstance(reference, Mapping):
        if "any_of" not in reference:
            raise ValueError("reference_calls mapping must be {'any_of': [route, ...]}")
        routes = reference["any_of"]
        if not isinstance(routes, list) or not routes:
            raise ValueError("reference_calls any_of must be a non-empty list of routes")
        return [_route(r) for r in routes]
    return [_route(reference)]


def _route(route: Any) -> list[list[ToolCall]]:
    if not isinstance(route, list):
        raise ValueError(f"a reference route must be a list of turns, got {type(route).__name__}")
    if route and all(isinstance(t, Mapping) for t in route):
        route = [route]  # a flat list of calls is one turn
    turns = []
    for turn in route:
        if not isinstance(turn, list):
            raise ValueError(f"a reference turn must be a list of calls, got {type(turn).__name__}")
        if turn:
            turns.append([_call_from_reference(c) for c in turn])
    return turns


# ============================================================================ value matching


def values_equal(a: Any, b: Any) -> bool:
    """Deep JSON value equality: numbers by value (``1 == 1.0``), booleans strict
    (``True != 1``), strings exact, lists element-wise, objects key-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return a is None and b is None


def match_call(
    pred: ToolCall, gold: ToolCall, mode: str, tools: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[bool, str]:
    """Whether ``pred`` satisfies reference call ``gold`` under argument mode ``mode``
    (``exact``, ``subset``, ``name`` or ``bfcl``); returns ``(ok, reason)``.

    ``tools`` is :func:`normalize_tools` output; without it no argument counts as
    optional (exact/subset) and BFCL types are inferred from the accepted values.
    Raises ``ValueError`` for an unknown mode.
    """
    if mode == "bfcl":
        return bfcl_match_call(pred, gold, (tools or {}).get(gold.name))
    if mode not in ("exact", "subset", "name"):
        raise ValueError(f"unknown argument mode {mode!r}; use one of {ARG_MODES}")
    if pred.name != gold.name:
        return False, f"function {pred.name!r} is not {gold.name!r}"
    if mode == "name":
        return True, ""
    schema = (tools or {}).get(gold.name) or {}
    required = set(schema.get("required") or ())
    props = schema.get("properties") or {}
    for key, expected in gold.arguments.items():
        if key not in pred.arguments:
            if schema and key in props and key not in required:
                continue  # declared optional: may be omitted
            return False, f"missing argument {key!r}"
        if not values_equal(pred.arguments[key], expected):
            return False, f"argument {key!r} is {pred.arguments[key]!r}, expected {expected!r}"
    if mode == "exact":
        for key, value in pred.arguments.items():
            if key in gold.arguments:
                continue
            spec = props.get(key)
            if isinstance(spec, Mapping) and key not in required and "default" in spec and values_equal(value, spec["default"]):
                continue  # an optional argument spelled out at its declared default
            return False, f"unexpected argument {key!r}"
    return True, ""


# ---------------------------------------------------------------------------- BFCL rules

BFCL_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_BFCL_STRIP = str.maketrans("", "", " ,./-_*^")


def bfcl_standardize(text: str) -> str:
    """BFCL's string normalisation: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``
    (so ``"April 1, 2024"`` matches ``"april 1 2024"``)."""
    return text.translate(_BFCL_STRIP).lower().replace("'", '"')


def _first_type(accepted: Sequence[Any]) -> type | None:
    for a in accepted:
        if not (isinstance(a, str) and a == ""):
            return type(a)
    return None


def _loose_equal(value: Any, acc: Any) -> bool:
    """BFCL value comparison inside dicts and lists: strings standardised, numbers by
    value, booleans strict, containers recursive."""
    if isinstance(value, str) and isinstance(acc, str):
        return bfcl_standardize(value) == bfcl_standardize(acc)
    if isinstance(value, Mapping) and isinstance(acc, Mapping):
        return _bfcl_dict_ok(value, [acc])[0]
    if isinstance(value, list) and isinstance(acc, list):
        return len(value) == len(acc) and all(_loose_equal(v, a) for v, a in zip(value, acc))
    return values_equal(value, acc)


def _bfcl_dict_ok(value: Mapping[str, Any], accepted: Sequence[Any]) -> tuple[bool, str]:
    """A dict argument against accepted dicts ``{key: [accepted values]}`` (recursive:
    a nested dict is checked against the accepted dicts listed for its key)."""
    reason = "no accepted dict"
    for acc in accepted:
        if not isinstance(acc, Mapping):
            continue
        ok = True
        for key, v in value.items():
            if key not in acc:
                ok, reason = False, f"unexpected dict key {key!r}"
                break
            options = acc[key] if isinstance(acc[key], list) else [acc[key]]
            if isinstance(v, Mapping):
                nested = [o for o in options if isinstance(o, Mapping)]
                if nested and _bfcl_dict_ok(v, nested)[0]:
                    continue
            if not any(_loose_equal(v, o) for o in options):
                ok, reason = False, f"dict value {key!r}={v!r} not accepted"
                break
        if ok:
            for key, options in acc.items():
                if key not in value and not (isinstance(options, list) and "" in options):
                    ok, reason = False, f"missing dict key {key!r}"
                    break
        if ok:
            return True, ""
    return False, reason


def _bfcl_type_ok(value: Any, accepted: Sequence[Any], expected: type | None, items: type | None) -> tuple[bool, bool]:
    """BFCL's type check: (valid, is_variable). A value whose type differs from the
    schema's is still valid when it has the type of the accepted values (BFCL's
    "variable" case). Items of a list are checked against each accepted list."""
    acc_type = _first_type(accepted)
    is_variable = acc_type is not None and expected is not None and acc_type is not expected
    if expected is None or type(value) is expected:
        if items is None or expected is None:
            return True, is_variable
        for acc in accepted:
            if isinstance(acc, list):
                item_type = _first_type(acc)
                if all(type(v) is items or (item_type is not None and type(v) is item_type) for v in value):
                    return True, is_variable
        return False, is_variable
    if acc_type is not None and type(value) is acc_type:
        return True, True
    return False, is_variable


def bfcl_check_argument(value: Any, accepted: Sequence[Any], spec: Mapping[str, Any] | None) -> tuple[bool, str]:
    """One argument against BFCL's accepted values; ``spec`` is its schema property
    (``{"type", "items"}``) or None (type inferred from the accepted values).

    Rules (BFCL ``ast_checker``): the value's type must be the schema type (an int is
    accepted for a scalar ``float``, not inside a list of floats; booleans are strict);
    strings compare after :func:`bfcl_standardize`; lists compare element-wise with
    strings standardised; dicts key by key against the accepted dicts (recursively);
    anything else must equal an accepted value.
    """
    schema_type = (spec or {}).get("type")
    if isinstance(schema_type, list):
        schema_type = next((t for t in schema_type if t != "null"), None)
    expected = BFCL_TYPES.get(schema_type) if isinstance(schema_type, str) else None
    if expected is None:
        expected = _first_type(accepted)
    items = None
    if schema_type in ("array", "tuple"):
        item_spec = (spec or {}).get("items")
        if isinstance(item_spec, Mapping):
            items = BFCL_TYPES.get(item_spec.get("type"))
    if isinstance(value, tuple):
        value = list(value)
    if expected is float and type(value) is int:
        value = float(value)  # Python's int -> float promotion, scalars only
    if not accepted:
        return False, "the possible answer accepts no value for it (unsatisfiable)"
    ok, is_variable = _bfcl_type_ok(value, accepted, expected, items)
    if not ok:
        return False, f"type {type(value).__name__} does not match schema type {schema_type or '?'}"
    if not is_variable:
        if expected is dict and isinstance(value, Mapping):
            return _bfcl_dict_ok(value, accepted)
        if expected is list and items is dict:
            for acc in accepted:
                if isinstance(acc, list) and len(acc) == len(value) and all(
                    isinstance(v, Mapping) and _bfcl_dict_ok(v, [a])[0] for v, a in zip(value, acc)
                ):
                    return True, ""
            return False, f"list of dicts {value!r} not accepted"
        if expected is str and isinstance(value, str):
            target = bfcl_standardize(value)
            if any(isinstance(a, str) and bfcl_standardize(a) == target for a in accepted):
                return True, ""
            return False, f"{value!r} not in {list(accepted)!r}"
        if expected is list and isinstance(value, list):
            if any(isinstance(a, list) and _loose_equal(value, a) for a in accepted):
                return True, ""
            return False, f"{value!r} not in {list(accepted)!r}"
    if any(values_equal(value, a) for a in accepted):
        return True, ""
    return False, f"{value!r} not in {list(accepted)!r}"


def bfcl_match_call(pred: ToolCall, gold: ToolCall, schema: Mapping[str, Any] | None) -> tuple[bool, str]:
    """BFCL's ``simple_function_checker`` for one call: same name; every required
    parameter present; no parameter outside the schema or the possible answer; each
    value accepted (:func:`bfcl_check_argument`); a possible-answer parameter omitted
    only when ``""`` is among its accepted values. ``gold.arguments`` maps each
    parameter to its list of accepted values; ``schema`` is a :func:`normalize_tools`
    entry or None (then only the possible answer constrains the call)."""
    if pred.name != gold.name:
        return False, f"function {pred.name!r} is not {gold.name!r}"
    props = (schema or {}).get("properties") or {}
    for param in (schema or {}).get("required") or ():
        if param not in pred.arguments:
            return False, f"missing required parameter {param!r}"
    for param, value in pred.arguments.items():
        if param not in gold.arguments or (schema is not None and param not in props):
            return False, f"unexpected parameter {param!r}"
        accepted = gold.arguments[param]
        accepted = accepted if isinstance(accepted, list) else [accepted]
        ok, reason = bfcl_check_argument(value, accepted, props.get(param))
        if not ok:
            return False, f"parameter {param!r}: {reason}"
    for param, accepted in gold.arguments.items():
        if param not in pred.arguments and not (isinstance(accepted, list) and "" in accepted):
            return False, f"parameter {param!r} omitted and not optional"
    return True, ""


# ============================================================================ matching


def max_bipartite_matching(compatible: Sequence[Sequence[bool]]) -> list[tuple[int, int]]:
    """Maximum-cardinality matching of a bipartite graph (Kuhn's augmenting paths).

    ``compatible[i][j]`` says whether left item i may pair with right item j. Returns
    the sorted ``(i, j)`` pairs; O(V·E), fine for the tens of calls in one sample.
    Unlike a greedy first-fit pass it never misses a matching that exists.
    """
    n_left = len(compatible)
    n_right = len(compatible[0]) if n_left else 0
    owner = [-1] * n_right

    def augment(u: int, seen: list[bool]) -> bool:
        for v in range(n_right):
            if compatible[u][v] and not seen[v]:
                seen[v] = True
                if owner[v] == -1 or augment(owner[v], seen):
                    owner[v] = u
                    return True
        return False

    for u in range(n_left):
        augment(u, [False] * n_right)
    return sorted((u, v) for v, u in enumerate(owner) if u != -1)


def _compat(preds: Sequence[ToolCall], golds: Sequence[ToolCall], mode: str, tools: Mapping[str, Any]) -> list[list[bool]]:
    return [[match_call(p, g, mode, tools)[0] for g in golds] for p in preds]


def _turn_matches(preds: Sequence[ToolCall], golds: Sequence[ToolCall], mode: str, tools: Mapping[str, Any]) -> bool:
    return len(preds) == len(golds) and len(max_bipartite_matching(_compat(preds, golds, mode, tools))) == len(golds)


def _in_order(pred_turns: Sequence[Sequence[ToolCall]], gold_turns: Sequence[Sequence[ToolCall]], mode: str, tools: Mapping[str, Any]) -> bool:
    """Every reference call is made, each reference turn strictly after the previous one
    (calls of one reference turn may spread over responses); extra calls are allowed.
    Greedy on the earliest response that completes each reference turn, which is
    optimal because a smaller cut-off leaves a superset of choices for later turns."""
    flat = [(t, c) for t, turn in enumerate(pred_turns) for c in turn]
    last = -1
    for gold_turn in gold_turns:
        done = False
        for cutoff in range(last + 1, len(pred_turns)):
            window = [c for t, c in flat if last < t <= cutoff]
            if len(window) < len(gold_turn):
                continue
            if len(max_bipartite_matching(_compat(window, gold_turn, mode, tools))) == len(gold_turn):
                last, done = cutoff, True
                break
        if not done:
            return False
    return True


@dataclass
class RouteEvaluation:
    """Every tool-call number for one predicted trajectory against one reference route
    (``None`` = not defined for this pair, see :class:`ToolCallMetrics`)."""

    precision: float | None
    recall: float | None
    f1: float | None
    exact_set: float
    parallel_precision: float | None
    parallel_recall: float | None
    strict: float
    in_order: float | None
    matched: list[tuple[int, int]]
    redundant: list[int]
    unmatched_reasons: dict[int, str]

    def key(self, index: int) -> tuple[float, float, float, int]:
        """Route-choice key (higher wins): call F1 (1.0 when both are empty), strict
        trajectory, in-order trajectory, then the earlier route."""
        f1 = self.f1 if self.f1 is not None else self.exact_set
        return (f1, self.strict, self.in_order or 0.0, -index)


def evaluate_route(
    pred_turns: Sequence[Sequence[ToolCall]],
    gold_turns: Sequence[Sequence[ToolCall]],
    mode: str,
    tools: Mapping[str, Any] | None = None,
) -> RouteEvaluation:
    """Score predicted turns against one reference route (see :class:`ToolCallMetrics`)."""
    tools = tools or {}
    preds = [(t, c) for t, turn in enumerate(pred_turns) for c in turn]
    golds = [(t, c) for t, turn in enumerate(gold_turns) for c in turn]
    compat = _compat([c for _, c in preds], [c for _, c in golds], mode, tools)
    matched = max_bipartite_matching(compat)
    m, n_pred, n_gold = len(matched), len(preds), len(golds)
    if n_gold:
        precision = m / n_pred if n_pred else 0.0
        recall = m / n_gold
        f1 = 2 * m / (n_pred + n_gold)
    else:
        precision = recall = f1 = None
    exact_set = float(m == n_pred == n_gold)
    p2g = dict(matched)
    g2p = {g: p for p, g in matched}
    gold_pairs = [(a, b) for a in range(n_gold) for b in range(a + 1, n_gold) if golds[a][0] == golds[b][0]]
    pred_pairs = [(a, b) for a in range(n_pred) for b in range(a + 1, n_pred) if preds[a][0] == preds[b][0]]
    parallel_recall = (
        sum(1 for a, b in gold_pairs if a in g2p and b in g2p and preds[g2p[a]][0] == preds[g2p[b]][0]) / len(gold_pairs)
        if gold_pairs
        else None
    )
    parallel_precision = (
        sum(1 for a, b in pred_pairs if a in p2g and b in p2g and golds[p2g[a]][0] == golds[p2g[b]][0]) / len(pred_pairs)
        if pred_pairs
        else None
    )
    strict = float(
        len(pred_turns) == len(gold_turns)
        and all(_turn_matches(p, g, mode, tools) for p, g in zip(pred_turns, gold_turns))
    )
    in_order = float(_in_order(pred_turns, gold_turns, mode, tools)) if n_gold else None
    redundant = []
    for i in range(n_pred):
        if i in p2g:
            continue
        call = preds[i][1]
        if any(preds[j][1].name == call.name and values_equal(preds[j][1].arguments, call.arguments) for j in range(i)):
            redundant.append(i)
    reasons = {}
    for j in range(n_gold):
        if j in g2p:
            continue
        gold = golds[j][1]
        same_name = [c for _, c in preds if c.name == gold.name]
        reasons[j] = match_call(same_name[0], gold, mode, tools)[1] if same_name else f"no call to {gold.name!r}"
    return RouteEvaluation(
        precision, recall, f1, exact_set, parallel_precision, parallel_recall, strict, in_order, matched, redundant, reasons
    )


def choose_route(
    pred_turns: Sequence[Sequence[ToolCall]],
    routes: Sequence[Sequence[Sequence[ToolCall]]],
    mode: str,
    tools: Mapping[str, Any] | None = None,
) -> tuple[int, RouteEvaluation]:
    """The reference route a prediction is scored against, with its evaluation.

    Key (documented, the same for every tool-call score): highest call F1 (1.0 when the
    route and the prediction are both empty), then strict trajectory match, then
    in-order match, then the earliest route. Raises ``ValueError`` on no routes.
    """
    if not routes:
        raise ValueError("no reference route to choose from")
    best: tuple[int, RouteEvaluation] | None = None
    for i, route in enumerate(routes):
        ev = evaluate_route(pred_turns, route, mode, tools)
        if best is None or ev.key(i) > best[1].key(best[0]):
            best = (i, ev)
    assert best is not None
    return best


# ============================================================================ schema validity

_JSON_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "tuple": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
    "dict": lambda v: isinstance(v, Mapping),
    "null": lambda v: v is None,
    "any": lambda v: True,
}


def _value_fits(value: Any, spec: Any, path: str) -> str:
    """'' when ``value`` fits the JSON-schema fragment ``spec``, else the reason."""
    if not isinstance(spec, Mapping):
        return ""
    types = spec.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    known = [t for t in types if t in _JSON_TYPES]
    if known and not any(_JSON_TYPES[t](value) for t in known):
        return f"{path} is {type(value).__name__}, schema type {spec.get('type')}"
    if "enum" in spec and isinstance(spec["enum"], list):
        # an enum declared on an array property constrains its items (as BFCL's schemas use it)
        options = value if isinstance(value, list) and not any(isinstance(e, list) for e in spec["enum"]) else [value]
        bad = [v for v in options if not any(values_equal(v, e) for e in spec["enum"])]
        if bad:
            return f"{path}={bad[0]!r} not in enum"
    if isinstance(value, list) and isinstance(spec.get("items"), Mapping):
        for i, item in enumerate(value):
            reason = _value_fits(item, spec["items"], f"{path}[{i}]")
            if reason:
                return reason
    if isinstance(value, Mapping) and isinstance(spec.get("properties"), Mapping):
        props = spec["properties"]
        for key in spec.get("required") or ():
            if key not in value:
                return f"{path}.{key} is required"
        for key, item in value.items():
            if key in props:
                reason = _value_fits(item, props[key], f"{path}.{key}")
                if reason:
                    return reason
    return ""


def validate_call(call: ToolCall, tools: Mapping[str, Mapping[str, Any]]) -> tuple[bool, str]:
    """Whether ``call`` is valid against the offered tools (:func:`normalize_tools`):
    the function is offered, every required parameter is present, no undeclared
    parameter (unless the schema allows additional properties), each value has its
    declared type (BFCL's ``float``/``dict``/``tuple``/``any`` spellings included; an
    int is a valid number, a bool is not) and respects ``enum``. Returns (ok, reason)."""
    schema = tools.get(call.name)
    if schema is None:
        return False, f"function {call.name!r} is not offered"
    for key in schema["required"]:
        if key not in call.arguments:
            return False, f"missing required parameter {key!r}"
    props = schema["properties"]
    for key, value in call.arguments.items():
        if key not in props:
            if schema["additional"]:
                continue
            return False, f"undeclared parameter {key!r}"
        reason = _value_fits(value, props[key], key)
        if reason:
            return False, reason
    return True, ""


# ============================================================================ metrics


def _resolve_mode(mode: str, sample: Sample) -> str:
    if mode == "auto":
        mode = str(sample.metadata.get("arg_match") or "exact")
    if mode not in ARG_MODES or mode == "auto":
        raise ValueError(f"unknown argument mode {mode!r}; use one of {ARG_MODES[:-1]}")
    return mode


def _score(value: float | None, reason: str, **detail: Any) -> Score:
    return Score(value, detail=detail) if value is not None else Score.unscored(reason, **detail)


class ToolCallMetrics(Metric):
    """Tool-call correctness of one response (or trajectory) against reference calls.

    Inputs: ``outputs[i]`` (parsed by :func:`parse_tool_calls`),
    ``sample.metadata["reference_calls"]`` (turns, or ``{"any_of": [routes]}``),
    ``sample.metadata["tools"]`` (offered schemas; needed for validity, for optional
    arguments in ``exact``/``subset`` mode and for BFCL's type rules). Parameter
    ``arg_match`` (``auto``/``exact``/``subset``/``name``/``bfcl``; see module doc).

    Scores, each in [0, 1]:

    - ``tool_call_precision`` / ``tool_call_recall`` / ``tool_call_f1``: matched calls
      over predicted / reference / their mean, with a maximum bipartite matching of
      predicted to reference calls (not greedy). Unscored when the reference expects
      no call (``tool_irrelevance`` scores that); with no predicted call precision is 0.
    - ``tool_call_exact_set``: 1 when the predicted calls and the reference calls match
      one to one (turn grouping ignored); both empty -> 1.
    - ``parallel_call_precision`` / ``parallel_call_recall``: over pairs of calls made in
      one response (batched). Recall: reference same-turn pairs whose matched calls were
      also batched together; precision: predicted same-response pairs that the reference
      puts in one turn (a pair with an unmatched call counts as wrong). Unscored when
      there is no such pair (e.g. a serialised prediction has no predicted pair).
    - ``trajectory_strict``: same number of turns, and each turn's calls match one to one.
    - ``trajectory_in_order``: every reference turn is made after the previous one;
      calls inside a reference turn may come in any order or response; extra calls are
      allowed. Unscored when the reference expects no call.
    - ``tool_call_validity``: predicted calls valid against the offered schemas
      (:func:`validate_call`). Unscored without tools or without predicted calls.
    - ``tool_call_redundancy`` (minimise): predicted calls that repeat an earlier
      predicted call (same name, equal arguments) and match no reference call, over all
      predicted calls. Unscored without predicted calls.
    - ``tool_irrelevance``: when the reference expects no call, 1 for a deliberate
      no-call, 0 for a call or an unparseable reply; unscored otherwise.
    - ``tool_call_parse_failure`` (minimise): 1 when the reply tried to call and could
      not be parsed. A parse failure also counts as no predicted call, with
      ``tool_call_exact_set`` and both trajectory scores 0.

    With ``any_of``, one route is chosen per sample by :func:`choose_route` and every
    score uses it; ``detail.route`` records its index. Without ``reference_calls`` the
    reference-based scores are unscored, naming the missing input.
    """

    name = "tool_calls"
    binary_scores = ("tool_call_exact_set", "trajectory_strict", "trajectory_in_order", "tool_irrelevance", "tool_call_parse_failure")
    direction = Direction.MAXIMIZE
    score_directions = {
        "tool_call_precision": Direction.MAXIMIZE,
        "tool_call_recall": Direction.MAXIMIZE,
        "tool_call_f1": Direction.MAXIMIZE,
        "tool_call_exact_set": Direction.MAXIMIZE,
        "parallel_call_precision": Direction.MAXIMIZE,
        "parallel_call_recall": Direction.MAXIMIZE,
        "trajectory_strict": Direction.MAXIMIZE,
        "trajectory_in_order": Direction.MAXIMIZE,
        "tool_call_validity": Direction.MAXIMIZE,
        "tool_call_redundancy": Direction.MINIMIZE,
        "tool_irrelevance": Direction.MAXIMIZE,
        "tool_call_parse_failure": Direction.MINIMIZE,
    }
    aliases = ("toolcalls", "tool_call_metrics")
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def __init__(self, arg_match: str = "auto") -> None:
        if arg_match not in ARG_MODES:
            raise ValueError(f"unknown arg_match {arg_match!r}; use one of {ARG_MODES}")
        super().__init__(arg_match=arg_match)
        self.arg_match = arg_match

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [self.score_one(s, o) for s, o in zip(samples, outputs)]

    def score_one(self, sample: Sample, output: Any) -> dict[str, Score]:
        """All tool-call scores for one sample (see the class docstring)."""
        parsed = parse_tool_calls(output)
        failed = parsed.status == "parse_failure"
        tools = normalize_tools(sample.metadata.get("tools"))
        pred_calls = parsed.calls
        base = {
            "parse_status": parsed.status,
            "parse_source": parsed.source,
            "predicted": [c.to_dict() for c in pred_calls],
        }
        if parsed.errors:
            base["parse_errors"] = list(parsed.errors)[:5]
        out: dict[str, Score] = {
            "tool_call_parse_failure": Score(float(failed), detail=base),
        }
        if not tools:
            out["tool_call_validity"] = Score.unscored("sample has no metadata.tools (offered tool schemas)")
        elif not pred_calls:
            out["tool_call_validity"] = Score.unscored("no predicted call to validate", parse_status=parsed.status)
        else:
            checks = [validate_call(c, tools) for c in pred_calls]
            invalid = {i: r for i, (ok, r) in enumerate(checks) if not ok}
            out["tool_call_validity"] = Score(1 - len(invalid) / len(checks), detail={"invalid": invalid})

        reference = sample.metadata.get("reference_calls")
        ref_names = [n for n in self.score_directions if n not in out]
        if reference is None:
            for n in ref_names:
                out[n] = Score.unscored("sample has no metadata.reference_calls")
            if "tool_call_redundancy" not in out:
                out["tool_call_redundancy"] = Score.unscored("sample has no metadata.reference_calls")
            return out
        mode = _resolve_mode(self.arg_match, sample)
        routes = reference_routes(reference)
        route_index, ev = choose_route(parsed.turns, routes, mode, tools)
        gold_empty = not any(routes[route_index])
        detail = {"route": route_index, "n_routes": len(routes), "arg_match": mode, "matched": ev.matched}
        if ev.unmatched_reasons:
            detail["unmatched_reference"] = {str(k): v for k, v in ev.unmatched_reasons.items()}
        no_call_reason = "reference expects no call (see tool_irrelevance)"
        out["tool_call_precision"] = _score(ev.precision, no_call_reason, **detail)
        out["tool_call_recall"] = _score(ev.recall, no_call_reason, **detail)
        out["tool_call_f1"] = _score(ev.f1, no_call_reason, **detail)
        out["tool_call_exact_set"] = Score(0.0 if failed else ev.exact_set, detail=detail)
        out["parallel_call_precision"] = _score(ev.parallel_precision, "prediction batches no two calls in one response", **detail)
        out["parallel_call_recall"] = _score(ev.parallel_recall, "reference has no two calls in one turn", **detail)
        out["trajectory_strict"] = Score(0.0 if failed else ev.strict, detail=detail)
        out["trajectory_in_order"] = (
            Score(0.0 if failed else ev.in_order, detail=detail) if ev.in_order is not None else Score.unscored(no_call_reason, **detail)
        )
        out["tool_call_redundancy"] = (
            Score(len(ev.redundant) / len(pred_calls), detail={"redundant": ev.redundant, **detail})
            if pred_calls
            else Score.unscored("no predicted call", parse_status=parsed.status)
        )
        out["tool_irrelevance"] = (
            Score(float(parsed.status == "no_call"), detail={"parse_status": parsed.status, **detail})
            if gold_empty
            else Score.unscored("reference expects a call; irrelevance is scored only when it expects none", **detail)
        )
        return out


BFCL_CATEGORIES: tuple[str, ...] = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple")


def bfcl_verdict(category: str, output: Any, reference: Any, tools: Any) -> tuple[bool, str]:
    """BFCL's AST verdict for one single-turn sample; returns (valid, reason).

    - ``irrelevance``: valid when the reply makes no call (a reply that cannot be decoded
      into calls also passes, as in BFCL);
    - ``simple``/``simple_python``/``live_simple``/``multiple``: exactly one call, which
      satisfies :func:`bfcl_match_call` against the single reference call;
    - ``parallel``/``parallel_multiple`` (and any other category): as many calls as the
      reference, paired one to one by a maximum bipartite matching (BFCL pairs greedily
      in reference order; the two agree unless greedy misses an existing pairing).

    ``reference`` is the sample's ``reference_calls``; ``tools`` the offered schemas.
    """
    parsed = parse_tool_calls(output)
    if category.startswith("irrelevance") or category.endswith("irrelevance"):
        return (parsed.status != "calls", "" if parsed.status != "calls" else "made a call")
    if parsed.status != "calls":
        return False, f"no decodable call ({parsed.status})"
    schemas = normalize_tools(tools)
    routes = reference_routes(reference)
    golds = [c for turn in routes[0] for c in turn]
    preds = parsed.calls
    if len(preds) != len(golds):
        return False, f"wrong number of functions: {len(preds)} for {len(golds)}"
    if len(golds) == 1:
        return bfcl_match_call(preds[0], golds[0], schemas.get(golds[0].name))
    compat = [[bfcl_match_call(p, g, schemas.get(g.name))[0] for g in golds] for p in preds]
    matched = max_bipartite_matching(compat)
    if len(matched) != len(golds):
        return False, f"only {len(matched)} of {len(golds)} calls could be paired with a reference call"
    return True, ""


class BFCLAstAccuracy(Metric):
    """BFCL AST accuracy (Patil et al., 2024, Berkeley Function Calling Leaderboard):
    1.0 when the reply passes BFCL's checker for the sample's category, else 0.0.

    Inputs: ``sample.metadata["category"]`` (``simple_python``, ``multiple``,
    ``parallel``, ``parallel_multiple``, ``irrelevance``, ``live_simple``),
    ``reference_calls`` (accepted values per argument, as the BFCL loader writes them)
    and ``tools``. Rules: :func:`bfcl_verdict` / :func:`bfcl_match_call`. Unscored
    without a category or (except irrelevance) without reference calls.
    """

    name = "bfcl_ast_accuracy"
    binary = True
    aliases = ("bfcl_accuracy", "bfcl")
    direction = Direction.MAXIMIZE
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            category = sample.metadata.get("category")
            reference = sample.metadata.get("reference_calls")
            if not category:
                results.append({self.name: Score.unscored("sample has no metadata.category (BFCL test category)")})
                continue
            if reference is None and "irrelevance" not in str(category):
                results.append({self.name: Score.unscored("sample has no metadata.reference_calls")})
                continue
            ok, reason = bfcl_verdict(str(category), output, reference or [], sample.metadata.get("tools"))
            results.append({self.name: Score(float(ok), detail={"category": category, "reason": reason})})
        return results
