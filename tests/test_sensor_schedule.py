"""The daemon path, end to end: the evaluation scheduler, the inbox sensor and the analysis
sensor evaluated by a real Dagster instance, and the runs they request executed by that
instance's jobs, on a real lake (no mocks).

One scenario walks through what a data team does over time: two evaluations with their own
crons, an inbox drop that adds a model, rescoring (CLI and a UI-style launch) and a changed
dataset. After each step it checks that the right evaluation's verdicts reflect the change
with no hand step, that the other evaluation's rows are untouched, and that Dagster's
partitions equal the registered pairs.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines.definitions import ALL_ASSETS, ALL_CHECKS, build_resources
from pipelines.jobs import analysis_job, evaluation_job, samples_job
from pipelines.runs.register import register
from pipelines.runs.runner import rescore
from pipelines.sensors import InboxConfig, analysis_sensor, evaluation_scheduler, inbox_sensor, scheduler_tick
from resources.catalog import current_keys, evaluation_row
from resources.lake.resource import LakeStore
from tests.test_recurring import N, spec_for, write_dataset, write_outputs

UTC = dt.timezone.utc


class Deployment:
    """The project's jobs and sensors on one lake and one instance, ticked by hand."""

    def __init__(self, lake: LakeStore, instance: dg.DagsterInstance, inbox: Path) -> None:
        self.lake, self.instance, self.inbox = lake, instance, inbox
        resources = {**build_resources(lake.root), "inbox": InboxConfig(path=str(inbox))}
        self.defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, jobs=[evaluation_job, samples_job, analysis_job],
                                   sensors=[evaluation_scheduler, inbox_sensor, analysis_sensor], resources=resources)
        self.resources = resources
        self.cursors: dict[str, str | None] = {}
        self.launched: list[dg.RunRequest] = []

    def tick(self, sensor: dg.SensorDefinition) -> list[dg.RunRequest]:
        """Evaluate ``sensor`` as the daemon would, apply its partition requests, run what it asks."""
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursors.get(sensor.name),
                                          resources={k: self.resources[k] for k in ("lake", "inbox")})
        result = sensor(context)
        if isinstance(result, dg.SkipReason):
            return []
        self.cursors[sensor.name] = result.cursor
        for request in result.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    self.instance.delete_dynamic_partition(request.partitions_def_name, key)
        for request in result.run_requests or []:
            job_name = request.job_name or sensor.job_name
            outcome = self.defs.resolve_job_def(job_name).execute_in_process(
                partition_key=request.partition_key, instance=self.instance, tags=request.tags, raise_on_error=True)
            assert outcome.success
        self.launched.extend(result.run_requests or [])
        return list(result.run_requests or [])

    def settle(self) -> None:
        """Tick every sensor until none asks for more runs (what the daemon does over time)."""
        for _ in range(6):
            if not any([self.tick(evaluation_scheduler), self.tick(inbox_sensor), self.tick(analysis_sensor)]):
                return
        raise AssertionError("sensors kept requesting runs")

    def assert_partitions_equal_registered_pairs(self, filled: bool = True) -> None:
        from assets.partitions import evaluation_partitions, pair_partitions

        evaluations, pairs = current_keys(self.lake)
        assert sorted(pair_partitions.get_partition_keys(dynamic_partitions_store=self.instance)) == pairs
        assert sorted(evaluation_partitions.get_partition_keys(dynamic_partitions_store=self.instance)) == evaluations
        if filled:  # every registered pair materialised: 100% filled, no phantom "missing"
            assert set(pairs) <= self.instance.get_materialized_partitions(dg.AssetKey("scores"))


def rows_of(lake: LakeStore, fingerprint: str) -> dict[str, pl.DataFrame]:
    """Everything stored for one evaluation fingerprint, sorted (to compare before/after)."""
    out = {}
    for table, key in (("generations", ["model", "sample_id"]), ("scores", ["model", "metric", "sample_id"]),
                       ("summary", ["model", "metric"]), ("comparisons", ["kind", "model", "metric", "baseline", "sample_id"])):
        out[table] = lake.read(table, where={"fingerprint": fingerprint}).sort(key, nulls_last=True)
    return out


def assert_untouched(before: dict[str, pl.DataFrame], after: dict[str, pl.DataFrame]) -> None:
    for table in before:
        assert before[table].equals(after[table]), f"{table} rows of another evaluation changed"


@pytest.fixture
def deployment(tmp_path, dagster_home, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(Path(dagster_home) / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    yield Deployment(LakeStore(root=str(tmp_path / "lake")), instance, inbox)
    instance.dispose()


def test_sensors_start_running():
    for sensor in (evaluation_scheduler, inbox_sensor, analysis_sensor):
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_each_evaluation_runs_on_its_own_cron(tmp_path, instance):
    lake = LakeStore(root=str(tmp_path / "lake"))
    register(spec_for("daily", write_dataset(tmp_path, "d.jsonl"), {"m": "precomputed:column=answer"}, schedule="0 6 * * *"), lake, instance)
    register(spec_for("hourly", write_dataset(tmp_path, "h.jsonl", answer=lambda i: f"h {i}"), {"m": "precomputed:column=answer"},
                      schedule="30 * * * *"), lake, instance)
    register(spec_for("manual", write_dataset(tmp_path, "m.jsonl", answer=lambda i: f"x {i}"), {"m": "precomputed:column=answer"}),
             lake, instance)
    start = dt.datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    _, cursor, _ = scheduler_tick(lake, {}, start)  # first sight: no catch-up
    assert set(cursor) == {"daily", "hourly"}
    fired: dict[str, list[str]] = {"daily": [], "hourly": []}
    for minute in range(1, 24 * 60, 10):  # a day, ticking every 10 minutes
        now = start + dt.timedelta(minutes=minute)
        requests, cursor, _ = scheduler_tick(lake, cursor, now)
        for r in requests:
            cursor[r.tags["facetlake/evaluation"]].pop("pending", None)  # runs counted when requested
            fired[r.tags["facetlake/evaluation"]].append(r.tags["facetlake/scheduled"][11:16])
    assert sorted(set(fired["daily"])) == ["06:00"]
    assert sorted(set(fired["hourly"])) == [f"{h:02d}:30" for h in range(24)]


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_daemon_path_end_to_end(deployment, tmp_path):
    d, lake = deployment, deployment.lake
    data_a = write_dataset(tmp_path, "alpha.jsonl")
    data_b = write_dataset(tmp_path, "beta.jsonl", question=lambda i: f"beta question {i}?")
    outs = {name: write_outputs(tmp_path, f"{name}.jsonl", correct=c) for name, c in (("a1", 5), ("a2", 10), ("b1", 15), ("b2", 20))}
    register(spec_for("alpha", data_a, {"a1": f"precomputed:{outs['a1']}", "a2": f"precomputed:{outs['a2']}"},
                      schedule="0 6 * * *", baseline="a2"), lake, d.instance)
    register(spec_for("beta", data_b, {"b1": f"precomputed:{outs['b1']}", "b2": f"precomputed:{outs['b2']}"},
                      schedule="30 * * * *"), lake, d.instance)
    d.assert_partitions_equal_registered_pairs(filled=False)

    # 1. both crons are due (their last ticks were long ago): each evaluation runs end to end
    d.cursors["evaluation_scheduler"] = json.dumps({"alpha": {"last_tick": "2000-01-01T00:00:00+00:00"},
                                                    "beta": {"last_tick": "2000-01-01T00:00:00+00:00"}})
    d.settle()
    fp_a, fp_b = evaluation_row(lake, "alpha")["fingerprint"], evaluation_row(lake, "beta")["fingerprint"]
    summary = lake.read("summary", where={"metric": "exact_match"})
    assert dict(zip(summary["model"], summary["mean"])) == pytest.approx({"a1": 0.25, "a2": 0.5, "b1": 0.75, "b2": 1.0})
    assert lake.read("comparisons", where={"fingerprint": fp_b}).height > 0
    assert lake.read("correlations", where={"fingerprint": fp_a}).height >= 0
    d.assert_partitions_equal_registered_pairs()

    # 2. an inbox drop adds a model to alpha only; alpha's verdicts include it with no hand step
    beta_before = rows_of(lake, fp_b)
    (d.inbox / "alpha").mkdir()
    shutil.copy(outs["b2"], d.inbox / "alpha" / "a3.jsonl")  # all correct on alpha too
    d.settle()
    summary = lake.read("summary", where={"fingerprint": fp_a, "metric": "exact_match"})
    assert dict(zip(summary["model"], summary["mean"])) == pytest.approx({"a1": 0.25, "a2": 0.5, "a3": 1.0})
    models = set(lake.read("comparisons", where={"fingerprint": fp_a, "kind": "model_metric"})["model"])
    assert models == {"a1", "a2", "a3"}
    assert_untouched(beta_before, rows_of(lake, fp_b))
    d.assert_partitions_equal_registered_pairs()

    # 3. a rescore from the CLI: beta's verdicts updated at once; the sensor sees nothing stale
    alpha_before = rows_of(lake, fp_a)
    rescore(["chrf"], lake, d.instance, fingerprint="beta")
    assert "chrf" in set(lake.read("summary", where={"fingerprint": fp_b})["metric"])
    assert d.tick(analysis_sensor) == []
    # ... and a UI-style launch of scores for one pair: the analysis sensor refreshes beta
    key = f"beta@{fp_b[:12]}:b1"
    d.defs.resolve_job_def("evaluation_job").execute_in_process(
        partition_key=key, instance=d.instance, asset_selection=[dg.AssetKey("scores")],
        run_config={"ops": {"scores": {"config": {"metrics": [{"name": "token_f1"}]}}}})
    requests = d.tick(analysis_sensor)
    assert [r.partition_key for r in requests] == [f"beta@{fp_b[:12]}"]
    assert "token_f1" in set(lake.read("summary", where={"fingerprint": fp_b, "model": "b1"})["metric"])
    assert_untouched(alpha_before, rows_of(lake, fp_a))

    # 4. alpha's dataset changes: its next tick registers the new fingerprint, says so, and runs
    #    every model (the inbox one too) under it; beta is untouched, history stays queryable
    beta_before = rows_of(lake, fp_b)
    write_dataset(tmp_path, "alpha.jsonl", n=N + 2)
    for name, correct in (("a1", 5), ("a2", 10)):
        write_outputs(tmp_path, f"{name}.jsonl", correct=correct, n=N + 2)
    shutil.copy(write_outputs(tmp_path, "a3new.jsonl", correct=N + 2, n=N + 2), d.inbox / "alpha" / "a3.jsonl")
    state = json.loads(d.cursors["evaluation_scheduler"])
    state["alpha"]["last_tick"] = "2000-01-01T00:00:00+00:00"
    d.cursors["evaluation_scheduler"] = json.dumps(state)
    d.launched.clear()
    d.settle()
    new_fp = evaluation_row(lake, "alpha")["fingerprint"]
    assert new_fp != fp_a and evaluation_row(lake, f"alpha@{fp_a[:12]}")["status"] == "history"
    changed = [r for r in d.launched if r.tags.get("facetlake/fingerprint_changed")]
    assert changed and all(r.tags["facetlake/fingerprint_changed"] == f"{fp_a[:12]}->{new_fp[:12]}" for r in changed)
    summary = lake.read("summary", where={"fingerprint": new_fp, "metric": "exact_match"})
    assert dict(zip(summary["model"], summary["mean"])) == pytest.approx({"a1": 5 / 22, "a2": 10 / 22, "a3": 1.0})
    samples_event = d.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("samples"), asset_partitions=[f"alpha@{new_fp[:12]}"]), limit=1).records[0]
    assert samples_event.asset_materialization.metadata["previous_fingerprint"].value == fp_a
    assert lake.read("summary", where={"fingerprint": fp_a}).height > 0  # history kept
    assert_untouched(beta_before, rows_of(lake, fp_b))
    d.assert_partitions_equal_registered_pairs()
    assert len(current_keys(lake)[1]) == 5


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_regression_alert_is_per_evaluation(deployment, tmp_path):
    d, lake = deployment, deployment.lake
    data_a = write_dataset(tmp_path, "a.jsonl", n=40)
    data_b = write_dataset(tmp_path, "b.jsonl", n=40, question=lambda i: f"other question {i}?")
    good, bad = write_outputs(tmp_path, "good.jsonl", correct=40, n=40), write_outputs(tmp_path, "bad.jsonl", correct=5, n=40)
    from pipelines.runs.runner import run_evaluation

    run_evaluation(spec_for("regressed", data_a, {"base": f"precomputed:{good}", "cand": f"precomputed:{bad}"}, baseline="base"),
                   lake, d.instance)
    run_evaluation(spec_for("fine", data_b, {"base": f"precomputed:{good}", "cand": f"precomputed:{good}"}, baseline="base"),
                   lake, d.instance)
    key = dg.AssetCheckKey(dg.AssetKey("comparisons"), "check_comparisons_no_regression")
    infos = {i.partition_key: i.latest_execution_status.value
             for i in d.instance.event_log_storage.get_asset_check_partition_info([key])}
    fp_r, fp_f = evaluation_row(lake, "regressed")["fingerprint"], evaluation_row(lake, "fine")["fingerprint"]
    assert infos == {f"regressed@{fp_r[:12]}": "FAILED", f"fine@{fp_f[:12]}": "SUCCEEDED"}

    from typer.testing import CliRunner

    from pipelines.cli import app

    gate = CliRunner().invoke(app, ["compare", "--fail-on-regression", "--lake", lake.root])
    assert gate.exit_code == 1 and "regressed@" in gate.output and "gate fired" in gate.output
    assert CliRunner().invoke(app, ["compare", "-e", "fine", "--fail-on-regression", "--lake", lake.root]).exit_code == 0
