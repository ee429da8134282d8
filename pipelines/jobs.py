"""Jobs over the partitioned assets (one partitions definition per job: a Dagster run holds
assets of one partitions definition, and kind-specific assets have partition sets of their
own, assets/partitions.py)."""

import dagster as dg

from assets.generations import SIDE_TABLES
from assets.partitions import (
    agent_evaluation_partitions,
    agent_pair_partitions,
    evaluation_partitions,
    lm_eval_partitions,
    pair_partitions,
)

#: job name -> the assets it materialises (in the order of its selection)
JOB_ASSETS: dict[str, tuple[str, ...]] = {}

#: tables one step writes together with another (a multi-asset that cannot be subset)
WRITTEN_WITH: dict[str, tuple[str, ...]] = {"generations": tuple(SIDE_TABLES)}


def with_siblings(selection) -> list[str]:
    """``selection`` (asset names) plus the tables written by the same step
    (:data:`WRITTEN_WITH`), in order, each once: what a run of the selection materialises."""
    return list(dict.fromkeys(name for asset in selection for name in (asset, *WRITTEN_WITH.get(asset, ()))))


def _job(name: str, assets: tuple[str, ...], partitions_def: dg.PartitionsDefinition, description: str):  # noqa: ANN202 - an unresolved asset job
    assets = tuple(with_siblings(assets))
    JOB_ASSETS[name] = assets
    return dg.define_asset_job(name, selection=dg.AssetSelection.assets(*assets), partitions_def=partitions_def, description=description)


evaluation_job = _job(
    "evaluation_job",
    ("generations", "annotations", "scores"),
    partitions_def=pair_partitions,
    description="Generate (or read precomputed) outputs and score them for one registered (evaluation, model) pair.",
)

scores_job = _job(
    "scores_job",
    ("scores",),
    partitions_def=pair_partitions,
    description="Score stored generations of one pair (run config ops.scores.config.metrics: [{name: chrf, params: {}}]: only those metrics); "
                "`facetlake score --submit` queues it.",
)

samples_job = _job(
    "samples_job",
    ("samples",),
    partitions_def=evaluation_partitions,
    description="Load, normalise and validate an evaluation's dataset (one evaluation fingerprint).",
)

analysis_job = _job(
    "analysis_job",
    ("summary", "comparisons", "correlations", "agreement"),
    partitions_def=evaluation_partitions,
    description="An evaluation's verdicts: summary, comparisons (with its regression alert), correlations and the "
                "reviewers' agreement. "
                "The analysis_sensor runs it after any change of the evaluation's scores.",
)

agent_job = _job(
    "agent_job",
    ("episodes",),
    partitions_def=agent_pair_partitions,
    description="Read (or run) an agent's episodes for one registered (evaluation, agent) pair (issue 17); the episodes_sensor "
                "then scores them (scores_job; the CLI runs both itself).",
)

agent_analysis_job = _job(
    "agent_analysis_job",
    ("episode_summary",),
    partitions_def=agent_evaluation_partitions,
    description="pass@k / pass^k per agent and oracle, task-paired comparisons, consistency, for one agent evaluation. "
                "The analysis_sensor runs it after the evaluation's scores change.",
)

lm_eval_analysis_job = _job(
    "lm_eval_analysis_job",
    ("lm_eval_summary",),
    partitions_def=lm_eval_partitions,
    description="lm-eval's aggregates beside facetlake's (with the agreement check), for one evaluation lm-eval ran. "
                "The analysis_sensor runs it after the evaluation's scores change.",
)

pairwise_job = _job(
    "pairwise_job",
    ("pairwise",),
    partitions_def=evaluation_partitions,
    description="Pairwise LLM judging of two models' outputs in both orders (`facetlake pairwise`; paid judge calls, "
                "never started by a sensor).",
)

ALL_JOBS = [evaluation_job, scores_job, samples_job, analysis_job, agent_job, agent_analysis_job, lm_eval_analysis_job,
            pairwise_job]


def job_for(selection, partitioned_by: str) -> str:
    """The name of the job a CLI run of ``selection`` (asset names) runs under, so the UI shows
    named jobs, not ``__ephemeral_asset_job__`` (issue 26, fault 12): the first job of
    :data:`ALL_JOBS` over ``partitioned_by`` (a partition set of assets/partitions.py
    ``DIMENSIONS``: ``pair``, ``evaluation``, ``agent_pair``, ...) whose assets are the
    selection, else the first whose assets hold it. Raises ``ValueError`` when none does (a new asset needs a job here)."""
    wanted = set(with_siblings(selection))
    holding = [job.name for job in ALL_JOBS
               if job.partitions_def is not None and job.partitions_def.name == partitioned_by and wanted <= set(JOB_ASSETS[job.name])]
    for name in holding:  # a job of exactly the selection first (a rescore shows as scores_job)
        if set(JOB_ASSETS[name]) == wanted:
            return name
    if holding:
        return holding[0]
    raise ValueError(f"no job materialises {sorted(wanted)} over {partitioned_by} partitions; add one to pipelines/jobs.py")


# the job that recomputes each verdict asset (assets/freshness.py ALL_VERDICTS)
VERDICT_JOBS = {
    "summary": analysis_job.name, "comparisons": analysis_job.name, "correlations": analysis_job.name,
    "agreement": analysis_job.name,
    "episode_summary": agent_analysis_job.name, "lm_eval_summary": lm_eval_analysis_job.name,
}


def verdict_jobs(assets) -> list[str]:
    """The jobs (names, in order, each once) that recompute the verdict ``assets`` (names from
    :data:`assets.freshness.ALL_VERDICTS`); raises KeyError for another asset."""
    return list(dict.fromkeys(VERDICT_JOBS[a] for a in assets))
