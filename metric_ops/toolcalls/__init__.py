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

Layout (issue 19): parsing in :mod:`metric_ops.toolcalls.parsing`, value equality and
BFCL's rules in :mod:`metric_ops.toolcalls.bfcl`, references, argument modes, matching,
routes and schema validity in :mod:`metric_ops.toolcalls.matching`, the metrics here.
Every public name stays importable from this module.
"""

from __future__ import annotations

from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.toolcalls.bfcl import (  # noqa: F401  (public names re-exported from here)
    BFCL_TYPES,
    bfcl_check_argument,
    bfcl_match_call,
    bfcl_standardize,
    values_equal,
)
from metric_ops.toolcalls.matching import (  # noqa: F401
    ARG_MODES,
    RouteEvaluation,
    choose_route,
    evaluate_route,
    match_call,
    max_bipartite_matching,
    normalize_tools,
    reference_routes,
    validate_call,
)
from metric_ops.toolcalls.parsing import ParsedCalls, ToolCall, parse_tool_calls
from metric_ops.toolcalls.scan import ParseWork, attempted_call_syntax

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

    - ``irrelevance``: valid only when the reply attempts no call (status ``no_call``).
      A reply that tried to call and cannot be parsed (``get_weather(city=`` cut off)
      fails: BFCL's checker passes it as a non-call, facetlake does not give a
      truncated call irrelevance credit (issue 15 kind 4);
    - ``simple``/``simple_python``/``live_simple``/``multiple``: exactly one call, which
      satisfies :func:`bfcl_match_call` against the single reference call;
    - ``parallel``/``parallel_multiple`` (and any other category): as many calls as the
      reference, paired one to one by a maximum bipartite matching (BFCL pairs greedily
      in reference order; the two agree unless greedy misses an existing pairing).

    ``reference`` is the sample's ``reference_calls``; ``tools`` the offered schemas.
    """
    parsed = parse_tool_calls(output)
    if category.startswith("irrelevance") or category.endswith("irrelevance"):
        if parsed.status == "parse_failure":
            return False, f"attempted a call that cannot be parsed ({'; '.join(parsed.errors[:2])})"
        return (parsed.status == "no_call", "" if parsed.status == "no_call" else "made a call")
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


__all__ = [
    "BFCL_TYPES",
    "bfcl_check_argument",
    "bfcl_match_call",
    "bfcl_standardize",
    "values_equal",
    "ARG_MODES",
    "RouteEvaluation",
    "choose_route",
    "evaluate_route",
    "match_call",
    "max_bipartite_matching",
    "normalize_tools",
    "reference_routes",
    "validate_call",
    "ParsedCalls",
    "ToolCall",
    "parse_tool_calls",
    "ParseWork",
    "attempted_call_syntax",
    "ToolCallMetrics",
    "BFCL_CATEGORIES",
    "bfcl_verdict",
    "BFCLAstAccuracy",
]
