"""CLI runs run under the named jobs the UI lists, not Dagster's ``__ephemeral_asset_job__``
(issue 26, fault 12), with the selected assets' checks still evaluated."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.jobs import ALL_JOBS, JOB_ASSETS, job_for


def test_every_cli_selection_has_a_named_job():
    assert job_for(["samples"], "evaluation") == "samples_job"
    assert job_for(["generations", "annotations", "scores"], "pair") == "evaluation_job"
    assert job_for(["scores"], "pair") == "scores_job"  # the job of exactly the selection
    assert job_for(["generations", "scores"], "pair") == "evaluation_job"  # else the first job that holds it
    assert job_for(["episodes"], "agent_pair") == "agent_job"
    assert job_for(["summary", "comparisons", "correlations"], "evaluation") == "analysis_job"
    assert job_for(["episode_summary"], "agent_evaluation") == "agent_analysis_job"
    assert job_for(["lm_eval_summary"], "lm_eval_evaluation") == "lm_eval_analysis_job"
    assert job_for(["pairwise"], "evaluation") == "pairwise_job"
    with pytest.raises(ValueError, match="no job materialises"):
        job_for(["samples", "scores"], "pair")
    with pytest.raises(ValueError, match="no job materialises"):  # kind-specific assets have partition sets of their own
        job_for(["episodes", "scores"], "pair")
    with pytest.raises(ValueError, match="no job materialises"):
        job_for(["comparisons", "episode_summary"], "evaluation")
    assert set(JOB_ASSETS) == {j.name for j in ALL_JOBS}


def test_a_cli_run_shows_named_jobs_and_runs_the_checks(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path / "lake"))
    before = {r.run_id for r in instance.get_runs()}
    run_evaluation(small_spec(name="named-jobs", limit=10), lake, instance)
    runs = [r for r in instance.get_runs() if r.run_id not in before]
    names = sorted({r.job_name for r in runs})
    assert names and set(names) <= set(JOB_ASSETS), names
    assert {"samples_job", "evaluation_job"} <= set(names)
    checks = instance.get_records_for_run(
        run_id=next(r.run_id for r in runs if r.job_name == "samples_job"),
        of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    assert len(checks) >= 2  # the samples checks ran in the named job's subset
