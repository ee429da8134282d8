"""Kind-specific assets have partition sets of their own (issue 26, fault 12): ``episodes``
(agent pairs), ``episode_summary`` (agent evaluations) and ``lm_eval_summary`` (lm-eval
evaluations) show no partition that is missing for ever, so the UI's fill rates and
"Materialize all" hold only evaluations of their kind. An agent pair runs as two Dagster
runs (its episodes, then its scores), and episodes stored by a run the CLI did not start are
scored by the ``episodes_sensor``."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from assets.partitions import DIMENSIONS, sync_partitions
from resources.catalog.reads import current_keys, spec_kind

pytestmark = pytest.mark.xdist_group("kind_partitions")


def _keys(instance, asset: str) -> set[str]:
    from pipelines.definitions import defs

    return set(defs.resolve_asset_graph().get(dg.AssetKey(asset)).partitions_def.get_partition_keys(dynamic_partitions_store=instance))


@pytest.fixture(scope="module")
def two_kinds(tmp_path_factory, instance):
    """A generation evaluation and an agent evaluation (τ-bench's shipped spec, renamed) run
    through ``run_evaluation`` in one lake."""
    from pipelines.cli.agents import TAU_BENCH_CONFIG
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path_factory.mktemp("kinds") / "lake"))
    before = {r.run_id for r in instance.get_runs()}
    gen = run_evaluation(small_spec(name="kinds-gen", limit=5), lake, instance)
    agent_spec = EvaluationSpec.from_yaml(TAU_BENCH_CONFIG)
    agent_spec.name = "kinds-agent"
    agent = run_evaluation(agent_spec, lake, instance)
    runs = [r for r in instance.get_runs() if r.run_id not in before]
    return lake, gen.registration, agent.registration, runs


def test_spec_kind_reads_the_stored_spec():
    assert spec_kind(json.dumps({"dataset": {"kind": "episodes", "path": "x.json"}})) == "agent"
    assert spec_kind(json.dumps({"dataset": {"kind": "lm_eval"}, "lm_eval": {"task": "t"}})) == "lm_eval"
    assert spec_kind(json.dumps({"dataset": {"kind": "sfres"}})) == "generation"
    assert spec_kind(None) == "generation" and spec_kind("not json") == "generation"
    assert {kind for _, kind in DIMENSIONS.values()} == {None, "agent", "lm_eval"}


def test_each_kind_specific_asset_holds_only_evaluations_of_its_kind(two_kinds, instance):
    lake, gen, agent, _ = two_kinds
    gen_pairs, agent_pairs = set(gen.pair_keys.values()), set(agent.pair_keys.values())
    assert len(gen_pairs) == 1 and len(agent_pairs) == 1
    # the shared sets hold both evaluations
    assert gen_pairs | agent_pairs <= _keys(instance, "scores") and gen_pairs | agent_pairs <= _keys(instance, "generations")
    assert {gen.partition_key, agent.partition_key} <= _keys(instance, "summary")
    # the kind-specific ones hold only their kind: no generation evaluation shows as missing there
    assert agent_pairs <= _keys(instance, "episodes") and not gen_pairs & _keys(instance, "episodes")
    assert agent.partition_key in _keys(instance, "episode_summary") and gen.partition_key not in _keys(instance, "episode_summary")
    assert not {gen.partition_key, agent.partition_key} & _keys(instance, "lm_eval_summary")
    assert current_keys(lake, "agent") == ([agent.partition_key], sorted(agent_pairs))
    assert current_keys(lake, "lm_eval") == ([], [])
    with pytest.raises(ValueError, match="unknown evaluation kind 'robot'"):
        current_keys(lake, "robot")


def test_an_agent_pair_runs_its_episodes_then_its_scores_and_every_verdict(two_kinds, instance):
    from assets.freshness import freshness

    lake, gen, agent, runs = two_kinds
    (key,) = agent.pair_keys.values()
    on_pair = sorted((r for r in runs if r.tags.get("dagster/partition") == key), key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)
    assert [r.job_name for r in on_pair] == ["agent_job", "scores_job"]
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in on_pair)
    verdict_jobs = {r.job_name for r in runs if r.tags.get("dagster/partition") == agent.partition_key}
    assert {"analysis_job", "agent_analysis_job"} <= verdict_jobs
    assert lake.read("episodes", where={"fingerprint": agent.fingerprint}).height == 200
    assert lake.read("scores", where={"fingerprint": agent.fingerprint}).filter(pl.col("metric") == "episode_pass").height == 200
    state = freshness(lake, [agent.fingerprint])[agent.fingerprint]
    assert "episode_summary" in state.assets and state.stale == []
    # the generation evaluation never ran an agent or lm-eval job
    gen_jobs = {r.job_name for r in runs if str(r.tags.get("dagster/partition", "")).startswith(gen.partition_key)}
    assert gen_jobs == {"samples_job", "evaluation_job", "analysis_job"}


def test_episodes_stored_outside_the_cli_are_scored_by_the_episodes_sensor(two_kinds, instance):
    from pipelines.definitions import ALL_ASSETS, ALL_CHECKS, build_resources
    from pipelines.jobs import ALL_JOBS
    from pipelines.sensors import episodes_sensor, episodes_tick

    lake, _, agent, _ = two_kinds
    (key,) = agent.pair_keys.values()
    last = instance.fetch_materializations(dg.AssetKey("episodes"), limit=1).records[0].storage_id
    # the CLI's own runs are not scored again
    assert [r for r in episodes_tick(instance, None)[0] if r.partition_key == key] == []
    # the same job as the scheduler or the UI starts it
    resources = build_resources(lake.root)
    resources["lake"] = lake
    job = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, jobs=ALL_JOBS, resources=resources).resolve_job_def("agent_job")
    run = job.execute_in_process(instance=instance, partition_key=key, tags={"facetlake/source": "ui"})
    assert run.success
    requests, cursor = episodes_tick(instance, last)
    assert [(r.job_name, r.partition_key, r.tags["facetlake/episodes_run"]) for r in requests] == [("scores_job", key, run.run_id)]
    # through the sensor itself: the cursor moves on, so a tick later asks for nothing again
    result = episodes_sensor(dg.build_sensor_context(instance=instance, cursor=str(last)))
    assert [r.partition_key for r in result.run_requests] == [key] and result.cursor == str(cursor)
    again = episodes_sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
    assert again.run_requests == []


def test_an_archived_agent_evaluation_leaves_the_kind_specific_sets(two_kinds, instance):
    from resources.catalog import set_archived

    lake, _, agent, _ = two_kinds
    (key,) = agent.pair_keys.values()
    set_archived(lake, "kinds-agent", True)
    try:
        changes = sync_partitions(lake, instance)
        assert changes["agent_pair"]["removed"] == [key] and changes["agent_evaluation"]["removed"] == [agent.partition_key]
        assert key not in _keys(instance, "episodes") and agent.partition_key not in _keys(instance, "episode_summary")
    finally:
        set_archived(lake, "kinds-agent", False)
        sync_partitions(lake, instance)
    assert key in _keys(instance, "episodes")


@pytest.mark.slow  # starts a code server and launches five runs (about 30 s)
def test_launched_agent_runs_store_episodes_then_scores(tmp_path, instance):
    """``facetlake run --workers 2`` launches every step as a run through the code location
    (launch_evaluation): an agent pair's ``agent_job`` run, then its ``scores_job`` run."""
    from typer.testing import CliRunner

    from pipelines.cli import app
    from pipelines.cli.agents import TAU_BENCH_CONFIG
    from resources.lake.resource import LakeStore

    spec = tmp_path / "tau.yaml"
    text = TAU_BENCH_CONFIG.read_text().replace("name: tau-bench-airline", "name: kinds-launched")
    spec.write_text(text.replace("../../data/", str(TAU_BENCH_CONFIG.parents[2] / "data") + "/"), encoding="utf-8")
    before = {r.run_id for r in instance.get_runs()}
    result = CliRunner().invoke(app, ["run", str(spec), "--workers", "2", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 0, result.output
    runs = sorted((r for r in instance.get_runs() if r.run_id not in before),
                  key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)
    assert [r.job_name for r in runs] == ["samples_job", "agent_job", "scores_job", "analysis_job", "agent_analysis_job"]
    assert all(r.status == dg.DagsterRunStatus.SUCCESS and r.tags["facetlake/source"] == "cli-launch" for r in runs)
    lake = LakeStore(root=str(tmp_path / "lake"))
    assert lake.read("scores").filter(pl.col("metric") == "episode_pass").height == 200
