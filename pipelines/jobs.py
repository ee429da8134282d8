"""Jobs over the partitioned assets (one partitions definition per job)."""

import dagster as dg

from assets.partitions import evaluation_partitions, pair_partitions

evaluation_job = dg.define_asset_job(
    "evaluation_job",
    selection=dg.AssetSelection.assets("generations", "annotations", "scores"),
    partitions_def=pair_partitions,
    description="Generate (or read precomputed) outputs and score them for one registered (evaluation, model) pair.",
)

scores_job = dg.define_asset_job(
    "scores_job",
    selection=dg.AssetSelection.assets("scores"),
    partitions_def=pair_partitions,
    description="Score stored generations of one pair (run config ops.scores.config.metrics: only those metrics); "
                "`facetlake score --submit` queues it.",
)

samples_job = dg.define_asset_job(
    "samples_job",
    selection=dg.AssetSelection.assets("samples"),
    partitions_def=evaluation_partitions,
    description="Load, normalise and validate an evaluation's dataset (one evaluation fingerprint).",
)

analysis_job = dg.define_asset_job(
    "analysis_job",
    selection=dg.AssetSelection.assets("summary", "comparisons", "correlations"),
    partitions_def=evaluation_partitions,
    description="An evaluation's verdicts: summary, comparisons (with its regression alert) and correlations. "
                "The analysis_sensor runs it after any change of the evaluation's scores.",
)

agent_job = dg.define_asset_job(
    "agent_job",
    selection=dg.AssetSelection.assets("episodes", "scores"),
    partitions_def=pair_partitions,
    description="Read (or run) an agent's episodes and score every oracle, for one registered (evaluation, agent) pair (issue 17).",
)

agent_analysis_job = dg.define_asset_job(
    "agent_analysis_job",
    selection=dg.AssetSelection.assets("episode_summary"),
    partitions_def=evaluation_partitions,
    description="pass@k / pass^k per agent and oracle, task-paired comparisons, consistency, for one agent evaluation. "
                "The analysis_sensor runs it after the evaluation's scores change.",
)

lm_eval_analysis_job = dg.define_asset_job(
    "lm_eval_analysis_job",
    selection=dg.AssetSelection.assets("lm_eval_summary"),
    partitions_def=evaluation_partitions,
    description="lm-eval's aggregates beside facetlake's (with the agreement check), for one evaluation lm-eval ran. "
                "The analysis_sensor runs it after the evaluation's scores change.",
)

# the job that recomputes each verdict asset (assets/freshness.py ALL_VERDICTS)
VERDICT_JOBS = {
    "summary": analysis_job.name, "comparisons": analysis_job.name, "correlations": analysis_job.name,
    "episode_summary": agent_analysis_job.name, "lm_eval_summary": lm_eval_analysis_job.name,
}


def verdict_jobs(assets) -> list[str]:
    """The jobs (names, in order, each once) that recompute the verdict ``assets`` (names from
    :data:`assets.freshness.ALL_VERDICTS`); raises KeyError for another asset."""
    return list(dict.fromkeys(VERDICT_JOBS[a] for a in assets))
