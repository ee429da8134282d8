"""τ-bench's published gpt-4o airline run through the whole lakehouse: ``facetlake
demo-agents`` (Dagster assets over real Delta tables), pass^k recomputed independently from
the raw file, rescoring without re-running, a second agent (OpenAI-messages JSONL)
compared task-paired, and the report's agent sections opened in headless Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipelines.cli import app

# pytest-xdist: one worker runs this module (the demo lake is module-scoped; README "Tests")
pytestmark = pytest.mark.xdist_group("agents_pipeline")

TAU = Path(__file__).resolve().parents[1] / "data" / "tau-bench" / "gpt-4o-airline.json"
runner = CliRunner()


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory, dagster_home):
    from resources.catalog.spec import EvaluationSpec, resolve
    from resources.lake.resource import LakeStore
    from pipelines.cli.agents import TAU_BENCH_CONFIG

    root = tmp_path_factory.mktemp("agents") / "lake"
    out = root.parent / "agents.html"
    result = runner.invoke(app, ["demo-agents", "--lake", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    fp = resolve(EvaluationSpec.from_yaml(TAU_BENCH_CONFIG)).fingerprint
    return LakeStore(root=str(root)), fp, result.output, out


def _raw_counts() -> dict[str, tuple[int, int]]:
    """(n trials, c passes) per task straight from the raw JSON, τ-bench's rule for a pass."""
    raw = json.loads(TAU.read_text())
    n, c = defaultdict(int), defaultdict(int)
    for e in raw:
        n[str(e["task_id"])] += 1
        c[str(e["task_id"])] += int(e["reward"] >= 1 - 1e-6)
    return {t: (n[t], c[t]) for t in n}


@pytest.mark.slow
def test_demo_puts_the_run_in_the_lake_with_every_oracle_scored(demo_lake):
    lake, fp, output, _ = demo_lake
    eps = lake.read("episodes", where={"fingerprint": fp})
    assert eps.height == 200 and eps.select("task_id", "trial").unique().height == 200
    assert eps["status"].unique().to_list() == ["ok"] and set(eps["trial"].unique().to_list()) == {0, 1, 2, 3}
    from assets.freshness import freshness  # pass^k read the scores stored now, like every verdict (issue 26)

    state = freshness(lake, [fp])[fp]
    assert "episode_summary" in state.assets and state.stale == []
    raw = json.loads(TAU.read_text())
    first = eps.filter((pl.col("task_id") == "0") & (pl.col("trial") == 0)).row(0, named=True)
    assert json.loads(first["messages"]) == raw[0]["traj"] and first["n_messages"] == len(raw[0]["traj"])
    assert first["user_cost"] == pytest.approx(raw[0]["info"]["user_cost"])
    scores = lake.read("scores", where={"fingerprint": fp})
    per_metric = dict(scores.group_by("metric").len().iter_rows())
    for name in ("episode_reward", "episode_pass", "action_match", "action_f1", "outputs_match", "outputs_recall", "policy_compliance"):
        assert per_metric[name] == 200, name  # one row per episode for every oracle score (scored or unscored)
    statuses = dict(scores.filter(pl.col("metric") == "outputs_match").group_by("status").len().iter_rows())
    assert statuses == {"scored": 16, "unscored": 184}  # 4 tasks x 4 trials require outputs
    assert scores.filter(pl.col("status") == "error").height == 0
    assert "pass^k and pass@k over tasks" in output and "per task, trials in order" in output
    lineage = runner.invoke(app, ["lineage", "--fingerprint", fp[:12], "--lake", lake.root])
    assert lineage.exit_code == 0, lineage.output
    assert "episode_summary v" in lineage.output and "episodes[gpt-4o]" in lineage.output and "file_sha256" in lineage.output


@pytest.mark.slow
def test_pass_hat_k_recomputed_independently_from_the_raw_file(demo_lake):
    lake, fp, output, _ = demo_lake
    counts = _raw_counts()
    assert len(counts) == 50 and {n for n, _ in counts.values()} == {4}
    mean_reward = sum(e["reward"] for e in json.loads(TAU.read_text())) / 200
    summary = lake.read("episode_summary", where={"fingerprint": fp})
    head = summary.filter((pl.col("kind") == "pass_k") & (pl.col("oracle") == "episode_pass")).sort("k")
    assert head["k"].to_list() == [1, 2, 3, 4]
    assert head["pass_hat_k"][0] == pytest.approx(mean_reward, abs=1e-12) and mean_reward == pytest.approx(0.42)
    for row in head.iter_rows(named=True):
        k = row["k"]
        hat = sum(math.comb(c, k) / math.comb(n, k) for n, c in counts.values()) / len(counts)  # τ-bench's formula
        at = sum(1 - math.comb(n - c, k) / math.comb(n, k) for n, c in counts.values()) / len(counts)  # Chen et al.
        assert row["pass_hat_k"] == pytest.approx(hat, abs=1e-12) and row["pass_at_k"] == pytest.approx(at, abs=1e-12)
        assert row["n_tasks"] == 50 and row["n_excluded"] == 0
        assert row["pass_hat_k_low"] <= row["pass_hat_k"] <= row["pass_hat_k_high"]
        assert f"{hat:.4f}" in output  # printed by the demo
    tasks = summary.filter((pl.col("kind") == "task") & (pl.col("oracle") == "episode_pass") & (pl.col("k") == 2))
    assert {r["task_id"]: (r["n_trials"], r["n_pass"]) for r in tasks.iter_rows(named=True)} == counts


@pytest.mark.slow
def test_rescoring_reads_stored_episodes_without_running_them(demo_lake, tmp_path):
    from resources.lake.resource import LakeStore

    lake0, fp, _, _ = demo_lake
    root = tmp_path / "lake"
    shutil.copytree(lake0.root, root)
    lake = LakeStore(root=str(root))
    before = lake.version("episodes")
    result = runner.invoke(app, ["score", "--metric", "action_oracle", "--param", "normalize_strings=true", "--lake", str(root)])
    assert result.exit_code == 0, result.output
    assert lake.version("episodes") == before  # the episodes table was only read
    sig = lake.read("scores", where={"fingerprint": fp, "metric": "action_match"})["signature"].unique().to_list()
    assert sig == ["action_oracle|v:1|arg_match:exact|ignore_failed:yes|normalize_strings:yes"]
    head = lake.read("episode_summary", where={"fingerprint": fp}).filter((pl.col("kind") == "pass_k") & (pl.col("oracle") == "action_match"))
    assert "normalize_strings:yes" in head["signature"][0]  # the corpus-level rows were refreshed from the new scores


@pytest.mark.slow
def test_second_agent_compared_task_paired_with_fewer_trials(demo_lake, tmp_path, instance):
    """A second agent written as OpenAI-messages JSONL (gpt-4o's trials 0 and 1 only): same
    tasks, so the same fingerprint; at k = 3, 4 its tasks are excluded and counted."""
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    lake0, fp, _, _ = demo_lake
    root = tmp_path / "lake"
    shutil.copytree(lake0.root, root)
    lake = LakeStore(root=str(root))
    jsonl = tmp_path / "two_trials.jsonl"
    with jsonl.open("w") as f:
        for e in json.loads(TAU.read_text()):
            if e["trial"] < 2:
                t = e["info"]["task"]
                f.write(json.dumps({"task_id": str(e["task_id"]), "trial": e["trial"], "messages": e["traj"], "reward": e["reward"],
                                    "task": {"instruction": t["instruction"], "actions": [{"name": a["name"], "arguments": a["kwargs"]} for a in t["actions"]],
                                             "outputs": t["outputs"]}}) + "\n")
    spec = EvaluationSpec.from_mapping({
        "name": "tau-bench-airline", "dataset": {"kind": "episodes", "path": str(TAU), "format": "tau_bench"},
        "models": {"gpt-4o": f"precomputed:{TAU}", "gpt-4o-2-trials": f"precomputed:{jsonl}"}, "baseline": "gpt-4o",
        "metrics": ["episode_reward", "action_oracle", "outputs_oracle", "policy_oracle"],
    })
    assert run_evaluation(spec, lake, instance).fingerprint == fp  # the tasks define the fingerprint, not the trajectories
    counts = dict(lake.read("episodes", where={"fingerprint": fp}).group_by("model").len().iter_rows())
    assert counts == {"gpt-4o": 200, "gpt-4o-2-trials": 100}  # A re-run, B added: each partition replaced alone
    summary = lake.read("episode_summary", where={"fingerprint": fp})
    two = summary.filter((pl.col("kind") == "pass_k") & (pl.col("model") == "gpt-4o-2-trials") & (pl.col("oracle") == "episode_pass")).sort("k")
    assert two.select("k", "n_tasks", "n_excluded").rows() == [(1, 50, 0), (2, 50, 0), (3, 0, 50), (4, 0, 50)]
    assert two["pass_hat_k"][2] is None
    raw = [e for e in json.loads(TAU.read_text()) if e["trial"] < 2]
    assert two["pass_hat_k"][0] == pytest.approx(sum(e["reward"] for e in raw) / len(raw), abs=1e-12)
    paired = summary.filter((pl.col("kind") == "paired") & (pl.col("oracle") == "episode_pass")).sort("k")
    assert set(paired["baseline"].to_list()) == {"gpt-4o"} and set(paired["model"].to_list()) == {"gpt-4o-2-trials"}
    p1 = paired.row(0, named=True)
    full = _raw_counts()
    half: dict[str, list[float]] = defaultdict(list)
    for e in raw:
        half[str(e["task_id"])].append(float(e["reward"] >= 1 - 1e-6))
    expected = sum(sum(v) / 2 - full[t][1] / 4 for t, v in half.items()) / 50
    assert p1["n_tasks"] == 50 and p1["value"] == pytest.approx(expected, abs=1e-12) and p1["ci_low"] <= p1["value"] <= p1["ci_high"]
    assert paired.filter(pl.col("k") == 3)["n_tasks"].to_list() == [0]
    out = runner.invoke(app, ["episodes", "--fingerprint", fp[:12], "--no-tasks", "--lake", str(root)])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "pass^k, task-paired" in flat and "gpt-4o-2-trials" in flat
    cmp = runner.invoke(app, ["compare", "--fingerprint", fp[:12], "--lake", str(root)])
    assert cmp.exit_code == 0, cmp.output
    assert "pass^k, task-paired" in " ".join(cmp.output.split())


@pytest.mark.slow
def test_report_shows_the_pass_hat_k_curve_in_chromium(demo_lake, tmp_path):
    from tests.browser_support import chromium, open_report

    lake, fp, _, out = demo_lake
    page_html = out.read_text()
    for sid in ("agents-passk", "agents-grid", "agents-actions", "agents-consistency"):
        assert f"<section id='{sid}' data-status='present'>" in page_html
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=['\"]?https?:", page_html)
    head = lake.read("episode_summary", where={"fingerprint": fp}).filter(
        (pl.col("kind") == "pass_k") & (pl.col("oracle") == "episode_pass")).sort("k")
    with chromium() as browser:
        page, problems, requests = open_report(browser, out)
        curve = page.evaluate(
            "() => { const d = document.querySelector('#agents-passk .plotly-graph-div');"
            " return d.data.filter(t => t.name && t.name.startsWith('pass^k · gpt-4o · reward')).map(t => [t.x, t.y]); }")
        assert curve == [[[1, 2, 3, 4], head["pass_hat_k"].to_list()]]
        drawn = page.evaluate("document.querySelectorAll('#agents-passk .scatterlayer .trace').length")
        assert drawn >= 3  # band, pass^k and pass@k of the shown oracle
        cells = page.evaluate("() => document.querySelector('#agents-grid .plotly-graph-div').data[0].z")
        assert len(cells) == 50 and all(len(row) == 4 for row in cells)
        assert sum(v for row in cells for v in row) == 84  # passing episodes, as in the file
        assert page.locator("#agents-actions table.wrong-actions tr").count() > 5
        assert problems == [], problems
        assert [u for u in requests if not u.startswith("file:")] == []
        shot = tmp_path / "agents-passk.png"
        page.locator("#agents-passk").screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000
        if os.environ.get("FACETLAKE_ARTIFACTS"):
            dest = Path(os.environ["FACETLAKE_ARTIFACTS"])
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, dest / shot.name)
        page.close()


@pytest.mark.slow
def test_episodes_of_unknown_tasks_are_error_rows_and_never_scored(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "a", "task": {"instruction": "say hello", "actions": [], "outputs": ["hello"]}}) + "\n")
    agent = tmp_path / "agent.jsonl"
    agent.write_text("".join(json.dumps({"task_id": t, "messages": msgs, "reward": 1.0}) + "\n" for t in ("a", "a", "zzz")))
    spec = EvaluationSpec.from_mapping({"name": "hello", "dataset": {"kind": "episodes", "path": str(tasks)},
                                        "models": {"agent": f"precomputed:{agent}"}, "metrics": ["episode_reward", "outputs_oracle"]})
    lake = LakeStore(root=str(tmp_path / "lake"))
    fp = run_evaluation(spec, lake, instance).fingerprint
    eps = lake.read("episodes", where={"fingerprint": fp}).sort(["task_id", "trial"])
    assert eps.select("task_id", "trial", "status").rows() == [("a", 0, "ok"), ("a", 1, "ok"), ("zzz", 0, "error")]
    assert "not a task of evaluation 'hello'" in eps["error"][2]
    scores = lake.read("scores", where={"fingerprint": fp})
    assert sorted(set(scores["sample_id"].to_list())) == ["a#0", "a#1"]
    assert scores.filter(pl.col("metric") == "outputs_match")["value"].to_list() == [1.0, 1.0]
    import dagster as dg

    check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey("episodes"), "check_episodes_known_tasks"))
    assert check is not None and check.event.dagster_event.event_specific_data.passed is False


@pytest.mark.slow
def test_the_viewer_shows_each_episode_s_turns_tool_calls_and_oracle_scores(demo_lake):
    """issue 29: a task's sample page lists every trial's episode (turns, tool calls,
    reward) and the oracles' per-episode scores, as stored."""
    from starlette.testclient import TestClient

    from pipelines.view import LakeReader, create_app
    from pipelines.view.data import sample_record

    lake, fp, _, _ = demo_lake
    eps = lake.read("episodes", where={"fingerprint": fp}).sort("task_id", "trial")
    task = eps["task_id"][0]
    mine = eps.filter(pl.col("task_id") == task)
    reader = LakeReader(lake)
    try:
        record = sample_record(reader, fp, task)
    finally:
        reader.close()
    (model,) = record["models"]
    trials = record["models"][model]["trials"]
    assert sorted(trials) == sorted(mine["episode_id"].to_list())
    for row in mine.iter_rows(named=True):
        shown = trials[row["episode_id"]]
        assert shown["episode"]["messages"] == json.loads(row["messages"])
        assert shown["episode"]["tool_calls"] == json.loads(row["tool_calls"])
        assert "episode_pass" in shown["scores"] and shown["scores"]["episode_pass"]["value"] == float(row["reward"] >= 1 - 1e-6)
    page = TestClient(create_app(lake.root)).get(f"/sample/{fp}/{task}")
    assert page.status_code == 200
    assert page.text.count('class="tool-call"') == int(mine["n_tool_calls"].sum())
    assert page.text.count('class="trial"') == mine.height


@pytest.mark.slow
def test_the_compare_view_ranks_tasks_by_their_mean_over_trials(demo_lake):
    """Scores are per episode (<task>#<trial>); the compare view's value of a task is the
    mean over its trials: sorting by it equals tau-bench's pass rate c / n per task."""
    from pipelines.view import CompareQuery, LakeReader, compare_page

    lake, fp, _, _ = demo_lake
    counts = _raw_counts()
    positions = dict(zip(*lake.read("samples", where={"fingerprint": fp}, columns=["sample_id", "position"]).to_dict(as_series=False).values()))
    expected = sorted(counts, key=lambda t: (-counts[t][1] / counts[t][0], positions[t]))
    reader = LakeReader(lake)
    try:
        ids, page = [], 1
        while True:
            result = compare_page(reader, CompareQuery(evaluation=fp, metric="episode_pass", sort="base", desc=True, page=page))
            ids += [r["sample_id"] for r in result.rows]
            if page >= result.pages:
                break
            page += 1
        wrong = compare_page(reader, CompareQuery(evaluation=fp, metric="episode_pass", mode="both_wrong"))
    finally:
        reader.close()
    assert ids == expected
    assert wrong.total == sum(1 for t, (n, c) in counts.items() if c == 0)  # every trial failed
