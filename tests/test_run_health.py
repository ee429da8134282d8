"""A killed run does not stay STARTED and block the run queue (issue 16, item 6)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from support.recording_server import RecordingServer

ROOT = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_health_checked_launcher_and_run_monitoring_fail_a_dead_run(instance):
    """With the project's dagster.yaml the launcher checks run workers, so the daemon's run
    monitoring fails a run whose process is gone at its next poll."""
    import logging

    from dagster._core.launcher import WorkerStatus
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run

    from pipelines.runs.run_health import HealthCheckedRunLauncher, process_tags

    assert isinstance(instance.run_launcher, HealthCheckedRunLauncher) and instance.run_monitoring_enabled
    dead = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                         tags={**process_tags(), "facetlake/pid": str(_dead_pid())})
    alive = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED, tags=process_tags())
    for run in (dead, alive):
        instance.add_run(run)
    assert instance.run_launcher.check_run_worker_health(dead).status == WorkerStatus.FAILED
    assert instance.run_launcher.check_run_worker_health(alive).status == WorkerStatus.RUNNING
    for run in (dead, alive):
        record = instance.get_run_records(filters=dg.RunsFilter(run_ids=[run.run_id]))[0]
        monitor_started_run(instance, None, record, logging.getLogger("test"))
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive.run_id).status == dg.DagsterRunStatus.STARTED
    instance.run_storage.delete_run(alive.run_id)


def test_a_cli_run_killed_before_it_started_is_failed_by_the_sweep(instance):
    """Issue 26, fault 6: 3 of 153 crash trials left runs NOT_STARTED for ever."""
    from pipelines.runs.run_health import fail_dead_runs, process_tags

    dead = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.NOT_STARTED,
                         tags={**process_tags(), "facetlake/pid": str(_dead_pid())})
    mine = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.NOT_STARTED,
                         tags=process_tags())  # this process: alive, about to start it
    untagged = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.NOT_STARTED)
    for run in (dead, mine, untagged):
        instance.add_run(run)
    failed = fail_dead_runs(instance)
    assert dead.run_id in failed and mine.run_id not in failed and untagged.run_id not in failed
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(mine.run_id).status == dg.DagsterRunStatus.NOT_STARTED
    assert instance.get_run_by_id(untagged.run_id).status == dg.DagsterRunStatus.NOT_STARTED
    for run in (mine, untagged):
        instance.run_storage.delete_run(run.run_id)


class SlowServer(RecordingServer):
    """Answers each chat request after 0.3 s, so a run is still generating when killed."""

    async def chat(self, request):
        await asyncio.sleep(0.3)
        return await super().chat(request)


@pytest.mark.slow
def test_kill_9_of_facetlake_run_then_a_second_run_is_not_blocked(tmp_path):
    server = SlowServer().start()
    try:
        data = tmp_path / "data.csv"
        data.write_text("id,input\n" + "".join(f"s{i},question {i}\n" for i in range(40)), encoding="utf-8")
        spec = {"name": "killed", "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id"}},
                "adapter": {"kind": "chat", "template": "{input}"}, "generation": {"temperature": 0.0, "max_tokens": 8},
                "runtime": {"api_key_env": "FACETLAKE_TEST_API_KEY", "concurrency": 1, "write_batch_size": 2, "max_retries": 0},
                "models": {"m": f"api:killed@{server.base_url}"}, "metrics": ["exact_match"]}
        cfg = tmp_path / "spec.yaml"
        cfg.write_text(yaml.safe_dump(spec), encoding="utf-8")
        home = tmp_path / "dagster"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
        env = {**os.environ, "DAGSTER_HOME": str(home), "FACETLAKE_TEST_API_KEY": "sk-kill-test", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "pipelines.cli", "run", str(cfg), "--lake", str(tmp_path / "lake")]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.time() + 300
            while len(server.received) < 3:
                assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
                assert time.time() < deadline, "the run never reached the model"
                time.sleep(0.1)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        instance = dg.DagsterInstance.from_config(str(home))
        stuck = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        assert [r.tags.get("facetlake/pid") for r in stuck] == [str(proc.pid)]  # the killed run holds its place
        second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert second.returncode == 0, second.stderr[-3000:]
        instance = dg.DagsterInstance.from_config(str(home))
        assert instance.get_run_by_id(stuck[0].run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])) == []
        from resources.lake.resource import LakeStore

        gens = LakeStore(root=str(tmp_path / "lake")).read("generations")
        assert gens.height == 40 and gens["sample_id"].n_unique() == 40
    finally:
        server.stop()
