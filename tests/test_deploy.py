"""The shared-infrastructure profile, on real services: a PostgreSQL-backed Dagster
instance, the Celery executor with two workers on RabbitMQ, a Dagster daemon, and the lake
on an S3-compatible server (moto) on 127.0.0.1. Everything goes through the CLI as a user
would (`facetlake run --submit`, `facetlake score --submit`, `facetlake sql`).

Skips with the reason where a service is absent (tests/support/services.py).
"""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest

from tests.support.services import deployment, lake_env

# pytest-xdist: one worker runs this module: its deployment (PostgreSQL database, RabbitMQ vhost,
# moto, Celery workers, a daemon) is module-scoped and heavy (README "Tests")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("services")]
KEY_ENV = "FACETLAKE_TEST_API_KEY"
KEY = "sk-test-deploy-0c4e"

SPEC = """
name: deploy-demo
dataset: {kind: sfres, limit: 30}
models:
  sfres-system: "precomputed:column=system_output"
  copy-input: "heuristic:copy-input"
baseline: sfres-system
metrics: [token_f1, bleu]
"""


@pytest.fixture(scope="module")
def infra(tmp_path_factory):
    # the workers hold the API key of the live tests, as each worker machine would
    with deployment(tmp_path_factory.mktemp("deploy"), extra_env={KEY_ENV: KEY}) as infra:
        yield infra


@pytest.fixture
def s3_lake(infra, monkeypatch):
    """A LakeStore in this process over the deployment's S3 lake (credentials from the environment)."""
    from resources.lake.resource import LakeStore

    for key, value in lake_env(infra).items():
        monkeypatch.setenv(key, value)
    return LakeStore(root=infra.lake_uri)


def _diagnose(infra, result) -> str:
    return (f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}\n--- daemon\n{infra.log_tail('daemon')}"
            f"\n--- worker-1\n{infra.log_tail('worker-1')}")


def _runs_report(instance, runs, infra) -> str:
    """Every run that did not succeed, with the messages of its failure and engine events (a
    CI failure must say which run failed and why, not only that one did)."""
    import dagster as dg

    lines = []
    for run in runs:
        if run.status == dg.DagsterRunStatus.SUCCESS:
            continue
        lines.append(f"run {run.run_id[:8]} {run.job_name} {run.status.value} tags={dict(run.tags)}")
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is not None and event.event_type_value in ("RUN_FAILURE", "ENGINE_EVENT", "STEP_FAILURE", "RUN_CANCELED"):
                lines.append(f"  {event.event_type_value}: {(entry.user_message or event.message or '')[:600]}")
    return "\n".join(lines) + f"\n--- daemon\n{infra.log_tail('daemon')}"


def test_an_evaluation_runs_end_to_end_on_postgres_celery_and_object_storage(infra, s3_lake, tmp_path, monkeypatch):
    spec = tmp_path / "deploy-demo.yaml"
    spec.write_text(SPEC)
    result = infra.cli("run", str(spec), "--submit")
    assert result.returncode == 0, _diagnose(infra, result)
    scores = s3_lake.read("scores")
    assert scores.height == 2 * 30 * (1 + 1 + 0) + 30 * 3  # token_f1 + bleu per model, plus 3 human ratings for the system
    assert set(scores["model"]) == {"sfres-system", "copy-input"} and set(scores["status"]) == {"scored"}
    assert s3_lake.read("comparisons").height > 0 and s3_lake.read("summary").height > 0
    # the runs are in PostgreSQL, and their steps ran on the Celery workers
    import dagster as dg

    from dagster_postgres import PostgresRunStorage

    monkeypatch.setenv("FACETLAKE_PG_URL", infra.env["FACETLAKE_PG_URL"])
    # the analysis sensor may start a verdict run of its own just as the command's runs end:
    # let it finish before every run's outcome is judged (seen once on a loaded machine)
    _queue_is_free(infra)
    instance = dg.DagsterInstance.from_config(str(infra.home))
    try:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"facetlake/evaluation": "deploy-demo"}))
        # every run ended in success, or failed and was retried by Dagster's run retries (deploy/dagster.yaml
        # max_retries: 2) with a later attempt that succeeded; a retried failure is reported, not hidden
        latest = {}
        for run in sorted(runs, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp):
            latest[run.root_run_id or run.run_id] = run
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in latest.values()), _runs_report(instance, runs, infra)
        if any(r.status != dg.DagsterRunStatus.SUCCESS for r in runs):
            warnings.warn(f"a run failed and its retry succeeded:\n{_runs_report(instance, runs, infra)}", stacklevel=1)
        jobs = [r.job_name for r in runs]
        # samples, the two pairs, the verdicts (the analysis sensor may add one more verdicts run: idempotent)
        assert jobs.count("samples_job") == 1 and jobs.count("evaluation_job") == 2 and jobs.count("analysis_job") >= 1
    finally:
        instance.dispose()
    worked = [infra.log_tail(f"worker-{i}", 10**7).count("succeeded in") for i in (1, 2)]
    assert sum(worked) >= 4, worked  # steps were Celery tasks
    # the same lake through SQL
    sql = infra.cli("sql", "select model, count(*) as n from scores where metric = 'bleu' group by 1 order by 1", "--format", "json")
    assert sql.returncode == 0, _diagnose(infra, sql)
    assert json.loads(sql.stdout) == [{"model": "copy-input", "n": 30}, {"model": "sfres-system", "n": 30}]


def test_a_rescore_on_shared_infrastructure_leaves_generations_untouched(infra, s3_lake, tmp_path):
    if not s3_lake.exists("generations"):
        spec = tmp_path / "deploy-demo.yaml"
        spec.write_text(SPEC)
        assert infra.cli("run", str(spec), "--submit").returncode == 0
    before = s3_lake.version("generations")
    scores_before = s3_lake.version("scores")
    result = infra.cli("score", "--metric", "chrf", "-e", "deploy-demo", "--submit")
    assert result.returncode == 0, _diagnose(infra, result)
    assert s3_lake.version("generations") == before
    chrf = s3_lake.read("scores", where={"metric": "chrf"})
    assert chrf.height == 60 and set(chrf["status"]) == {"scored"}
    summary = s3_lake.read("summary").filter(pl.col("metric") == "chrf")
    assert summary.height == 2
    # time travel on the object store (issue 31): the scores before the rescore had no chrF, now 60 rows
    query = "select count(*) as n from scores where metric = 'chrf'"
    then = infra.cli("sql", "--as-of", f"scores={scores_before}", query, "--format", "json")
    assert then.returncode == 0, _diagnose(infra, then)
    assert json.loads(then.stdout) == [{"n": 0}] and "as of" in then.stderr
    assert json.loads(infra.cli("sql", query, "--format", "json").stdout) == [{"n": 60}]


# ----------------------------------------------------------------------------- live generation on the deployment
LIVE_N = 16


def _question(evaluation: str, i: int) -> str:
    return f"{evaluation}: question number {i}"  # each evaluation its own dataset content (and fingerprint)


def _live_spec(tmp_path, name: str, base_url: str, model: str, n: int = LIVE_N):
    """A live evaluation of ``n`` questions with unique texts against ``base_url`` (one
    request at a time, rows stored every 2 samples)."""
    import yaml

    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i:02d}", "question": _question(name, i), "answer": f"answer {i}"}) + "\n"
                            for i in range(n)))
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "name": name,
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "adapter": {"kind": "chat", "template": "{input}"},
        "generation": {"temperature": 0.0, "max_tokens": 8, "seed": 0},
        "runtime": {"api_key_env": KEY_ENV, "concurrency": 1, "write_batch_size": 2, "max_retries": 0},
        "models": {model: f"api:recording@{base_url}"},
        "metrics": ["token_f1"],
    }))
    return spec


def _requests_per_question(server) -> dict[str, int]:
    from collections import Counter

    asked = Counter()
    for raw in server.received:
        body = json.loads(raw)
        user = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
        asked[user[-1]] += 1
    return dict(asked)


@pytest.fixture
def live_server():
    from tests.support.recording_server import RecordingServer

    server = RecordingServer(api_key=KEY, delay_s=0.4).start()
    yield server
    server.stop()


def _runs_table(infra) -> str:
    """Every run of the deployment with its job, partition, status and times (for failure messages)."""
    import os

    import dagster as dg

    os.environ.setdefault("FACETLAKE_PG_URL", infra.env["FACETLAKE_PG_URL"])
    instance = dg.DagsterInstance.from_config(str(infra.home))
    try:
        lines = []
        for record in instance.get_run_records():
            run = record.dagster_run
            lines.append(f"{run.run_id[:8]} {run.job_name} {run.tags.get('dagster/partition')} {run.status.value} "
                         f"start={record.start_time} end={record.end_time}")
        return "\n".join(reversed(lines))
    finally:
        instance.dispose()


def _queue_is_free(infra, within_s: float = 120) -> None:
    """No run of this deployment is left QUEUED/STARTING/STARTED: runs the sensors start
    after ours (verdicts refreshed) may still be finishing, so wait a bounded time."""
    import os
    import time

    import dagster as dg

    old = os.environ.get("FACETLAKE_PG_URL")
    os.environ["FACETLAKE_PG_URL"] = infra.env["FACETLAKE_PG_URL"]
    instance = dg.DagsterInstance.from_config(str(infra.home))
    try:
        statuses = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
        deadline = time.monotonic() + within_s
        while (busy := instance.get_runs(filters=dg.RunsFilter(statuses=statuses))) and time.monotonic() < deadline:
            time.sleep(1)
        assert busy == [], [(r.run_id[:8], r.job_name, r.status.value) for r in busy]
    finally:
        instance.dispose()
        if old is None:
            os.environ.pop("FACETLAKE_PG_URL", None)
        else:
            os.environ["FACETLAKE_PG_URL"] = old


def test_two_concurrent_runs_on_one_lake_send_each_request_once(infra, s3_lake, tmp_path, live_server):
    """Two `facetlake run --submit` of one live evaluation from two processes at once: the
    run queue's pools keep one writer per table, so the second run finds the first one's
    generations stored and sends nothing again; no lost or duplicated rows."""
    import subprocess

    from tests.support.services import BIN, PROJECT_ROOT

    spec = _live_spec(tmp_path, "deploy-live-twice", live_server.base_url, "twice")
    env = infra.env
    procs = [subprocess.Popen([str(BIN / "facetlake"), "run", str(spec), "--submit"], cwd=PROJECT_ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, f"stdout: {out[-3000:]}\nstderr: {err[-3000:]}\n--- daemon\n{infra.log_tail('daemon')}"
    asked = _requests_per_question(live_server)
    assert sorted(asked) == sorted(_question("deploy-live-twice", i) for i in range(LIVE_N))
    assert set(asked.values()) == {1}, (_runs_table(infra), {q: n for q, n in asked.items() if n != 1})  # no request sent twice
    gens = s3_lake.read("generations").filter(pl.col("model") == "twice")
    assert gens.height == LIVE_N and gens["sample_id"].n_unique() == LIVE_N and set(gens["status"]) == {"ok"}
    scores = s3_lake.read("scores", where={"metric": "token_f1"}).filter(pl.col("model") == "twice")
    assert scores.height == LIVE_N and scores["sample_id"].n_unique() == LIVE_N
    _queue_is_free(infra)


def _busy_worker(infra) -> str:
    """The Celery worker whose log shows the most recent task received."""
    best, when = None, -1
    for name in [n for n in infra.processes if n.startswith("worker-")]:
        log = infra.log_tail(name, 10**7)
        position = log.rfind("received")
        if position > when:
            best, when = name, position
    assert best is not None
    return best


def test_a_worker_killed_mid_generation_is_recovered_without_duplicates(infra, s3_lake, tmp_path, live_server):
    """kill -9 of the Celery worker running the generation step: the broker hands the
    unacknowledged step to the other worker (task_acks_late + task_reject_on_worker_lost in
    deploy/celery.yaml), the step resumes from the stored rows, and the run succeeds: no
    duplicate rows, no stored sample asked again, the run queue free afterwards."""
    import signal
    import subprocess
    import time

    from tests.support.services import BIN, PROJECT_ROOT

    spec = _live_spec(tmp_path, "deploy-live-kill", live_server.base_url, "killed")
    env = infra.env
    proc = subprocess.Popen([str(BIN / "facetlake"), "run", str(spec), "--submit"], cwd=PROJECT_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stored() -> pl.DataFrame:
        if not s3_lake.exists("generations"):
            return pl.DataFrame({"sample_id": []}, schema={"sample_id": pl.Utf8})
        return s3_lake.read("generations").filter(pl.col("model") == "killed")

    deadline = time.time() + 600
    while stored().height < 4:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.time() < deadline, "the run did not store 4 generations in time"
        time.sleep(0.5)
    before = set(stored()["sample_id"])
    victim = _busy_worker(infra)
    infra.stop(victim, signal.SIGKILL)
    asked_at_kill = len(live_server.received)
    assert asked_at_kill < LIVE_N  # the kill interrupted the generation step
    infra.start_worker("worker-3")  # capacity comes back, as an autoscaler would
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"stdout: {out[-3000:]}\nstderr: {err[-3000:]}\n--- daemon\n{infra.log_tail('daemon')}"
    gens = stored()
    assert gens.height == LIVE_N and gens["sample_id"].n_unique() == LIVE_N and set(gens["status"]) == {"ok"}
    asked = _requests_per_question(live_server)
    stored_questions = {_question("deploy-live-kill", int(sid[1:])) for sid in before}
    assert all(asked[q] == 1 for q in stored_questions), asked  # finished samples were not generated again
    assert set(asked) == {_question("deploy-live-kill", i) for i in range(LIVE_N)}
    assert sum(asked.values()) <= LIVE_N + 2  # at most the one unsaved batch in flight is asked again
    assert len(live_server.received) > asked_at_kill  # the rest was generated after the kill, on another worker
    scores = s3_lake.read("scores", where={"metric": "token_f1"}).filter(pl.col("model") == "killed")
    assert scores.height == LIVE_N and scores["sample_id"].n_unique() == LIVE_N
    _queue_is_free(infra)
