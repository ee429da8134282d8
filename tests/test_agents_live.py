"""Live agent episodes: the episode runner drives a model through the project's backends
against a toy tool environment (tests/support/toy_env.py) and a scripted user, and records
the episodes in the same ``episodes`` table the precomputed τ-bench run uses.

Two agents: a rule-following shop agent behind a real OpenAI-format HTTP server (the api
backend; it makes the tool calls, so rewards and oracles can be checked exactly), and the
tiny local causal LM (the hf backend; gibberish by design, which the environment's reward
and the oracles must score as failures, and whose replies must be exactly what the model
generates for the conversation the runner sent).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from metric_ops.registry import REGISTRY

ENV = "tests.support.toy_env:ToyShop"
ORACLES = REGISTRY.oracles()  # every metric declaring oracle = True


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("agent_tasks") / "shop_tasks.jsonl"
    tasks = [
        {"task_id": "cancel-a1", "task": {"instruction": "Cancel order A1.", "actions": [{"name": "cancel_order", "arguments": {"order_id": "A1"}}],
                                           "outputs": [], "user_script": ["Please cancel my order A1.", "yes"]}},
        {"task_id": "status-b2", "task": {"instruction": "Ask for the status of order B2.", "actions": [], "outputs": ["delivered"],
                                           "user_script": ["What is the status of order B2?"]}},
    ]
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def _spec(name, models, tasks_file, runtime, generation=None):
    from resources.catalog.spec import EvaluationSpec

    return EvaluationSpec.from_mapping({
        "name": name, "dataset": {"kind": "episodes", "path": str(tasks_file), "environment": ENV, "max_turns": 6},
        "models": models, "metrics": ORACLES, "runtime": runtime, **({"generation": generation} if generation else {}),
    })


@pytest.mark.slow
def test_live_episodes_scripted_agent_over_http(tasks_file, tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from tests.support.agent_server import AgentServer

    server = AgentServer().start()
    try:
        lake = LakeStore(root=str(tmp_path / "lake"))
        spec = _spec("shop-live", {"shop-agent": f"api:shop-agent@{server.base_url}"}, tasks_file, {"trials": 2, "concurrency": 1})
        fp = run_evaluation(spec, lake, instance).fingerprint
    finally:
        server.stop()
    eps = lake.read("episodes", where={"fingerprint": fp}).sort(["task_id", "trial"])
    assert eps.select("task_id", "trial").rows() == [("cancel-a1", 0), ("cancel-a1", 1), ("status-b2", 0), ("status-b2", 1)]
    assert eps["status"].to_list() == ["ok"] * 4 and eps["source"].to_list() == ["live"] * 4 and eps["backend"].to_list() == ["api"] * 4
    assert eps["reward"].to_list() == [1.0] * 4  # the environment's own oracle: final state and required outputs
    assert all(n > 0 for n in eps["tokens_in"].to_list())
    cancel = json.loads(eps["messages"][0])
    assert [m["role"] for m in cancel] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "user"]
    assert cancel[3]["content"] == "yes" and cancel[-1]["content"] == "###STOP###"
    assert cancel[4]["tool_calls"][0]["function"] == {"name": "cancel_order", "arguments": json.dumps({"order_id": "A1"})}
    assert json.loads(cancel[5]["content"]) == {"order_id": "A1", "status": "cancelled"}
    assert json.loads(eps["tool_calls"][0]) == [{"name": "cancel_order", "arguments": {"order_id": "A1"}, "id": "call_0_1_0",
                                                  "message_index": 4, "result": cancel[5]["content"], "failed": False}]
    scores = lake.read("scores", where={"fingerprint": fp})
    value = {(r["sample_id"], r["metric"]): (r["status"], r["value"]) for r in scores.iter_rows(named=True)}
    for trial in (0, 1):
        assert value[(f"cancel-a1#{trial}", "action_match")] == ("scored", 1.0)
        assert value[(f"status-b2#{trial}", "action_match")] == ("scored", 1.0)  # no write expected, none made
        assert value[(f"status-b2#{trial}", "outputs_match")] == ("scored", 1.0)  # "delivered" was said
        assert value[(f"cancel-a1#{trial}", "outputs_match")][0] == "unscored"
        assert value[(f"cancel-a1#{trial}", "episode_pass")] == ("scored", 1.0)
    summary = lake.read("episode_summary", where={"fingerprint": fp})
    top = summary.filter((pl.col("kind") == "pass_k") & (pl.col("oracle") == "episode_pass")).sort("k")
    assert top.select("k", "pass_hat_k", "n_tasks").rows() == [(1, 1.0, 2), (2, 1.0, 2)]


@pytest.mark.slow
def test_live_episodes_tiny_lm_through_the_hf_backend(tasks_file, tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.backends import GenerationRequest, ModelBackends
    from resources.agents.runner import _backend_view
    from resources.lake.resource import LakeStore
    from metric_ops.base import Sample
    from support.tiny_lm import build_tiny_lm

    path = build_tiny_lm()
    lake = LakeStore(root=str(tmp_path / "lake"))
    generation = {"temperature": 0.0, "max_tokens": 12, "seed": 0}
    spec = _spec("shop-tiny", {"tiny": f"hf:{path}"}, tasks_file, {"trials": 1}, generation)
    fp = run_evaluation(spec, lake, instance).fingerprint
    eps = lake.read("episodes", where={"fingerprint": fp}).sort("task_id")
    assert eps["status"].to_list() == ["ok", "ok"] and eps["backend"].to_list() == ["hf", "hf"]
    messages = json.loads(eps["messages"][0])
    assert messages[0]["role"] == "system" and "cancel_order" in messages[0]["content"] and messages[1]["content"] == "Please cancel my order A1."
    # the recorded reply is what the model generates for the conversation the runner sent
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    backend = ModelBackends().backend_for(f"hf:{path}")
    again = next(iter(backend.generate([GenerationRequest(Sample("x", "x"), "", _backend_view(messages[:first]))], generation)))
    assert messages[first]["content"] == again.output
    # gibberish changes nothing: the environment's reward is 0 for both tasks (A1 not cancelled; "delivered" never said)
    assert eps["reward"].to_list() == [0.0, 0.0]
    scores = lake.read("scores", where={"fingerprint": fp})
    value = {(r["sample_id"], r["metric"]): r["value"] for r in scores.filter(pl.col("status") == "scored").iter_rows(named=True)}
    assert value[("cancel-a1#0", "action_match")] == 0.0 and value[("status-b2#0", "action_match")] == 1.0
    assert value[("cancel-a1#0", "episode_pass")] == 0.0


@pytest.mark.slow
def test_live_episode_with_a_model_playing_the_user(tasks_file, tmp_path, instance):
    """user: model: the tiny LM plays the user from the task's instruction; its first turn is
    exactly what it generates for the user prompt, and the episode is cut at max_turns."""
    from pipelines.runs.runner import run_evaluation
    from resources.backends import GenerationRequest, ModelBackends
    from resources.agents.runner import USER_PROMPT
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore
    from metric_ops.base import Sample
    from support.tiny_lm import build_tiny_lm

    path = build_tiny_lm()
    generation = {"temperature": 0.0, "max_tokens": 8, "seed": 0}
    spec = EvaluationSpec.from_mapping({
        "name": "shop-model-user",
        "dataset": {"kind": "episodes", "path": str(tasks_file), "environment": ENV, "max_turns": 2, "limit": 1,
                    "user": "model", "user_model": f"hf:{path}"},
        "models": {"tiny": f"hf:{path}"}, "metrics": ORACLES, "generation": generation,
    })
    lake = LakeStore(root=str(tmp_path / "lake"))
    fp = run_evaluation(spec, lake, instance).fingerprint
    eps = lake.read("episodes", where={"fingerprint": fp})
    assert eps.height == 1 and eps["status"][0] == "ok"
    messages = json.loads(eps["messages"][0])
    prompt = [{"role": "system", "content": USER_PROMPT.format(instruction="Cancel order A1.")},
              {"role": "user", "content": "Hi! How can I help you today?"}]
    expected = next(iter(ModelBackends().backend_for(f"hf:{path}").generate([GenerationRequest(Sample("x", "x"), "", prompt)], generation)))
    assert messages[1]["role"] == "user" and messages[1]["content"] == (expected.output.strip() or "###STOP###")
    assert sum(1 for m in messages if m["role"] == "assistant") <= 2  # max_turns
