"""Matching predicted tool calls to reference calls: offered tools, reference routes,
argument modes, maximum bipartite matching, trajectories and schema validity (part of
:mod:`metric_ops.toolcalls`, whose face exports every public name here).

References: maximum bipartite matching by augmenting paths (Kuhn, 1955); BFCL's rules
in :mod:`metric_ops.toolcalls.bfcl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from metric_ops.toolcalls.bfcl import bfcl_match_call, values_equal
from metric_ops.toolcalls.parsing import ToolCall, _as_call

ARG_MODES: tuple[str, ...] = ("exact", "subset", "name", "bfcl", "auto")

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


# ============================================================================ argument modes


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
