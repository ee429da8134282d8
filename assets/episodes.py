"""Agent episodes (issue 17): the ``episodes`` asset (one row per task x trial, per model x
fingerprint partition) and the ``episode_summary`` asset (pass@k / pass^k per oracle and
per task with bootstrap intervals over tasks, task-paired comparisons of agents,
consistency across trials and between oracles, the actions that most often go wrong; one
partition per fingerprint).

Episodes come from ``precomputed:FILE`` (τ-bench results or OpenAI-messages JSONL, read
by resources/agents/episodes.py) or are run live through a model backend against the task's
tool environment (resources/agents/runner.py, environments.py). The ``scores`` asset scores them (one
score row per episode, ``sample_id`` = ``<task>#<trial>``) with the oracles of
metric_ops/agents/oracles.py, so ``facetlake score`` rescores stored episodes without running
them again. ``episode_summary`` reads those score rows: corpus-level numbers are stored
once per (model, fingerprint), never repeated on every row.
"""


import itertools
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from tqdm.auto import tqdm

from assets.declare import delta_asset, table_metadata
from assets.common import evaluation_fingerprint, load_samples, markdown_table, partition_parts, record_run
from assets.freshness import scores_marker
from metric_ops.agents.oracles import PASS_SCORES
from metric_ops.agents.passk import inconsistent_tasks, is_pass, oracle_disagreement, paired_pass_k, pass_k_curve
from assets.partitions import EVALUATION_EDGE, agent_evaluation_partitions, agent_pair_partitions
from resources.backends import ModelBackends, parse_model_spec
from resources.catalog import evaluation_row, evaluation_spec, model_spec, utcnow
from resources.datasets import DatasetError
from resources.agents.episodes import episode_row, read_episodes
from resources.lake.resource import LakeStore
from resources.privacy.outbound import refuse_if_offline
from assets.outbound_scope import outbound_scope

EPISODES_COLUMNS = {
    "model": "model (agent) partition key",
    "fingerprint": "configuration fingerprint (the task set)",
    "task_id": "task id (= the sample id of the task)",
    "trial": "trial number of this task (0-based)",
    "episode_id": "<task_id>#<trial>: the sample_id of this episode's score rows",
    "messages": "the full trajectory, OpenAI chat messages as JSON",
    "tool_calls": "every tool call: name, arguments, id, message index, result, failed (JSON)",
    "final_answer": "the last thing the agent told the user",
    "n_turns": "assistant messages",
    "n_tool_calls": "tool calls made",
    "reward": "the environment's recorded reward (null when none)",
    "reward_info": "the environment's reward breakdown (JSON)",
    "status": "ok / error",
    "tokens_in": "prompt tokens over the episode, where recorded",
    "tokens_out": "generated tokens over the episode, where recorded",
    "cost": "the agent's cost, where recorded",
    "user_cost": "the simulated user's cost, where recorded (τ-bench)",
}
CHECK_UNIQUE = "check_episodes_unique_trials"
CHECK_KNOWN = "check_episodes_known_tasks"


class EpisodesConfig(dg.Config):
    """Run config of ``episodes``: ``trials`` (live runs only; default the spec's
    ``runtime.trials`` or 1) and ``max_turns`` (default the task's, else 12)."""

    trials: int = 0
    max_turns: int = 0


def _live_episodes(context, spec, samples, backend, backends, model: str, fingerprint: str, dataset: str, config: EpisodesConfig) -> list[dict[str, Any]]:
    from resources.agents.runner import DEFAULT_MAX_TURNS, USERS, run_episode
    from resources.agents.environments import EnvironmentLoadError, load_environment

    trials = config.trials or int(spec.runtime.get("trials", 1))
    rows = []
    with tqdm(total=len(samples) * trials, desc=f"episodes {model}", leave=False, disable=None) as bar:
        for task in samples:
            env_spec = task.metadata.get("environment")
            if not env_spec:
                raise dg.Failure(f"task {task.sample_id} names no tool environment: set dataset option environment: module:Class "
                                 "(a ToolEnvironment, resources/agents/environments.py) to run episodes live")
            try:
                env_cls = load_environment(str(env_spec))
            except EnvironmentLoadError as exc:
                raise dg.Failure(str(exc)) from None
            user_kind = str(task.metadata.get("user") or "scripted")
            if user_kind not in USERS:
                raise dg.Failure(f"task {task.sample_id}: unknown user {user_kind!r}; known: {', '.join(USERS)}")
            user_backend = None
            if user_kind == "model":
                if not task.metadata.get("user_model"):
                    raise dg.Failure(f"task {task.sample_id}: user: model needs user_model: SPEC in the dataset options (e.g. hf:/models/user-llm)")
                user_backend = backends.backend_for(str(task.metadata["user_model"]), spec.runtime)
                refuse_if_offline("user model", str(task.metadata["user_model"]), user_backend.locality)
            max_turns = config.max_turns or int(task.metadata.get("max_turns") or DEFAULT_MAX_TURNS)
            for trial in range(trials):
                user = USERS["model"](task, user_backend, spec.generation) if user_backend is not None else USERS[user_kind](task)
                record, error = run_episode(backend, env_cls(), task, trial, spec.generation, max_turns, user)
                rows.append(episode_row(record, model=model, fingerprint=fingerprint, dataset=dataset, run_id=context.run_id,
                                        created_at=utcnow(), backend=backend.kind, status="error" if error else "ok", error=error))
                bar.update(1)
    return rows


@delta_asset(
    "episodes",
    partitions_def=agent_pair_partitions,  # only agent evaluations' pairs (issue 26, fault 12)
    deps=[dg.AssetDep("samples", partition_mapping=EVALUATION_EDGE), "evaluation_models"],
    columns=EPISODES_COLUMNS,
    checks={
        CHECK_UNIQUE: "one episode per (task, trial)",
        CHECK_KNOWN: "every episode belongs to a task of the evaluation and ran without error",
    },
)
@outbound_scope  # anonymiser + outbound ledger when the agent is an API model
def episodes(context: dg.AssetExecutionContext, config: EpisodesConfig, lake: LakeStore, backends: ModelBackends) -> dg.MaterializeResult:
    """Agent episodes, one row per (task, trial): trajectory, tool calls, final answer, turns, tokens, cost, recorded reward."""
    started = utcnow()
    t0 = time.perf_counter()
    model, fingerprint = partition_parts(context)
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    spec_string = model_spec(lake, model, fingerprint)
    samples = load_samples(lake, fingerprint)
    known = {s.sample_id for s in samples}
    kind, target = parse_model_spec(spec_string)
    if kind == "precomputed":
        if target.startswith("column="):
            raise dg.Failure(f"model {model!r} is {spec_string!r}: agent episodes are read from a file (precomputed:FILE, "
                             "τ-bench results or OpenAI-messages JSONL) or run live (hf:, vllm:, api:)")
        try:
            records = [r for r in read_episodes(Path(target), "auto") if r.messages is not None]  # each agent's file: its own format
        except DatasetError as exc:
            raise dg.Failure(str(exc)) from None
        rows = []
        for r in records:
            unknown = r.task_id not in known
            rows.append(episode_row(
                r, model=model, fingerprint=fingerprint, dataset=dataset, run_id=context.run_id, created_at=utcnow(),
                backend="precomputed", status="error" if unknown else "ok",
                error=f"task {r.task_id!r} is not a task of evaluation {spec.name!r}" if unknown else None))
        import hashlib

        identity = {"backend": "precomputed", "file": target, "file_sha256": hashlib.sha256(Path(target).expanduser().read_bytes()).hexdigest()}
    else:
        backend = backends.backend_for(spec_string, spec.runtime)
        refuse_if_offline("backend", spec_string, backend.locality)
        rows = _live_episodes(context, spec, samples, backend, backends, model, fingerprint, dataset, config)
        identity = backend.identity()
    version = lake.replace("episodes", rows, {"model": model, "fingerprint": fingerprint})
    frame = pl.DataFrame(rows, schema_overrides={"reward": pl.Float64}) if rows else pl.DataFrame({"status": [], "task_id": [], "trial": []})
    n_err = int((frame["status"] == "error").sum()) if rows else 0
    record_run(
        lake, context, asset="episodes", table="episodes", version=version, rows=len(rows), started_at=started,
        model=model, fingerprint=fingerprint, dataset=dataset,
        provenance={"model_spec": spec_string, "model_identity": identity, "wall_s": time.perf_counter() - t0,
                    "samples_version": lake.version("samples")},
    )
    per_task = Counter(r["task_id"] for r in rows)
    dup = [k for k, n in Counter((r["task_id"], r["trial"]) for r in rows).items() if n > 1]
    bad = [{"episode": r["episode_id"], "error": r["error"]} for r in rows if r["status"] == "error"]
    return dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint, "model": model, **table_metadata(lake, "episodes", len(rows), version),
            "n_tasks": len(per_task), "n_error": n_err,
            "trials_per_task": dg.MetadataValue.json({str(k): v for k, v in Counter(per_task.values()).items()}),
            "mean_reward": float(frame["reward"].mean()) if rows and frame["reward"].null_count() < frame.height else 0.0,
            "model_identity": dg.MetadataValue.json(identity),
        },
        check_results=[
            dg.AssetCheckResult(check_name=CHECK_UNIQUE, passed=not dup, severity=dg.AssetCheckSeverity.ERROR,
                                metadata={"duplicates": dg.MetadataValue.json([list(d) for d in dup[:50]])}),
            dg.AssetCheckResult(check_name=CHECK_KNOWN, passed=not bad, severity=dg.AssetCheckSeverity.WARN,
                                metadata={"n_error": len(bad), "errors": dg.MetadataValue.json(bad[:50])}),
        ],
    )


# ============================================================================ episode_summary


class EpisodeSummaryConfig(dg.Config):
    """Bootstrap settings of ``episode_summary`` (resamples over tasks, seed, level)."""

    n_resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95


def trial_tables(scores: pl.DataFrame, episodes: pl.DataFrame, tasks: list[str]) -> dict[tuple[str, str], dict[str, list[bool]]]:
    """``{(model, oracle score): {task_id: [passed, ...] in trial order}}`` from the pass/fail
    score rows of every oracle (:data:`metric_ops.agents.oracles.PASS_SCORES`).

    An episode counts when its oracle row is ``scored``; a task enters an oracle's table
    when at least one of its episodes was scored by it, or when the model has no episode
    of it at all (then with no trial: excluded from every k and counted)."""
    ids = episodes.select("model", "episode_id", "task_id", "trial")
    rows = scores.filter(pl.col("metric").is_in(list(PASS_SCORES)) & (pl.col("status") == "scored"))
    rows = rows.join(ids, left_on=["model", "sample_id"], right_on=["model", "episode_id"], how="inner").sort(["model", "metric", "task_id", "trial"])
    out: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(dict)
    for r in rows.iter_rows(named=True):
        out[(r["model"], r["metric"])].setdefault(r["task_id"], []).append(is_pass(r["value"]))
    for model in sorted(set(episodes["model"].to_list())):
        ran = set(episodes.filter(pl.col("model") == model)["task_id"].to_list())
        for (m, metric), table in out.items():
            if m == model:
                for t in tasks:
                    if t not in ran:
                        table.setdefault(t, [])
    return dict(out)


def _base_row(fingerprint: str, dataset: str, kind: str, model: str, oracle: str | None, run_id: str, now: Any) -> dict[str, Any]:
    row = {c: None for c in ("baseline", "oracle_b", "k", "task_id", "label", "n_tasks", "n_excluded", "n_trials", "n_pass",
                              "pass_at_k", "pass_at_k_low", "pass_at_k_high", "pass_hat_k", "pass_hat_k_low", "pass_hat_k_high",
                              "value", "ci_low", "ci_high", "p_value", "signature", "reads")}
    row.update(fingerprint=fingerprint, dataset=dataset, kind=kind, model=model, oracle=oracle, detail="{}", run_id=run_id, created_at=now)
    return row


def summary_rows(
    scores: pl.DataFrame, episodes: pl.DataFrame, tasks: list[str], fingerprint: str, dataset: str, run_id: str,
    baseline: str | None = None, config: EpisodeSummaryConfig | None = None,
) -> list[dict[str, Any]]:
    """Every ``episode_summary`` row of one fingerprint (see the module docstring). Kinds:
    ``pass_k`` (model x oracle x k), ``task`` (model x oracle x task x k), ``paired``
    (candidate vs baseline x oracle x k, task-paired), ``consistency`` (model x oracle:
    share of tasks whose trials disagree), ``oracle_disagreement`` (model x oracle pair),
    ``wrong_action`` (model x mismatch kind and tool, from the action oracle's detail)."""
    from metric_ops.compare import model_pairs

    config = config or EpisodeSummaryConfig()
    now = utcnow()
    tables = trial_tables(scores, episodes, tasks)
    sigs = {(r["model"], r["metric"]): r["signature"] for r in scores.select("model", "metric", "signature").unique(["model", "metric"]).iter_rows(named=True)}
    stats_sig = f"passk|v:1|ci:bootstrap-percentile|level:{config.confidence}|n_resamples:{config.n_resamples}|seed:{config.seed}|pass:>=1-1e-6"
    rows: list[dict[str, Any]] = []
    bootstrap = dict(confidence=config.confidence, n_resamples=config.n_resamples, seed=config.seed)
    # every model gets the same k range per oracle (1 .. the most trials any model has), so a
    # model with fewer trials shows its tasks excluded and counted at the larger k
    k_max = defaultdict(int)
    for (_, oracle), table in tables.items():
        k_max[oracle] = max(k_max[oracle], max((len(v) for v in table.values()), default=0))
    for (model, oracle), table in sorted(tables.items()):
        signature = f"{sigs.get((model, oracle), oracle)}||{stats_sig}"
        scored = [t for t, v in table.items() if v]
        for res in pass_k_curve(table, ks=range(1, k_max[oracle] + 1), **bootstrap):
            row = _base_row(fingerprint, dataset, "pass_k", model, oracle, run_id, now)
            row.update(k=res.k, n_tasks=res.n_tasks, n_excluded=res.n_excluded, n_trials=res.n_trials, n_pass=res.n_pass,
                       pass_at_k=res.pass_at_k, pass_at_k_low=res.pass_at_k_ci[0], pass_at_k_high=res.pass_at_k_ci[1],
                       pass_hat_k=res.pass_hat_k, pass_hat_k_low=res.pass_hat_k_ci[0], pass_hat_k_high=res.pass_hat_k_ci[1],
                       signature=signature,
                       detail=json.dumps({"excluded_tasks": list(res.excluded[:100]), "note": res.note}))
            rows.append(row)
            for task_id, (n, c, at, hat) in res.per_task.items():
                t = _base_row(fingerprint, dataset, "task", model, oracle, run_id, now)
                t.update(k=res.k, task_id=task_id, n_trials=n, n_pass=c, pass_at_k=at, pass_hat_k=hat, signature=signature,
                         detail=json.dumps({"trials": [bool(x) for x in table[task_id]]}))
                rows.append(t)
        bad, n_repeated = inconsistent_tasks(table)
        c = _base_row(fingerprint, dataset, "consistency", model, oracle, run_id, now)
        c.update(n_tasks=n_repeated, n_pass=len(bad), n_trials=sum(len(v) for v in table.values()), signature=signature,
                 value=len(bad) / n_repeated if n_repeated else None,
                 detail=json.dumps({"inconsistent_tasks": bad, "tasks_scored": len(scored)}))
        rows.append(c)
    models = sorted({m for m, _ in tables})
    for base, cand in model_pairs(models, baseline):
        for oracle in sorted({o for _, o in tables}):
            a, b = tables.get((cand, oracle)), tables.get((base, oracle))
            if not a or not b:
                continue
            ks = range(1, max(max((len(v) for v in a.values()), default=0), max((len(v) for v in b.values()), default=0)) + 1)
            for k in ks:
                res = paired_pass_k(a, b, k, **bootstrap)
                p = _base_row(fingerprint, dataset, "paired", cand, oracle, run_id, now)
                p.update(baseline=base, k=k, n_tasks=res.n_tasks, n_excluded=res.n_excluded, pass_hat_k=res.candidate_hat,
                         value=res.delta_hat, ci_low=res.delta_hat_ci[0], ci_high=res.delta_hat_ci[1], p_value=res.p_value,
                         signature=f"{oracle}||{stats_sig}|test:{res.test}",
                         detail=json.dumps({"baseline_pass_hat_k": res.baseline_hat, "delta_pass_at_k": res.delta_at,
                                            "wins": res.wins, "losses": res.losses, "ties": res.ties, "test": res.test, "note": res.note}))
                rows.append(p)
    rows.extend(_disagreement_rows(scores, fingerprint, dataset, run_id, now))
    rows.extend(_wrong_action_rows(scores, episodes, fingerprint, dataset, run_id, now))
    return rows


def _disagreement_rows(scores: pl.DataFrame, fingerprint: str, dataset: str, run_id: str, now: Any) -> list[dict[str, Any]]:
    rows = []
    ok = scores.filter(pl.col("metric").is_in(list(PASS_SCORES)) & (pl.col("status") == "scored"))
    for model in sorted(set(ok["model"].to_list())):
        outcomes: dict[str, dict[str, bool]] = defaultdict(dict)
        for r in ok.filter(pl.col("model") == model).iter_rows(named=True):
            outcomes[r["sample_id"]][r["metric"]] = is_pass(r["value"])
        present = sorted({m for o in outcomes.values() for m in o})
        for a, b in itertools.combinations(present, 2):
            d = oracle_disagreement(outcomes, a, b)
            if d["n"] == 0:
                continue
            row = _base_row(fingerprint, dataset, "oracle_disagreement", model, a, run_id, now)
            row.update(oracle_b=b, n_trials=d["n"], value=d["share"], n_pass=d["both_pass"], detail=json.dumps(d))
            rows.append(row)
    return rows


def _wrong_action_rows(scores: pl.DataFrame, episodes: pl.DataFrame, fingerprint: str, dataset: str, run_id: str, now: Any) -> list[dict[str, Any]]:
    rows = []
    acts = scores.filter((pl.col("metric") == "action_match") & (pl.col("status") == "scored") & (pl.col("value") < 1.0))
    task_of = {(r["model"], r["episode_id"]): r["task_id"] for r in episodes.select("model", "episode_id", "task_id").iter_rows(named=True)}
    for model in sorted(set(acts["model"].to_list())):
        seen: dict[str, dict[str, Any]] = {}
        for r in acts.filter(pl.col("model") == model).iter_rows(named=True):
            detail = json.loads(r["detail"] or "{}")
            for m in {(m["kind"], m["action"]): m for m in detail.get("mismatches") or []}.values():
                label = f"{m['kind']}: {m['action']}"
                entry = seen.setdefault(label, {"episodes": [], "tasks": set(), "reasons": []})
                entry["episodes"].append(r["sample_id"])
                entry["tasks"].add(task_of.get((model, r["sample_id"]), r["sample_id"]))
                if len(entry["reasons"]) < 3 and m.get("reason"):
                    entry["reasons"].append(m["reason"][:300])
        for label, entry in sorted(seen.items(), key=lambda kv: (-len(kv[1]["episodes"]), kv[0])):
            row = _base_row(fingerprint, dataset, "wrong_action", model, "action_match", run_id, now)
            row.update(label=label, value=float(len(entry["episodes"])), n_trials=len(entry["episodes"]), n_tasks=len(entry["tasks"]),
                       detail=json.dumps({"episodes": entry["episodes"][:20], "tasks": sorted(entry["tasks"]), "reasons": entry["reasons"]}))
            rows.append(row)
    return rows


@delta_asset(
    "episode_summary",
    partitions_def=agent_evaluation_partitions,  # only agent evaluations (issue 26, fault 12)
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE), dg.AssetDep("episodes", partition_mapping=EVALUATION_EDGE)],
    kinds={"polars"},
)
def episode_summary(context: dg.AssetExecutionContext, config: EpisodeSummaryConfig, lake: LakeStore) -> dg.MaterializeResult:
    """Corpus-level agent results per fingerprint: pass@k and pass^k per model x oracle x k (bootstrap over tasks), per task, task-paired comparisons, consistency."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)  # the analysis sensor runs it after the scores change
    row = evaluation_row(lake, fingerprint)
    fingerprint = row["fingerprint"]
    spec = evaluation_spec(lake, fingerprint)
    reads = {"scores": lake.version("scores"), "episodes": lake.version("episodes")}
    eps = lake.read("episodes", where={"fingerprint": fingerprint}, columns=["model", "episode_id", "task_id", "trial"])
    stored = lake.read("scores", where={"fingerprint": fingerprint})
    marker = scores_marker(stored)  # the scores this verdict summarises (assets/freshness.py)
    scores = stored.filter(pl.col("metric").is_in(list(PASS_SCORES) + ["action_match"]))
    tasks = lake.read("samples", where={"fingerprint": fingerprint}, columns=["sample_id", "position"]).sort("position")["sample_id"].to_list()
    rows = summary_rows(scores, eps, tasks, fingerprint, row["dataset"], context.run_id, getattr(spec, "baseline", None), config)
    for r in rows:
        r["reads"] = json.dumps(reads)
    version = lake.replace("episode_summary", rows, {"fingerprint": fingerprint})
    record_run(lake, context, asset="episode_summary", table="episode_summary", version=version, rows=len(rows), started_at=started,
               fingerprint=fingerprint, dataset=row["dataset"],
               provenance={"read": reads, "reads": {"scores_marker": marker}, "bootstrap": config.model_dump()})
    head = [r for r in rows if r["kind"] == "pass_k"]
    table = pl.DataFrame([{"model": r["model"], "oracle": r["oracle"], "k": r["k"], "pass^k": r["pass_hat_k"], "pass@k": r["pass_at_k"],
                           "tasks": r["n_tasks"], "excluded": r["n_excluded"]} for r in head]) if head else pl.DataFrame()
    return dg.MaterializeResult(metadata={
        "fingerprint": fingerprint, "dataset": row["dataset"], **table_metadata(lake, "episode_summary", len(rows), version),
        "pass_k": dg.MetadataValue.md(markdown_table(table)), "reads": dg.MetadataValue.json(reads),
    })
