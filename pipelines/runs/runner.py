"""Run evaluations through Dagster from Python or the CLI.

Every materialisation goes through ``dagster.materialize`` against the same asset
definitions the Dagster UI shows, on the persistent instance (``$DAGSTER_HOME``, or the
project folder holding dagster.yaml), so runs started from the CLI appear in the UI.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, Iterable, Mapping, Sequence

import dagster as dg
import polars as pl

from assets.partitions import sync_partitions
from pipelines.definitions import ALL_ASSETS, ALL_CHECKS, build_resources
from pipelines.jobs import ALL_JOBS, job_for, with_siblings
from pipelines.runs.instance import get_instance
from pipelines.runs.instance_storage import hold_connections
from pipelines.runs.register import evaluation_partition, model_partition, pair_job, pair_selection, register
from pipelines.runs.run_health import process_tags
from assets.outbound_scope import BUDGET_GROUP_TAG
from resources.catalog import add_metrics, evaluation_row, evaluation_spec, pairs_of
from resources.catalog.spec import EvaluationSpec, ResolvedEvaluation, SpecError
from resources.lake.resource import LakeStore


#: asset name -> the name of its partition set (assets/partitions.py DIMENSIONS)
PARTITION_SET: dict[str, str] = {
    key.to_user_string(): asset.partitions_def.name
    for asset in ALL_ASSETS if isinstance(asset, dg.AssetsDefinition) and isinstance(asset.partitions_def, dg.DynamicPartitionsDefinition)
    for key in asset.keys
}


class RunResults(list):
    """The Dagster runs of one materialisation, in order (a list of
    ``ExecuteInProcessResult``): one run per partition set the selection spans (an agent
    pair: ``episodes``, then ``scores``), as Dagster runs hold one partitions definition."""

    @property
    def success(self) -> bool:
        return all(result.success for result in self)

    @property
    def run_id(self) -> str:
        return self[-1].run_id

    def get_asset_materialization_events(self) -> list:
        return [event for result in self for event in result.get_asset_materialization_events()]

    def get_asset_check_evaluations(self) -> list:
        return [check for result in self for check in result.get_asset_check_evaluations()]

    def asset_materializations_for_node(self, node: str) -> list:
        """The materialisations of the op ``node`` over every run (in run order)."""
        return [m for result in self if node in {n.name for n in result.job_def.nodes}
                for m in result.asset_materializations_for_node(node)]


def _materialize(
    selection: list[str],
    partition: str,
    lake: LakeStore,
    instance: dg.DagsterInstance,
    run_config: dict[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> RunResults:
    """Materialise ``selection`` (asset names, upstream first) for the partition key
    ``partition`` in this process, one run per partition set the selection spans, each under
    the named job that holds its part (:func:`pipelines.jobs.job_for`). ``run_config``'s
    ``ops`` section goes to the runs holding those ops. Stops at the first failed run
    (``execute_in_process`` raises on a failed step)."""
    groups: dict[str, list[str]] = {}
    for name in selection:
        groups.setdefault(PARTITION_SET.get(name, "pair" if ":" in str(partition) else "evaluation"), []).append(name)
    if any(not instance.has_dynamic_partition(dimension, str(partition)) for dimension in groups):
        sync_partitions(lake, instance)  # e.g. a lake registered under another Dagster home
    resources = build_resources(lake.root)
    resources["lake"] = lake
    config = {**(run_config or {}), "loggers": {"console": {"config": {"log_level": os.environ.get("FACETLAKE_LOG_LEVEL", "WARNING")}}}}
    # under the named job that holds the selection (the UI lists `evaluation_job`, `analysis_job`, ...,
    # not `__ephemeral_asset_job__`), subset to the selected assets and their checks, in this process
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, jobs=ALL_JOBS, resources=resources)
    results = RunResults()
    with hold_connections(instance):  # each run's creation, planned events and steps on kept SQLite connections
        for dimension, names in groups.items():
            part = dict(config)
            if "ops" in config:
                part["ops"] = {op: value for op, value in config["ops"].items() if op in with_siblings(names)}
                if not part["ops"]:
                    del part["ops"]
            job = defs.resolve_job_def(job_for(names, dimension))
            results.append(job.execute_in_process(
                run_config=part,
                instance=instance,
                partition_key=str(partition),
                asset_selection=[dg.AssetKey(name) for name in with_siblings(names)],
                tags={"facetlake/source": "cli", **process_tags(), **(tags or {})},  # pid/host: a killed run is found dead (issue 16)
            ))
    return results


def materialize_samples(fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance) -> RunResults:
    """Materialise ``samples`` (and its checks) for one evaluation (name, fingerprint or key)."""
    return _materialize(["samples"], evaluation_partition(lake, fingerprint), lake, instance)


def scores_run_config(metrics: Sequence[Any] | None) -> dict[str, Any]:
    """The run config of the ``scores`` op for ``metrics`` (:class:`MetricRequest` objects
    or names; None or empty: every metric of the evaluation): one typed request per metric."""
    requests = [{"name": m, "params": {}} if isinstance(m, str) else {"name": m.name, "params": dict(m.params)} for m in metrics or []]
    return {"ops": {"scores": {"config": {"metrics": requests}}}}


def materialize_model(
    model: str, fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance, metrics: Sequence[Any] | None = None,
    generate: bool = True,
) -> RunResults:
    """Materialise ``generations`` (unless ``generate=False``) and ``scores`` for one
    registered pair; ``metrics``: only these (requests or names, :func:`scores_run_config`)."""
    selection = ["generations", "annotations", "scores"] if generate else ["scores"]
    return _materialize(selection, model_partition(lake, model, fingerprint), lake, instance, scores_run_config(metrics))


def materialize_episodes(
    model: str, fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance, metrics: list[str] | None = None,
) -> RunResults:
    """Materialise ``episodes`` (read or run the agent's episodes) and ``scores`` for one agent partition (issue 17)."""
    return _materialize(["episodes", "scores"], model_partition(lake, model, fingerprint), lake, instance, scores_run_config(metrics))


def materialize_summary(fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance) -> RunResults:
    """Materialise ``summary`` for one evaluation (name, fingerprint or key)."""
    return _materialize(["summary"], evaluation_partition(lake, fingerprint), lake, instance)


def materialize_analysis(
    fingerprint: str, lake: LakeStore, instance: dg.DagsterInstance, with_summary: bool = True, assets: Iterable[str] | None = None,
) -> RunResults:
    """Materialise an evaluation's verdicts: ``summary`` (unless ``with_summary=False``),
    ``comparisons`` (with its regression check), ``correlations``, and for an agent
    evaluation ``episode_summary`` (pass@k / pass^k, issue 17); or exactly ``assets``
    (e.g. the stale ones, :func:`assets.freshness.stale_verdicts`)."""
    from resources.agents.episodes import has_episodes

    if assets is None:
        agents = ["episode_summary"] if has_episodes(lake, evaluation_row(lake, fingerprint)["fingerprint"]) else []
        assets = [*(["summary"] if with_summary else []), "comparisons", "correlations", *agents]
    return _materialize(list(assets), evaluation_partition(lake, fingerprint), lake, instance)


def refresh_verdicts(
    lake: LakeStore, fingerprints: Iterable[str], instance: dg.DagsterInstance | None = None,
) -> dict[str, list[str]]:
    """Recompute, in this process, every verdict of the given evaluations (64-hex
    fingerprints) that is older than the scores it summarises (assets/freshness.py): a run
    killed between its scores and its verdicts, or a scores change from any path.
    Evaluations that are not current (history, archived) are left as they are. Returns
    fingerprint -> the verdict assets recomputed (only evaluations that had stale ones).
    ``instance``: opened only when something is stale, when not given."""
    from assets.freshness import active_fingerprints, freshness

    stale = {fp: state.stale for fp, state in freshness(lake, active_fingerprints(lake, fingerprints)).items() if state.stale}
    if stale and instance is None:
        instance = get_instance(capture_logs=False)
    for fp, assets in stale.items():
        materialize_analysis(fp, lake, instance, assets=assets)
    return stale


def run_evaluation(
    spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance, *, take_over: bool = False, replace: bool = False
) -> ResolvedEvaluation:
    """Register ``spec`` and materialise samples, every model's generations and scores (the
    evaluation's current models, including those the inbox added), and its verdicts."""
    if spec.lm_eval and not spec.dataset.get("path"):
        raise SpecError(f"evaluation {spec.name!r} has an lm_eval: section and no dataset path: lm-eval runs the task "
                        "first; call pipelines.runs.lm_eval_run.run_lm_eval_spec (facetlake run does)")
    with hold_connections(instance):  # the instance's SQLite connections kept from registration to the verdicts
        resolved = register(spec, lake, instance, take_over=take_over, replace=replace, in_process=True)
        materialize_samples(resolved.fingerprint, lake, instance)
        selection = pair_selection(spec)
        group = {BUDGET_GROUP_TAG: uuid.uuid4().hex}  # one budget (spec budget: / --budget) over every pair of this run
        for pair in pairs_of(lake, resolved.fingerprint):
            resolved.reused.extend(reuse_lines(_materialize(selection, pair["partition_key"], lake, instance, tags=group), pair["model"]))
        refresh_verdicts(lake, [resolved.fingerprint], instance)  # the verdicts older than these scores (none when all was reused)
    return resolved


def reuse_lines(result: RunResults, model: str) -> list[str]:
    """What a pair run reused, from its materialisations' metadata: the model's outputs
    (unchanged source and samples) and the metrics whose scores were computed from identical
    inputs, and how many model and judge calls it sent and reused. One line each, for the CLI
    (the assets log them at INFO, below the console's level)."""
    lines = []
    sent = [0, 0, 0.0]  # calls sent, calls reused, USD
    for event in result.get_asset_materialization_events():
        key = event.asset_key.to_user_string() if event.asset_key else ""
        meta = {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
        if key == "generations" and meta.get("reused") is True:
            lines.append(f"{model}: outputs unchanged since run {str(meta.get('reused_from_run', ''))[:8]} (same source and samples)")
        if key == "scores" and meta.get("reused") not in (None, "", "none"):
            lines.append(f"{model}: scores kept for {meta['reused']} (same inputs, same metric signature)")
        if key in ("generations", "scores"):
            sent[0] += int(meta.get("calls_sent") or 0)
            sent[1] += int(meta.get("calls_reused") or 0)
            sent[2] += float(meta.get("spend_usd") or 0.0)
    if sent[0] or sent[1]:  # issue 30: what the run paid for and what it took from stored outputs and judge replies
        lines.append(f"{model}: {sent[0]} model/judge call(s) sent" + (f" ({sent[2]:.4f} USD)" if sent[2] else "")
                     + f", {sent[1]} reused (stored outputs and judge replies)")
    return lines


def launch_evaluation(
    spec: EvaluationSpec, lake: LakeStore, instance: dg.DagsterInstance, *, submit: bool = False, workers: int | None = None,
    take_over: bool = False, replace: bool = False, timeout_s: float | None = None,
) -> ResolvedEvaluation:
    """Like :func:`run_evaluation`, but every step is a Dagster run created on ``instance``
    through the code location (pipelines/runs/launch.py): ``submit`` queues them (pools, retries,
    run monitoring and the daemon apply); otherwise they go straight to the run launcher,
    ``workers`` pair runs at a time. Steps run on the configured executor (multiprocess or
    Celery workers). Samples first, then every pair in parallel, then the verdicts."""
    from pipelines.runs.launch import RunSpec, run_all, workspace

    share_cores(workers if not submit else None)
    resolved = register(spec, lake, instance, take_over=take_over, replace=replace)
    config = {"resources": {"lake": {"config": {"root": lake.root}}}}
    tags = {"facetlake/evaluation": spec.name, "facetlake/source": "cli-submit" if submit else "cli-launch",
            BUDGET_GROUP_TAG: uuid.uuid4().hex}  # one budget over every run of this command
    with workspace(instance) as context:
        ekey = evaluation_partition(lake, resolved.fingerprint)
        run_all(instance, context, [RunSpec("samples_job", ekey, tags, config)], submit, "samples", timeout_s=timeout_s)
        keys = [p["partition_key"] for p in pairs_of(lake, resolved.fingerprint)]
        run_all(instance, context, [RunSpec(pair_job(spec), key, tags, config) for key in keys], submit, "models", workers=workers,
                timeout_s=timeout_s)
        if pair_job(spec) == "agent_job":  # an agent's episodes, then their scores (one partition set per run)
            run_all(instance, context, [RunSpec("scores_job", key, tags, config) for key in keys], submit, "scores", workers=workers,
                    timeout_s=timeout_s)
        launch_verdicts(instance, context, lake, [resolved.fingerprint], submit, tags, timeout_s=timeout_s)
    return resolved


def launch_verdicts(
    instance: dg.DagsterInstance, context: Any, lake: LakeStore, fingerprints: Iterable[str], submit: bool,
    tags: Mapping[str, str], timeout_s: float | None = None,
) -> dict[str, list[str]]:
    """Start (``submit``: queue) and wait for the verdict jobs (pipelines/jobs.py
    ``verdict_jobs``) of the evaluations whose verdicts are older than their scores;
    returns fingerprint -> stale verdict assets (only those that had some)."""
    from assets.freshness import active_fingerprints, freshness
    from pipelines.jobs import verdict_jobs
    from pipelines.runs.launch import RunSpec, run_all

    stale = {fp: state.stale for fp, state in freshness(lake, active_fingerprints(lake, fingerprints)).items() if state.stale}
    config = {"resources": {"lake": {"config": {"root": lake.root}}}}
    specs = [RunSpec(job, evaluation_partition(lake, fp), dict(tags), config) for fp, assets in stale.items() for job in verdict_jobs(assets)]
    if specs:
        run_all(instance, context, specs, submit, "verdicts", timeout_s=timeout_s)
    return stale


def share_cores(concurrent_runs: int | None) -> None:
    """With ``concurrent_runs`` (> 1) pair runs at once on this machine, each run's lexical
    scoring gets its share of the cores (``FACETLAKE_SCORE_WORKERS`` = cores / runs, at least
    1) instead of a pool the size of the machine per run. Set in this process's environment
    before the code server starts, so the runs it launches inherit it; a value the user set
    is kept."""
    from metric_ops.scoring.parallel import WORKERS_ENV, usable_cpus

    if concurrent_runs and concurrent_runs > 1 and not os.environ.get(WORKERS_ENV, "").strip():
        os.environ[WORKERS_ENV] = str(max(1, usable_cpus() // concurrent_runs))


def stored_partitions(lake: LakeStore, fingerprint: str | None = None) -> list[tuple[str, str]]:
    """(model, fingerprint) of the current pairs (of the evaluation ``fingerprint`` names, a
    name, fingerprint or prefix; else of every active evaluation) with stored generations
    or agent episodes."""
    if not (lake.exists("generations") or lake.exists("episodes")) or not lake.exists("pairs"):
        return []
    pairs = lake.read("pairs").filter(pl.col("status") == "current")
    if fingerprint:
        pairs = pairs.filter(pl.col("fingerprint") == evaluation_row(lake, fingerprint)["fingerprint"])
    stored = pl.concat([lake.read(t, columns=["model", "fingerprint"]) for t in ("generations", "episodes") if lake.exists(t)]).unique()
    frame = pairs.join(stored, on=["model", "fingerprint"], how="semi").sort(["fingerprint", "model"])
    return [(r["model"], r["fingerprint"]) for r in frame.iter_rows(named=True)]


def rescore(
    metrics: Iterable[str], lake: LakeStore, instance: dg.DagsterInstance, fingerprint: str | None = None, force: bool = False,
    params: list[str] | None = None, submit: bool = False,
) -> list[dict[str, Any]]:
    """Score stored generations under ``metrics`` without regenerating, and make those
    metrics (with their parameters) part of each evaluation scored, so re-runs keep them.

    A partition that already has rows with the metric's current signature is skipped
    unless ``force``. Every evaluation in scope whose verdicts (summary, comparisons,
    correlations...) are older than its scores gets them recomputed, also when every metric
    was skipped (a run killed between its scores and its verdicts, assets/freshness.py).
    With ``submit`` every step is a run queued on the instance (``scores_job`` per pair,
    then the verdict jobs; see :func:`launch_evaluation`).
    Returns one record per partition: model, fingerprint, evaluation, metrics run or skipped,
    and ``verdicts_refreshed``: the evaluation's verdict assets recomputed (empty when fresh).
    """
    from metric_ops.registry import merged_params, metric_requests
    from resources.scoring.metric_inputs import build_metric

    requests = {r.name: r for r in metric_requests(metrics, list(params or []))}  # names and --param parsed once
    names = list(requests)
    done: list[dict[str, Any]] = []
    existing = committed_scores(lake)
    added: set[str] = set()
    for model, fp in stored_partitions(lake, fingerprint):
        row = evaluation_row(lake, fp)
        if row["name"] not in added:
            add_metrics(lake, row["name"], {n: dict(r.params) for n, r in requests.items()})
            added.add(row["name"])
        spec = evaluation_spec(lake, fp)
        todo = []
        for name in names:
            signature = build_metric(name, merged_params(spec.metric_params, name, requests[name].params))[0].signature()  # use_annotation aware
            have = existing is not None and existing.filter(
                (pl.col("model") == model) & (pl.col("fingerprint") == fp) & (pl.col("signature") == signature)
            ).height > 0
            if force or not have:
                todo.append(name)
        if todo and not submit:
            materialize_model(model, fp, lake, instance, metrics=[requests[n] for n in todo], generate=False)
        done.append({"model": model, "fingerprint": fp, "evaluation": row["name"], "scored": todo,
                     "skipped": [n for n in names if n not in todo]})
    # every evaluation in scope, not only those scored now: a run killed after its scores and before
    # its verdicts left them stale, and this command skipping "already scored" must repair them
    evaluations = list(dict.fromkeys(d["fingerprint"] for d in done))
    refreshed: dict[str, list[str]] = {}
    if submit:
        from assets.freshness import freshness
        from pipelines.runs.launch import RunSpec, run_all, workspace

        config = {"resources": {"lake": {"config": {"root": lake.root}}}}
        specs = [RunSpec("scores_job", model_partition(lake, d["model"], d["fingerprint"]), {"facetlake/source": "cli-submit"},
                         {**config, **scores_run_config([requests[n] for n in d["scored"]])})
                 for d in done if d["scored"]]
        if specs or any(state.stale for state in freshness(lake, evaluations).values()):  # no code server for nothing
            with workspace(instance) as context:
                if specs:
                    run_all(instance, context, specs, True, "scores")
                refreshed = launch_verdicts(instance, context, lake, evaluations, True, {"facetlake/source": "cli-submit"})
    else:
        refreshed = refresh_verdicts(lake, evaluations, instance)
    for d in done:
        d["verdicts_refreshed"] = refreshed.get(d["fingerprint"], [])
    return done


def committed_scores(lake: LakeStore) -> pl.DataFrame | None:
    """(model, fingerprint, signature) of the stored scores whose every row was written by a
    scores run that recorded its provenance in ``runs``. Rows committed by a run killed
    before its ``runs`` record (issue 16, item 7) are incomplete: left out here, so
    ``facetlake score`` redoes them instead of skipping them as already scored."""
    if not lake.exists("scores"):
        return None
    stored = lake.read("scores", columns=["model", "fingerprint", "signature", "run_id"]).unique()
    recorded = (lake.read("runs", where={"asset": "scores"}, columns=["run_id"])["run_id"].unique()
                if lake.exists("runs") else pl.Series("run_id", [], dtype=pl.String))
    return (stored.with_columns(pl.col("run_id").is_in(recorded.implode()).alias("recorded"))
            .group_by(["model", "fingerprint", "signature"]).agg(pl.col("recorded").all())
            .filter(pl.col("recorded")).drop("recorded"))


def scoring_outcome(lake: LakeStore, done: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """What a :func:`rescore` call stored, per model x fingerprint x metric it scored:
    rows ``scored``, ``error`` and ``unscored``, and the first error message
    (``first_error``, "" when none). Rows are found by the registry name in their
    ``params`` column (metric_ops/identity.py; filled from the signature for older rows).
    Empty frame when nothing was scored."""
    wanted = [(d["model"], d["fingerprint"], name) for d in done for name in d["scored"]]
    columns = {"model": pl.String, "fingerprint": pl.String, "metric": pl.String, "scored": pl.Int64,
               "error": pl.Int64, "unscored": pl.Int64, "first_error": pl.String}
    if not wanted or not lake.exists("scores"):
        return pl.DataFrame(schema=columns)
    from metric_ops.registry import REGISTRY

    where = {"fingerprint": sorted({fp for _, fp, _ in wanted}), "model": sorted({m for m, _, _ in wanted})}  # partitions pruned
    frame = lake.read("scores", where=where, columns=["model", "fingerprint", "sample_id", "status", "params"]).with_columns(
        pl.col("params").str.json_path_match("$.metric").alias("name")
    )
    # ``detail`` (reasoning, per-claim verdicts: the table's bulk) is read only for the rows shown
    errors = lake.read("scores", where={**where, "status": "error"}, columns=["model", "fingerprint", "params", "detail"]).with_columns(
        pl.col("params").str.json_path_match("$.metric").alias("name")
    )
    rows = []
    for model, fp, name in wanted:
        mine = (pl.col("model") == model) & (pl.col("fingerprint") == fp) & (pl.col("name") == name)
        part = frame.filter(mine)
        segments = None
        if getattr(REGISTRY.get(name), "corpus_level", False):
            # a corpus-level metric's corpus rows (sample_id null) stand for the segments they cover
            corpus = lake.read("scores", where={"fingerprint": fp, "model": model, "status": "scored"},
                               columns=["sample_id", "params", "detail"]).filter(
                pl.col("sample_id").is_null() & (pl.col("params").str.json_path_match("$.metric") == name))
            segments = corpus["detail"].str.json_path_match("$.n_segments").cast(pl.Int64).max() if corpus.height else None
        part = part.filter(pl.col("sample_id").is_not_null() | (pl.col("status") != "scored"))
        counts = dict(part.group_by("status").len().iter_rows())
        if segments is not None:
            counts["scored"] = counts.get("scored", 0) + int(segments)
        first_error = errors.filter(mine)["detail"]
        first = ""
        if first_error.len():
            try:
                first = str(json.loads(first_error[0]).get("error", ""))
            except (TypeError, ValueError):
                first = str(first_error[0])
        rows.append({"model": model, "fingerprint": fp, "metric": name, "scored": counts.get("scored", 0),
                     "error": counts.get("error", 0), "unscored": counts.get("unscored", 0), "first_error": first})
    return pl.DataFrame(rows, schema=columns)


def summary_table(lake: LakeStore, fingerprints: Iterable[str] | None = None) -> pl.DataFrame:
    """evaluation x model x metric: mean, n scored, n total (from the summary table) and the
    tie group (from the comparisons: 1 = statistically tied with the best; empty with one model)."""
    frame = lake.read("summary")
    if fingerprints is not None:
        frame = frame.filter(pl.col("fingerprint").is_in(list(fingerprints)))
    names = lake.read("evaluations", columns=["name", "fingerprint"]).unique(subset=["fingerprint"])
    frame = frame.join(names, on="fingerprint", how="left").rename({"name": "evaluation"})
    groups = pl.DataFrame(schema={"fingerprint": pl.String, "model": pl.String, "metric": pl.String, "tie group": pl.Int64})
    if lake.exists("comparisons"):
        comp = lake.read("comparisons", where={"kind": "model_metric"}, columns=["fingerprint", "model", "metric", "detail"])
        if comp.height:
            groups = comp.select("fingerprint", "model", "metric",
                                 pl.col("detail").str.json_path_match("$.tie_group").cast(pl.Int64, strict=False).alias("tie group"))
    frame = frame.join(groups, on=["fingerprint", "model", "metric"], how="left")
    return frame.select("evaluation", "model", "metric", "mean", "n_scored", "n_total", "tie group").sort(["evaluation", "model", "metric"])


__all__ = [
    "refresh_verdicts",
    "rescore",
    "run_evaluation",
    "scoring_outcome",
    "stored_partitions",
    "summary_table",
]
