"""Known-answer tests for tool-call parsing, matching and metrics (metric_ops.toolcalls)."""

from __future__ import annotations

import json

import pytest

from metric_ops.base import Sample
from metric_ops.registry import get_metric
from metric_ops.toolcalls import (
    BFCLAstAccuracy,
    ToolCall,
    ToolCallMetrics,
    bfcl_match_call,
    bfcl_standardize,
    bfcl_verdict,
    choose_route,
    match_call,
    max_bipartite_matching,
    normalize_tools,
    ParseWork,
    parse_tool_calls,
    reference_routes,
    validate_call,
    values_equal,
)

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer"},
        },
        "required": ["city"],
    },
}
TIME = {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
TOOLS = [WEATHER, TIME]


def call(name, **args):
    return {"name": name, "arguments": args}


def sample(reference, tools=TOOLS, **meta):
    md = {"tools": tools, **meta}
    if reference is not None:
        md["reference_calls"] = reference
    return Sample("s1", "q", metadata=md)


def score(reference, output, tools=TOOLS, arg_match="auto", **meta):
    return ToolCallMetrics(arg_match=arg_match).score_batch([sample(reference, tools, **meta)], [output])[0]


def values(scores):
    return {k: v.value for k, v in scores.items()}


# ----------------------------------------------------------------------------- parsing


def test_parse_openai_tool_calls_with_json_string_arguments():
    out = json.dumps([{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}])
    parsed = parse_tool_calls(out)
    assert parsed.status == "calls" and parsed.source == "json"
    assert parsed.calls == [ToolCall("get_weather", {"city": "Oslo"})]


def test_parse_openai_message_and_empty_tool_calls_is_a_deliberate_no_call():
    msg = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "get_time", "arguments": "{}"}}]}
    assert parse_tool_calls(json.dumps(msg)).calls == [ToolCall("get_time", {})]
    assert parse_tool_calls(json.dumps({"role": "assistant", "content": "hi", "tool_calls": []})).status == "no_call"
    assert parse_tool_calls("[]").status == "no_call"


def test_parse_name_arguments_list_and_native_object():
    assert parse_tool_calls(json.dumps([call("a", x=1), call("b")])).calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    native = [{"name": "a", "arguments": {"x": 1}}]
    assert parse_tool_calls(native).calls == [ToolCall("a", {"x": 1})]
    assert parse_tool_calls(json.dumps([{"a": {"x": 1}}])).calls == [ToolCall("a", {"x": 1})]  # BFCL shape


def test_parse_hermes_blocks():
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n<tool_call>{"name": "get_time", "arguments": {"tz": "CET"}}</tool_call>'
    parsed = parse_tool_calls(text)
    assert parsed.source == "hermes"
    assert [c.name for c in parsed.calls] == ["get_weather", "get_time"]


def test_parse_fenced_and_embedded_json():
    fenced = 'Here you go:\n```json\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```\nDone.'
    assert parse_tool_calls(fenced).calls == [ToolCall("get_time", {"tz": "UTC"})]
    embedded = 'I will call {"name": "get_time", "arguments": {"tz": "UTC"}} now.'
    parsed = parse_tool_calls(embedded)
    assert parsed.source == "embedded" and parsed.calls == [ToolCall("get_time", {"tz": "UTC"})]


def test_parse_python_call_syntax():
    parsed = parse_tool_calls('[get_weather(city="Oslo", days=3), math.hypot(x=[1, 2])]')
    assert parsed.source == "python"
    assert parsed.calls == [ToolCall("get_weather", {"city": "Oslo", "days": 3}), ToolCall("math.hypot", {"x": [1, 2]})]
    assert parse_tool_calls("[f(1, 2)]").status == "parse_failure"  # positional arguments


def test_parse_trajectory_turns():
    parsed = parse_tool_calls(json.dumps({"turns": [[call("a")], [], [call("b"), call("c")]]}))
    assert [[c.name for c in t] for t in parsed.turns] == [["a"], ["b", "c"]]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_time", "arguments": {"tz": "UTC"}',  # unclosed
        '<tool_call>{"name": "get_time", "arguments": {tz: UTC}}</tool_call>',  # not JSON
        '[{"type": "function", "function": {"name": "get_time", "arguments": "{tz=UTC"}}]',  # bad argument string
        "```json\n{\"name\": \"get_time\", \"arguments\": \n```",
        "Calling now: {\"name\": \"get_time\", 'arguments': {}}",
    ],
)
def test_unparseable_calls_are_parse_failures(text):
    assert parse_tool_calls(text).status == "parse_failure"


@pytest.mark.parametrize("text", ["", "   ", "The weather in Oslo is mild [1].", "Use a set like {a, b} in maths.", None])
def test_prose_is_a_deliberate_no_call(text):
    assert parse_tool_calls(text).status == "no_call"


ADVERSARIAL = (
    lambda n: "{" * n,
    lambda n: "[" * n + "]",
    lambda n: '{"name": ' * (n // 9),
    lambda n: "<tool_call>" * (n // 11),
    lambda n: "```\n" * (n // 4),
    lambda n: "```python\nf(a=" * (n // 14),
    lambda n: "get_weather(city=\n" * (n // 18),
    lambda n: '[{"a": "' * (n // 8),
    lambda n: "x" * n,
)


@pytest.mark.parametrize("make", ADVERSARIAL)
def test_parsing_is_linear_on_adversarial_text(make):
    # counts work (characters scanned and decoded), never wall-clock time
    works = []
    for n in (20_000, 40_000, 80_000):
        text = make(n)
        work = ParseWork()
        parse_tool_calls(text, work)
        assert work.total <= 40 * len(text) + 100, (n, work)  # a bounded number of passes over the text
        works.append(work.total / max(1, len(text)))
    # doubling the text at most doubles the work (per-character work does not grow with n)
    assert works[2] <= works[0] * 1.05 + 0.01, works


# ----------------------------------------------------------------------------- values and modes


def test_values_equal_numbers_by_value_and_bools_strict():
    assert values_equal(1, 1.0)
    assert not values_equal(True, 1)
    assert not values_equal(0, False)
    assert values_equal({"a": [1, {"b": 2.0}]}, {"a": [1.0, {"b": 2}]})
    assert not values_equal({"a": 1}, {"a": 1, "b": None})
    assert not values_equal("1", 1)


def test_exact_mode_optional_omission_defaults_and_extras():
    tools = normalize_tools(TOOLS)
    gold = ToolCall("get_weather", {"city": "Oslo", "unit": "f"})
    assert match_call(ToolCall("get_weather", {"city": "Oslo", "unit": "f"}), gold, "exact", tools)[0]
    # declared optional argument may be omitted
    assert match_call(ToolCall("get_weather", {"city": "Oslo"}), gold, "exact", tools)[0]
    # required argument may not; nor without a schema
    assert not match_call(ToolCall("get_weather", {"unit": "f"}), gold, "exact", tools)[0]
    assert not match_call(ToolCall("get_weather", {"city": "Oslo"}), gold, "exact", None)[0]
    # an extra argument fails, unless it is an optional one at its declared default
    assert not match_call(ToolCall("get_weather", {"city": "Oslo", "unit": "f", "days": 2}), gold, "exact", tools)[0]
    g2 = ToolCall("get_weather", {"city": "Oslo"})
    assert match_call(ToolCall("get_weather", {"city": "Oslo", "unit": "c"}), g2, "exact", tools)[0]
    assert not match_call(ToolCall("get_weather", {"city": "Oslo", "unit": "f"}), g2, "exact", tools)[0]
    assert match_call(ToolCall("get_weather", {"city": "Oslo", "days": 2.0}), ToolCall("get_weather", {"city": "Oslo", "days": 2}), "exact", tools)[0]


def test_subset_and_name_modes():
    gold = ToolCall("get_weather", {"city": "Oslo"})
    assert match_call(ToolCall("get_weather", {"city": "Oslo", "days": 9}), gold, "subset")[0]
    assert not match_call(ToolCall("get_weather", {"city": "Bergen"}), gold, "subset")[0]
    assert match_call(ToolCall("get_weather", {"city": "Bergen"}), gold, "name")[0]
    assert not match_call(ToolCall("get_time", {}), gold, "name")[0]
    with pytest.raises(ValueError):
        match_call(gold, gold, "fuzzy")


def test_bipartite_matching_beats_greedy():
    # pred 0 fits both references, pred 1 only the first: greedy first-fit pairs 1 call, the maximum pairs 2
    assert max_bipartite_matching([[True, True], [True, False]]) == [(0, 1), (1, 0)]
    gold = [[call("get_weather", city="Oslo"), call("get_weather", city="Oslo", days=2)]]
    pred = json.dumps([call("get_weather", city="Oslo", days=2), call("get_weather", city="Oslo")])
    s = score(gold, pred, arg_match="subset")
    assert s["tool_call_f1"].value == 1.0 and s["tool_call_exact_set"].value == 1.0


# ----------------------------------------------------------------------------- metrics


def test_precision_recall_f1_known_values():
    gold = [[call("a"), call("b"), call("c"), call("d")]]
    s = score(gold, json.dumps([call("a"), call("b"), call("x")]), arg_match="exact", tools=None)
    assert s["tool_call_precision"].value == pytest.approx(2 / 3)
    assert s["tool_call_recall"].value == pytest.approx(1 / 2)
    assert s["tool_call_f1"].value == pytest.approx(4 / 7)
    assert s["tool_call_exact_set"].value == 0.0
    assert s["tool_call_validity"].status == "unscored" and "metadata.tools" in s["tool_call_validity"].detail["reason"]


def test_duplicate_predicted_calls_are_redundant_and_lower_precision():
    s = score([[call("get_time", tz="UTC")]], json.dumps([call("get_time", tz="UTC")] * 2))
    assert s["tool_call_precision"].value == 0.5
    assert s["tool_call_recall"].value == 1.0
    assert s["tool_call_redundancy"].value == 0.5
    assert s["tool_call_exact_set"].value == 0.0
    # two identical calls asked for: neither is redundant
    s2 = score([[call("get_time", tz="UTC")] * 2], json.dumps([call("get_time", tz="UTC")] * 2))
    assert s2["tool_call_redundancy"].value == 0.0 and s2["tool_call_f1"].value == 1.0


def test_no_call_expected_irrelevance():
    ok = score([], "I cannot help with that using these tools.")
    assert ok["tool_irrelevance"].value == 1.0
    assert ok["tool_call_exact_set"].value == 1.0 and ok["trajectory_strict"].value == 1.0
    for name in ("tool_call_precision", "tool_call_recall", "tool_call_f1", "trajectory_in_order"):
        assert ok[name].status == "unscored"
    bad = score([], json.dumps([call("get_time", tz="UTC")]))
    assert bad["tool_irrelevance"].value == 0.0 and bad["tool_call_exact_set"].value == 0.0
    # irrelevance is only scored when the reference expects no call
    assert score([[call("get_time", tz="UTC")]], "no")["tool_irrelevance"].status == "unscored"


def test_missed_call_and_empty_prediction():
    s = score([[call("get_time", tz="UTC")]], "It is noon.")
    assert values(s)["tool_call_precision"] == 0.0 and values(s)["tool_call_recall"] == 0.0 and values(s)["tool_call_f1"] == 0.0
    assert s["tool_call_validity"].status == "unscored" and s["tool_call_redundancy"].status == "unscored"
    assert s["tool_call_parse_failure"].value == 0.0
    assert s["trajectory_in_order"].value == 0.0


def test_parse_failure_is_reported_apart_from_no_call():
    s = score([[call("get_time", tz="UTC")]], '<tool_call>{"name": "get_time", "arguments": {tz}}</tool_call>')
    assert s["tool_call_parse_failure"].value == 1.0
    assert s["tool_call_f1"].value == 0.0 and s["tool_call_exact_set"].value == 0.0 and s["trajectory_strict"].value == 0.0
    irr = score([], '<tool_call>{"name": "get_time", "arguments": {tz}}</tool_call>')
    assert irr["tool_irrelevance"].value == 0.0 and irr["tool_call_exact_set"].value == 0.0
    assert score([], "No tool fits.")["tool_call_parse_failure"].value == 0.0


def test_parallel_batched_vs_serialised():
    gold = [[call("get_weather", city="Oslo"), call("get_time", tz="CET")]]
    batched = score(gold, json.dumps([call("get_time", tz="CET"), call("get_weather", city="Oslo")]))
    assert batched["parallel_call_precision"].value == 1.0 and batched["parallel_call_recall"].value == 1.0
    assert batched["trajectory_strict"].value == 1.0
    serial = score(gold, json.dumps({"turns": [[call("get_weather", city="Oslo")], [call("get_time", tz="CET")]]}))
    assert serial["parallel_call_recall"].value == 0.0
    assert serial["parallel_call_precision"].status == "unscored"
    assert serial["trajectory_strict"].value == 0.0 and serial["trajectory_in_order"].value == 1.0
    assert serial["tool_call_f1"].value == 1.0
    # a dependent chain batched into one response
    chain = [[call("get_weather", city="Oslo")], [call("get_time", tz="CET")]]
    squashed = score(chain, json.dumps([call("get_weather", city="Oslo"), call("get_time", tz="CET")]))
    assert squashed["parallel_call_precision"].value == 0.0
    assert squashed["parallel_call_recall"].status == "unscored"
    assert squashed["trajectory_in_order"].value == 0.0 and squashed["trajectory_strict"].value == 0.0


def test_trajectory_in_order_allows_extras_but_not_reordering():
    gold = [[call("a")], [call("c")]]
    extra = score(gold, json.dumps({"turns": [[call("a")], [call("x")], [call("c")]]}), tools=None, arg_match="exact")
    assert extra["trajectory_in_order"].value == 1.0 and extra["trajectory_strict"].value == 0.0
    swapped = score(gold, json.dumps({"turns": [[call("c")], [call("a")]]}), tools=None, arg_match="exact")
    assert swapped["trajectory_in_order"].value == 0.0
    assert swapped["tool_call_f1"].value == 1.0


def test_any_of_route_choice_is_shared_by_every_score():
    ref = {"any_of": [[[call("a")], [call("b")]], [[call("c")]]]}
    s = score(ref, json.dumps([call("c")]), tools=None, arg_match="exact")
    for name in ("tool_call_f1", "tool_call_exact_set", "trajectory_strict", "trajectory_in_order"):
        assert s[name].value == 1.0
        assert s[name].detail["route"] == 1
    # ties go to the earliest route
    idx, _ = choose_route([], reference_routes({"any_of": [[[call("a")]], [[call("b")]]]}), "exact")
    assert idx == 0
    # a route with no call wins for a no-call reply, and irrelevance is then scored
    s2 = score({"any_of": [[[call("a")]], []]}, "Nothing to do.", tools=None, arg_match="exact")
    assert s2["tool_irrelevance"].value == 1.0 and s2["tool_irrelevance"].detail["route"] == 1


def test_schema_validity():
    tools = normalize_tools(TOOLS)
    assert validate_call(ToolCall("get_weather", {"city": "Oslo", "days": 3}), tools) == (True, "")
    assert not validate_call(ToolCall("get_news", {}), tools)[0]
    assert not validate_call(ToolCall("get_weather", {"days": 3}), tools)[0]  # missing required
    assert not validate_call(ToolCall("get_weather", {"city": "Oslo", "days": True}), tools)[0]  # bool is no integer
    assert not validate_call(ToolCall("get_weather", {"city": "Oslo", "unit": "k"}), tools)[0]  # enum
    assert not validate_call(ToolCall("get_weather", {"city": "Oslo", "zip": "0150"}), tools)[0]  # undeclared
    metrics = normalize_tools([{"name": "m", "parameters": {"type": "dict", "properties": {"k": {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"]}}}}])
    assert validate_call(ToolCall("m", {"k": ["a", "b"]}), metrics)[0]  # enum on an array constrains its items
    assert not validate_call(ToolCall("m", {"k": ["a", "z"]}), metrics)[0]
    openai_style = normalize_tools([{"type": "function", "function": WEATHER}])
    assert validate_call(ToolCall("get_weather", {"city": "Oslo"}), openai_style)[0]
    s = score([[call("get_weather", city="Oslo")]], json.dumps([call("get_weather", city="Oslo"), call("get_news")]))
    assert s["tool_call_validity"].value == 0.5


def test_missing_reference_is_unscored_not_zero():
    s = score(None, json.dumps([call("get_time", tz="UTC")]))
    assert s["tool_call_f1"].status == "unscored"
    assert "reference_calls" in s["tool_call_f1"].detail["reason"]
    assert s["tool_call_validity"].value == 1.0  # validity needs only the tools


def test_registry_and_emitted_names():
    m = get_metric("tool_call_f1")
    assert isinstance(m, ToolCallMetrics)
    assert ToolCallMetrics.emitted()["tool_call_redundancy"].value == "minimize"
    assert ToolCallMetrics.emitted()["tool_call_parse_failure"].value == "minimize"
    assert "arg_match:bfcl" in ToolCallMetrics(arg_match="bfcl").signature()
    with pytest.raises(ValueError):
        ToolCallMetrics(arg_match="fuzzy")


# ----------------------------------------------------------------------------- BFCL accepted-value rules
# Each case states the verdict of BFCL's published ast_checker (bfcl_eval/eval_checker/ast_eval).

def bfcl(value_args, accepted_args, props, required=()):
    schema = {"properties": props, "required": list(required), "additional": False}
    return bfcl_match_call(ToolCall("f", value_args), ToolCall("f", accepted_args), schema)[0]


S = {"type": "string"}
I = {"type": "integer"}
F = {"type": "float"}
B = {"type": "boolean"}


def test_bfcl_string_standardisation():
    assert bfcl_standardize("April 1, 2024") == bfcl_standardize("april 1 2024") == "april12024"
    assert bfcl({"city": "San Francisco, CA"}, {"city": ["san francisco ca"]}, {"city": S})
    assert bfcl({"q": "it's"}, {"q": ['it"s']}, {"q": S})  # ' -> "
    assert not bfcl({"city": "San Jose"}, {"city": ["San Francisco"]}, {"city": S})


def test_bfcl_optional_marker_and_unexpected_arguments():
    props = {"base": I, "unit": S}
    assert bfcl({"base": 10}, {"base": [10], "unit": ["units", ""]}, props, ["base"])  # "" = may be omitted
    assert not bfcl({"base": 10}, {"base": [10], "unit": ["units"]}, props, ["base"])  # omitted, not optional
    assert not bfcl({"base": 10, "unit": "units"}, {"base": [10]}, props, ["base"])  # not in the possible answer
    assert not bfcl({"base": 10, "zzz": 1}, {"base": [10], "zzz": [1]}, props, ["base"])  # not in the schema
    assert not bfcl({}, {"base": ["", 10]}, props, ["base"])  # required by the schema


def test_bfcl_numeric_and_boolean_types():
    assert bfcl({"x": 5}, {"x": [5.0]}, {"x": F})  # int accepted for a scalar float
    assert not bfcl({"x": 5.0}, {"x": [5]}, {"x": I})  # float not accepted for an integer
    assert bfcl({"x": [1.0, 2.0]}, {"x": [[1.0, 2.0]]}, {"x": {"type": "array", "items": F}})
    assert not bfcl({"x": [1, 2]}, {"x": [[1.0, 2.0]]}, {"x": {"type": "array", "items": F}})  # ints inside a float list
    assert not bfcl({"flag": 1}, {"flag": [True]}, {"flag": B})  # bools strict
    assert not bfcl({"n": True}, {"n": [1]}, {"n": I})
    assert bfcl({"flag": False}, {"flag": [False, ""]}, {"flag": B})


def test_bfcl_lists_and_variables():
    arr = {"type": "array", "items": S}
    assert bfcl({"cities": ["New York", "Los Angeles"]}, {"cities": [["new york", "los angeles"]]}, {"cities": arr})
    assert not bfcl({"cities": ["Los Angeles", "New York"]}, {"cities": [["new york", "los angeles"]]}, {"cities": arr})
    # a string where the schema says integer is accepted when the possible answer is that string ("variable")
    assert bfcl({"n": "count"}, {"n": ["count"]}, {"n": I})


def test_bfcl_dicts_nested_and_lists_of_dicts():
    budget = {"budget": {"type": "dict"}}
    acc = {"budget": [{"min": [300000], "max": [400000]}]}
    assert bfcl({"budget": {"min": 300000, "max": 400000}}, acc, budget)
    assert not bfcl({"budget": {"min": 300000, "max": 500000}}, acc, budget)
    assert not bfcl({"budget": {"min": 300000, "max": 400000, "cur": "usd"}}, acc, budget)  # unexpected key
    assert not bfcl({"budget": {"min": 300000}}, acc, budget)  # missing key, not optional
    assert bfcl({"body": {"mode": "COOL"}}, {"body": [{"mode": ["cool"], "fan": ["", "HIGH"]}]}, {"body": {"type": "dict"}})
    nested = {"filter": [{"range": [{"lo": [1], "hi": [9]}], "field": ["age"]}]}
    assert bfcl({"filter": {"range": {"lo": 1, "hi": 9}, "field": "Age"}}, nested, {"filter": {"type": "dict"}})
    assert not bfcl({"filter": {"range": {"lo": 1, "hi": 8}, "field": "age"}}, nested, {"filter": {"type": "dict"}})
    conds = {"conditions": {"type": "array", "items": {"type": "dict"}}}
    acc_list = {"conditions": [[{"field": ["age"], "operation": [">"], "value": ["25"]}, {"field": ["job"], "operation": ["="], "value": ["engineer"]}]]}
    good = [{"field": "age", "operation": ">", "value": "25"}, {"field": "job", "operation": "=", "value": "engineer"}]
    assert bfcl({"conditions": good}, acc_list, conds)
    assert not bfcl({"conditions": good[::-1]}, acc_list, conds)  # order of the list of dicts matters


def test_bfcl_verdict_per_category():
    tools = [{"name": "f", "parameters": {"type": "dict", "properties": {"x": I}, "required": ["x"]}},
             {"name": "g", "parameters": {"type": "dict", "properties": {"y": S}, "required": ["y"]}}]
    ref_one = [[{"name": "f", "arguments": {"x": [1]}}]]
    assert bfcl_verdict("simple_python", json.dumps([call("f", x=1)]), ref_one, tools)[0]
    assert not bfcl_verdict("simple_python", json.dumps([call("f", x=1), call("f", x=1)]), ref_one, tools)[0]  # wrong count
    assert not bfcl_verdict("multiple", json.dumps([call("g", y="a")]), ref_one, tools)[0]  # wrong function
    ref_par = [[{"name": "f", "arguments": {"x": [1]}}, {"name": "f", "arguments": {"x": [2]}}]]
    assert bfcl_verdict("parallel", json.dumps([call("f", x=2), call("f", x=1)]), ref_par, tools)[0]  # any order
    assert not bfcl_verdict("parallel", json.dumps([call("f", x=2), call("f", x=2)]), ref_par, tools)[0]
    assert bfcl_verdict("irrelevance", "No function applies.", [], tools)[0]
    # an attempted call that cannot be decoded gets no irrelevance credit (issue 15 kind 4; BFCL passes it)
    assert not bfcl_verdict("irrelevance", '<tool_call>{"broken</tool_call>', [], tools)[0]
    assert not bfcl_verdict("irrelevance", json.dumps([call("f", x=1)]), [], tools)[0]
    assert not bfcl_verdict("simple_python", "I don't know.", ref_one, tools)[0]


def test_bfcl_ast_accuracy_metric_and_unscored():
    m = BFCLAstAccuracy()
    tools = [{"name": "f", "parameters": {"type": "dict", "properties": {"x": I}, "required": ["x"]}}]
    s_ok = Sample("a", "q", metadata={"category": "simple_python", "tools": tools, "reference_calls": [[{"name": "f", "arguments": {"x": [1]}}]]})
    s_none = Sample("b", "q", metadata={"tools": tools})
    got = m.score_batch([s_ok, s_ok, s_none], ["[f(x=1)]", "[f(x=2)]", "[f(x=1)]"])
    assert [g["bfcl_ast_accuracy"].value for g in got] == [1.0, 0.0, None]
    assert got[2]["bfcl_ast_accuracy"].status == "unscored"


# ----------------------------------------------------------------------------- issue 15 kind 4: truncated calls
TRUNCATED = [
    ("get_weather(city=", "python"),  # the case
    ('get_weather(city="Par', "python"),
    ("[get_weather(city='Oslo'), get_time(", "python"),
    ("get_weather(", "python"),
    ("Let me check the weather.\nget_weather(city=", "python"),  # prose, then a cut-off call line
    ('```python\nget_weather(city="Oslo"', "python"),
    ('{"name": "get_weather", "arguments": {"city": "Os', "json"),
    ('[{"name": "get_weather", "arguments": {"ci', "json"),
    ('{"tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city', "json"),
    ('{"na', "json"),
    ('```json\n{"name": "get_weather", "arguments": {"city": "Oslo"', "json"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"', "tag"),
    ("<tool_call>", "tag"),
    ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Os', "tag"),
    ('<function=get_weather>{"city": "Os', "tag"),
]


@pytest.mark.parametrize("text, syntax", TRUNCATED)
def test_a_truncated_call_in_any_syntax_is_a_parse_failure_not_an_abstention(text, syntax):
    from metric_ops.toolcalls import attempted_call_syntax

    parsed = parse_tool_calls(text)
    assert parsed.status == "parse_failure" and parsed.calls == [] and parsed.errors
    if syntax != "json" or text.startswith("{"):
        assert attempted_call_syntax(text) is not None
    scores = ToolCallMetrics().score_one(Sample("s", "q", metadata={"tools": TOOLS, "reference_calls": []}), text)
    assert scores["tool_call_parse_failure"].value == 1.0
    assert scores["tool_irrelevance"].value == 0.0  # no abstention credit for an attempted call
    ok, reason = bfcl_verdict("irrelevance", text, [], TOOLS)
    assert not ok and "cannot be parsed" in reason
    row = BFCLAstAccuracy().score_batch([Sample("s", "q", metadata={"category": "irrelevance", "tools": TOOLS})], [text])[0]
    assert row["bfcl_ast_accuracy"].value == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that; no tool fits.",
        "The weather function needs a city (which you did not give).",
        "Paris(France) is lovely in spring.",  # a parenthesis in prose is not a call
        "Use the [citation needed] marker.",
        "",
        "   ",
    ],
)
def test_a_reply_with_no_attempted_call_keeps_its_abstention_credit(text):
    parsed = parse_tool_calls(text)
    assert parsed.status == "no_call"
    scores = ToolCallMetrics().score_one(Sample("s", "q", metadata={"tools": TOOLS, "reference_calls": []}), text)
    assert scores["tool_call_parse_failure"].value == 0.0 and scores["tool_irrelevance"].value == 1.0
    row = BFCLAstAccuracy().score_batch([Sample("s", "q", metadata={"category": "irrelevance", "tools": TOOLS})], [text])[0]
    assert row["bfcl_ast_accuracy"].value == 1.0


def test_complete_calls_in_the_same_syntaxes_still_parse():
    expected = [ToolCall("get_weather", {"city": "Oslo"})]
    for text in ('get_weather(city="Oslo")', '```python\nget_weather(city="Oslo")\n```', '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
                 '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'):
        parsed = parse_tool_calls(text)
        assert parsed.status == "calls" and parsed.calls == expected, text
