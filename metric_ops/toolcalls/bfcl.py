"""Value equality and BFCL's accepted-value rules for tool-call arguments (part of
:mod:`metric_ops.toolcalls`, whose face exports every public name here).

References: Patil et al., *The Berkeley Function Calling Leaderboard* (BFCL, 2024) and
its ``ast_checker`` rules.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from metric_ops.toolcalls.parsing import ToolCall

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
