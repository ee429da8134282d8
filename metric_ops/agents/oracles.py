"""Oracles over agent episodes: each one a metric (direction, dimension, version, signature).

An **episode** is one trial of an agent on a task: a multi-turn trajectory in OpenAI chat
format (``system`` / ``user`` / ``assistant`` messages, assistant ``tool_calls``, ``tool``
results paired by ``tool_call_id``). The scores asset hands each oracle one episode per
(task, trial):

- ``output``: the trajectory as JSON, a list of messages (or ``{"messages": [...]}``);
- ``sample.metadata``: the task and what the environment recorded:
  ``actions`` (the task's ground-truth actions ``[{"name", "arguments"}]``, None when
  unknown), ``outputs`` (strings the agent must tell the user), ``write_tools`` (names of
  the tools that change the environment's state, None = every tool), ``reward`` (the
  environment's recorded reward in [0, 1], None when none was recorded), ``task_id``,
  ``trial``.

Oracles (each a registered :class:`~metric_ops.base.Metric`):

- :class:`EpisodeReward` (``episode_reward``): the recorded environment reward and its pass
  (``reward >= 1 - 1e-6``, τ-bench's rule). In τ-bench this reward is the environment's
  own oracle: the final database state equals the one the ground-truth actions produce,
  and every required output was said.
- :class:`ActionOracle` (``action_oracle``): the episode's successful write calls against
  the task's ground-truth write actions, order-insensitive, with the tool-call matching of
  :mod:`metric_ops.toolcalls` (bipartite matching, argument equality with numbers by
  value); the first wrong or missing action is named in ``detail``.
- :class:`OutputsOracle` (``outputs_oracle``): every required output appears in something
  the agent said to the user (τ-bench's rule: case-insensitive, commas removed from the
  message).
- :class:`PolicyOracle` (``policy_oracle``): rules over the trajectory, each a registered
  :class:`PolicyRule` subclass (a Python callable: ``check(messages, sample)``). Shipped
  example: :class:`ExplicitYesBeforeBooking`.

References: Yao et al., *τ-bench: A Benchmark for Tool-Agent-User Interaction in
Real-World Domains* (2024) and its ``Env.calculate_reward``; Patil et al., BFCL (2024), for
the call matching reused from :mod:`metric_ops.toolcalls`.

Reading an episode's messages (calls, what was said, the final answer) lives in
:mod:`metric_ops.agents.trajectory`; the oracles are defined here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.agents.passk import PASS_TOLERANCE
from metric_ops.plugins import Registry, UnknownNameError
from metric_ops.toolcalls import ToolCall, evaluate_route, match_call
from metric_ops.agents.trajectory import (
    TrajectoryError,
    _messages_or_error,
    _normalise,
    _reference_actions,
    episode_calls,
    said_to_user,
)


class EpisodeReward(Metric):
    """The environment's recorded reward of an episode (τ-bench: final database state and
    required outputs, its own oracle) and whether it is a pass.

    Scores: ``episode_reward`` (the reward, in [0, 1]) and ``episode_pass`` (1.0 when
    ``reward >= pass_threshold``, default ``1 - 1e-6`` as τ-bench's ``is_successful``,
    else 0.0). Input: ``sample.metadata["reward"]``. Unscored when no reward was recorded
    (a live episode whose environment gives none); an error when the reward is not a
    number in [0, 1].
    """

    name = "episode_reward"
    oracle = True
    direction = Direction.MAXIMIZE
    score_directions = {"episode_reward": Direction.MAXIMIZE, "episode_pass": Direction.MAXIMIZE}
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("metadata",)

    def __init__(self, pass_threshold: float = 1.0 - PASS_TOLERANCE) -> None:
        super().__init__(pass_threshold=pass_threshold)
        self.pass_threshold = float(pass_threshold)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        out = []
        for sample in samples:
            reward = sample.metadata.get("reward")
            if reward is None:
                reason = "no reward was recorded for this episode"
                out.append({"episode_reward": Score.unscored(reason), "episode_pass": Score.unscored(reason)})
                continue
            if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not 0.0 <= float(reward) <= 1.0:
                message = f"recorded reward {reward!r} is not a number in [0, 1]"
                out.append({"episode_reward": Score.error(message), "episode_pass": Score.error(message)})
                continue
            detail = {"reward": float(reward), "pass_threshold": self.pass_threshold}
            info = sample.metadata.get("reward_info")
            if isinstance(info, Mapping):
                detail["reward_info"] = {k: v for k, v in info.items() if k != "actions"}
            out.append({
                "episode_reward": Score(float(reward), detail=detail),
                "episode_pass": Score(float(float(reward) >= self.pass_threshold), detail=detail),
            })
        return out


class ActionOracle(Metric):
    """The episode's write calls against the task's ground-truth write actions.

    Write calls: the agent's tool calls whose name is in ``metadata.write_tools`` (every
    call when it is None), minus those whose tool result reports an error
    (``ignore_failed``, default on: a failed write leaves the environment unchanged, as in
    τ-bench where tools answer ``"Error: ..."``). Reference: ``metadata.actions`` filtered
    to the same tools (τ-bench's ground truth also lists the reads it expects).

    Matching is :func:`metric_ops.toolcalls.evaluate_route` with both sides as one turn:
    order-insensitive, a maximum bipartite matching of calls, arguments compared by
    ``arg_match`` (``exact``: same arguments and values, numbers by value ``1 == 1.0``,
    booleans strict; ``subset``: reference arguments present and equal; ``name``: tool
    names only). ``normalize_strings`` also strips and case-folds every string argument
    first.

    Scores: ``action_match`` (1.0 when the made and expected writes match one to one,
    both empty included) and ``action_f1`` (2·matched / (made + expected); unscored when
    both are empty). ``detail.first_mismatch`` names the first wrong or missing expected
    action (in reference order): ``wrong_arguments`` when an unmatched write to the same
    tool was made (paired once, with the first differing argument from
    :func:`metric_ops.toolcalls.match_call`), else ``missing``; after them the first
    ``unexpected`` write (one no expected action explains). ``detail.mismatches`` lists all.
    Unscored when the task has no reference actions (``metadata.actions`` absent or None).
    """

    name = "action_oracle"
    oracle = True
    direction = Direction.MAXIMIZE
    score_directions = {"action_match": Direction.MAXIMIZE, "action_f1": Direction.MAXIMIZE}
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def __init__(self, arg_match: str = "exact", ignore_failed: bool = True, normalize_strings: bool = False) -> None:
        if arg_match not in ("exact", "subset", "name"):
            raise ValueError(f"unknown arg_match {arg_match!r} for action_oracle; use exact, subset or name")
        super().__init__(arg_match=arg_match, ignore_failed=ignore_failed, normalize_strings=normalize_strings)
        self.arg_match, self.ignore_failed, self.normalize_strings = arg_match, bool(ignore_failed), bool(normalize_strings)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [self.score_one(s, o) for s, o in zip(samples, outputs)]

    def _prep(self, call: ToolCall) -> ToolCall:
        return ToolCall(call.name, _normalise(dict(call.arguments))) if self.normalize_strings else call

    def score_one(self, sample: Sample, output: Any) -> dict[str, Score]:
        """Both action scores for one episode (see the class docstring)."""
        if sample.metadata.get("actions") is None:
            reason = "the task has no reference actions (metadata.actions)"
            return {"action_match": Score.unscored(reason), "action_f1": Score.unscored(reason)}
        messages, bad = _messages_or_error(output)
        if bad is not None:
            return {"action_match": bad, "action_f1": bad}
        write_tools = sample.metadata.get("write_tools")
        writes = None if write_tools is None else set(write_tools)
        calls, parse_errors = episode_calls(messages)
        made_all = [c for c in calls if writes is None or c.call.name in writes]
        made = [c for c in made_all if not (self.ignore_failed and c.failed)]
        expected = [a for a in _reference_actions(sample.metadata["actions"]) if writes is None or a.name in writes]
        ev = evaluate_route([[self._prep(c.call) for c in made]], [[self._prep(a) for a in expected]], self.arg_match)
        matched_pred = {p for p, _ in ev.matched}
        matched_gold = {g for _, g in ev.matched}
        mismatches: list[dict[str, Any]] = []
        spare = [i for i in range(len(made)) if i not in matched_pred]  # made writes that matched nothing
        for j, action in enumerate(expected):
            if j in matched_gold:
                continue
            # a wrong call to the same tool explains a missing expected action: pair them once
            i = next((i for i in spare if made[i].call.name == action.name), None)
            if i is None:
                mismatches.append({"kind": "missing", "action": action.name, "expected": action.to_dict(),
                                   "reason": f"no (further) successful call to {action.name!r}"})
                continue
            spare.remove(i)
            reason = match_call(self._prep(made[i].call), self._prep(action), self.arg_match)[1]
            mismatches.append({"kind": "wrong_arguments", "action": action.name, "expected": action.to_dict(),
                               "made": made[i].call.to_dict(), "reason": reason})
        for i in spare:
            c = made[i]
            mismatches.append({"kind": "unexpected", "action": c.call.name, "made": c.call.to_dict(),
                               "reason": f"write {c.call.name!r} is not among the expected actions"})
        detail = {
            "expected": [a.to_dict() for a in expected],
            "made": [c.call.to_dict() for c in made],
            "matched": [[p, g] for p, g in ev.matched],
            "first_mismatch": mismatches[0] if mismatches else None,
            "mismatches": mismatches,
            "n_failed_writes_ignored": sum(1 for c in made_all if c.failed) if self.ignore_failed else 0,
            "write_tools": sorted(writes) if writes is not None else None,
        }
        if parse_errors:
            detail["unparsed_tool_calls"] = parse_errors[:5]
        match = Score(ev.exact_set, detail=detail)
        f1 = Score(ev.f1, detail=detail) if ev.f1 is not None else Score.unscored(
            "no write was expected and none was made (action_match scores that)", **detail)
        return {"action_match": match, "action_f1": f1}


def tau_bench_output_found(output: str, message: str) -> bool:
    """τ-bench's required-output rule: ``output.lower() in message.lower().replace(",", "")``."""
    return output.lower() in message.lower().replace(",", "")


class OutputsOracle(Metric):
    """Every required output appears in what the agent told the user.

    Input: ``metadata.outputs`` (strings, e.g. a refund amount "327"), the assistant
    messages of the trajectory. Rule (τ-bench's ``calculate_reward``): an output is found
    when ``output.lower()`` occurs in one assistant message's text lower-cased with its
    commas removed (so "1,000" reads as "1000"). Tool-call arguments do not count: only
    what was said.

    Scores: ``outputs_match`` (1.0 when every output was found) and ``outputs_recall``
    (the share found). ``detail.found`` maps each output to whether it was found (the same
    shape as τ-bench's ``reward_info.info.outputs``), ``detail.first_missing`` names the
    first one not found. Unscored when the task requires no output.
    """

    name = "outputs_oracle"
    oracle = True
    direction = Direction.MAXIMIZE
    score_directions = {"outputs_match": Direction.MAXIMIZE, "outputs_recall": Direction.MAXIMIZE}
    dimension = "factual"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output", "metadata")

    def __init__(self, rule: str = "tau_bench") -> None:
        if rule != "tau_bench":
            raise ValueError(f"unknown outputs rule {rule!r}; the only rule is tau_bench")
        super().__init__(rule=rule)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            required = [str(o) for o in sample.metadata.get("outputs") or []]
            if not required:
                reason = "the task requires no output (metadata.outputs is empty)"
                results.append({"outputs_match": Score.unscored(reason), "outputs_recall": Score.unscored(reason)})
                continue
            messages, bad = _messages_or_error(output)
            if bad is not None:
                results.append({"outputs_match": bad, "outputs_recall": bad})
                continue
            said = said_to_user(messages)
            found = {o: any(tau_bench_output_found(o, m) for m in said) for o in required}
            n_found = sum(found.values())
            detail = {"found": found, "first_missing": next((o for o, ok in found.items() if not ok), None),
                      "n_agent_messages": len(said)}
            results.append({
                "outputs_match": Score(float(n_found == len(required)), detail=detail),
                "outputs_recall": Score(n_found / len(required), detail=detail),
            })
        return results


# ============================================================================ policy rules

# rule name -> PolicyRule subclass; a subclass with a ``name`` registers itself when defined
POLICY_RULES: Registry[type["PolicyRule"]] = Registry("policy rule", base="metric_ops.agents.oracles:PolicyRule")


@dataclass
class PolicyCheck:
    """What one rule found in one trajectory: ``checked`` events the rule applied to (e.g.
    booking calls) and the ``violations`` among them (each a dict with at least
    ``message_index`` and ``reason``)."""

    checked: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)


class PolicyRule:
    """Base class of a policy rule over a trajectory; defining a subclass with a ``name``
    registers it (use it as ``policy_oracle`` parameter ``rules=[name]``).

    Subclasses set ``name`` (unique), ``description``, ``version`` (bump when the verdict
    can change) and implement :meth:`check`. Constructor keyword arguments are the rule's
    parameters (they enter the oracle's signature).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    version: ClassVar[str] = "1"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            POLICY_RULES.register(cls.name, cls, unique=True)

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)

    def check(self, messages: Sequence[Mapping[str, Any]], sample: Sample) -> PolicyCheck:  # pragma: no cover - abstract
        """Apply the rule to one trajectory (messages in OpenAI chat format)."""
        raise NotImplementedError

    def signature(self) -> str:
        """``name@version`` plus parameters."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.name}@{self.version}" + (f"({params})" if params else "")


class ExplicitYesBeforeBooking(PolicyRule):
    """τ-bench airline policy: before a booking write, the agent must obtain the user's
    explicit confirmation. A violation is a call to a booking tool (``tools``, default
    ``book_reservation``) when the user turn just before the assistant message that makes
    it does not contain the word "yes" (case-insensitive, as a whole word), or when no
    user turn precedes it. Every attempt counts, failed or not."""

    name = "explicit_yes_before_booking"
    description = "a booking write without the user's explicit 'yes' in the previous user turn"
    version = "1"
    _YES = re.compile(r"\byes\b", re.IGNORECASE)

    def __init__(self, tools: Sequence[str] = ("book_reservation",)) -> None:
        super().__init__(tools="+".join(tools))
        self.tools = set(tools)

    def check(self, messages: Sequence[Mapping[str, Any]], sample: Sample) -> PolicyCheck:
        result = PolicyCheck()
        calls, _ = episode_calls(messages)
        for call in calls:
            if call.call.name not in self.tools:
                continue
            result.checked += 1
            previous = next((messages[i] for i in range(call.message_index - 1, -1, -1) if messages[i].get("role") == "user"), None)
            text = previous.get("content") if previous is not None else None
            if not isinstance(text, str) or not self._YES.search(text):
                said = "no user turn precedes it" if previous is None else f"the previous user turn says {str(text)[:120]!r}"
                result.violations.append({"message_index": call.message_index, "tool": call.call.name,
                                          "reason": f"{call.call.name} called but {said}"})
        return result


def make_rule(spec: str) -> PolicyRule:
    """A registered rule by name; raises :class:`TrajectoryError` (a ``ValueError``) naming
    close matches and the known rules."""
    try:
        cls = POLICY_RULES[str(spec)]
    except UnknownNameError as exc:
        raise TrajectoryError(str(exc)) from None
    return cls()


class PolicyOracle(Metric):
    """Policy rules over the trajectory (each a registered :class:`PolicyRule`).

    Parameter ``rules``: rule names (default the shipped example
    ``explicit_yes_before_booking``). Score ``policy_compliance``: 1.0 when no rule found a
    violation, 0.0 otherwise; ``detail.violations`` lists each (rule, message index,
    reason) and ``detail.checked`` how many events each rule examined. Unscored when no
    rule applied to the episode (e.g. no booking was attempted): nothing was measured.
    """

    name = "policy_oracle"
    oracle = True
    direction = Direction.MAXIMIZE
    score_directions = {"policy_compliance": Direction.MAXIMIZE}
    dimension = "process"
    value_range = (0.0, 1.0)
    version = "1"
    requires = ("output",)

    def __init__(self, rules: list[str] = ["explicit_yes_before_booking"]) -> None:  # noqa: B006 - copied below
        self.rules = [make_rule(r) for r in list(rules)]
        if not self.rules:
            raise ValueError("policy_oracle needs at least one rule; e.g. --param rules=explicit_yes_before_booking")
        super().__init__(rules=[r.signature() for r in self.rules])

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            messages, bad = _messages_or_error(output)
            if bad is not None:
                results.append({"policy_compliance": bad})
                continue
            checked: dict[str, int] = {}
            violations: list[dict[str, Any]] = []
            for rule in self.rules:
                found = rule.check(messages, sample)
                checked[rule.name] = found.checked
                violations.extend({"rule": rule.name, **v} for v in found.violations)
            detail = {"checked": checked, "violations": violations}
            if not any(checked.values()):
                results.append({"policy_compliance": Score.unscored("no rule applied to this episode", **detail)})
            else:
                results.append({"policy_compliance": Score(0.0 if violations else 1.0, detail=detail)})
        return results


# the pass/fail score of each oracle: what pass@k / pass^k and the consistency checks count
PASS_SCORES: dict[str, str] = {
    "episode_pass": "episode_reward",
    "action_match": "action_oracle",
    "outputs_match": "outputs_oracle",
    "policy_compliance": "policy_oracle",
}
