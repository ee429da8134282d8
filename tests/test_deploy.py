"""The shared-infrastructure profile, on real services: a PostgreSQL-backed Dagster
instance, the Celery executor with two workers on RabbitMQ, a Dagster daemon, and the lake
on an S3-compatible server (moto) on 127.0.0.1. Everything goes through the CLI as a user
would (`facetlake run --submit`, `facetlake score --submit`, `facetlake sql`).

Skips with the reason where a service is absent (tests/support/services.py).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.support.services import deployment, lake_env

pytestmark = pytest.mark.slow

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
    with deployment(tmp_path_factory.mktemp("deploy")) as infra:
        yield infra


@pytest.fixture
def s3_lake(infra, monkeypatch):
    """A LakeStore in this process over the deployment's S3 lake (credentials from the environment)."""
    from resources.lake import LakeStore

    for key, value in lake_env(infra).items():
        monkeypatch.setenv(key, value)
    return LakeStore(root=infra.lake_uri)


def _diagnose(infra, result) -> str:
    return (f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}\n--- daemon\n{infra.log_tail('daemon')}"
            f"\n--- worker-1\n{infra.log_tail('worker-1')}")


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
    instance = dg.DagsterInstance.from_config(str(infra.home))
    try:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"facetlake/evaluation": "deploy-demo"}))
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
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
    result = infra.cli("score", "--metric", "chrf", "-e", "deploy-demo", "--submit")
    assert result.returncode == 0, _diagnose(infra, result)
    assert s3_lake.version("generations") == before
    chrf = s3_lake.read("scores", where={"metric": "chrf"})
    assert chrf.height == 60 and set(chrf["status"]) == {"scored"}
    summary = s3_lake.read("summary").filter(pl.col("metric") == "chrf")
    assert summary.height == 2
