"""``facetlake demo-agents`` and ``facetlake episodes`` (issue 17; registered on the main typer
app, imported at the bottom of pipelines/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import polars as pl
import typer

from pipelines.cli import CONFIG_DIR, EvaluationOption, LakeOption, _fail, _lake, _print_frame, _run_specs, app, console

TAU_BENCH_CONFIG = CONFIG_DIR / "tau_bench_airline.yaml"
ORACLE_LABELS = {"episode_pass": "reward", "action_match": "actions", "outputs_match": "outputs", "policy_compliance": "policy"}


def pass_k_table(summary: pl.DataFrame, oracle: str | None = None) -> pl.DataFrame:
    """One row per model x oracle x k: pass^k and pass@k with their 95% bootstrap intervals
    over tasks, eligible and excluded tasks (from ``episode_summary`` rows of kind pass_k)."""
    rows = summary.filter(pl.col("kind") == "pass_k")
    if oracle:
        rows = rows.filter(pl.col("oracle") == oracle)

    def ci(lo: float | None, hi: float | None) -> str:
        return "∅" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"

    return pl.DataFrame([
        {"model": r["model"], "oracle": r["oracle"], "k": r["k"], "pass^k": r["pass_hat_k"],
         "pass^k 95% CI": ci(r["pass_hat_k_low"], r["pass_hat_k_high"]), "pass@k": r["pass_at_k"],
         "pass@k 95% CI": ci(r["pass_at_k_low"], r["pass_at_k_high"]), "tasks": r["n_tasks"], "excluded (< k trials)": r["n_excluded"]}
        for r in rows.sort(["model", "oracle", "k"]).iter_rows(named=True)
    ])


def task_table(summary: pl.DataFrame, model: str, oracle: str = "episode_pass") -> pl.DataFrame:
    """Per task of ``model`` under ``oracle``: each trial's outcome (✓ pass, ✗ fail), c/n and
    pass^k for every k."""
    rows = summary.filter((pl.col("kind") == "task") & (pl.col("model") == model) & (pl.col("oracle") == oracle))
    if rows.height == 0:
        return pl.DataFrame()
    out: dict[str, dict] = {}
    for r in rows.sort(["task_id", "k"]).iter_rows(named=True):
        entry = out.setdefault(r["task_id"], {"task": r["task_id"]})
        if "trials" not in entry:
            trials = json.loads(r["detail"] or "{}").get("trials", [])
            entry["trials"] = "".join("✓" if t else "✗" for t in trials)
            entry["c/n"] = f"{r['n_pass']}/{r['n_trials']}"
        entry[f"pass^{r['k']}"] = r["pass_hat_k"]
    ordered = sorted(out.values(), key=lambda e: (int(e["task"]) if e["task"].isdigit() else 10**9, e["task"]))
    return pl.DataFrame(ordered)


def print_pass_k_brief(store, fingerprints) -> None:
    """One line per agent evaluation and model: pass^k of the environment reward for every
    k (what ``facetlake run`` shows after the summary; nothing for other evaluations)."""
    if not store.exists("episode_summary"):
        return
    rows = store.read("episode_summary", where={"fingerprint": list(fingerprints)}) if fingerprints else None
    if rows is None or rows.height == 0:
        return
    head = rows.filter((pl.col("kind") == "pass_k") & (pl.col("oracle") == "episode_pass")).sort(["model", "k"])
    for model in sorted(set(head["model"].to_list())):
        part = head.filter(pl.col("model") == model)
        ks = " · ".join(f"pass^{r['k']} {'∅' if r['pass_hat_k'] is None else format(r['pass_hat_k'], '.3f')}" for r in part.iter_rows(named=True))
        console.print(f"[bold]{model}[/] (environment reward, {part['n_tasks'][0]} tasks): {ks}", highlight=False)


def print_paired(summary: pl.DataFrame) -> None:
    """Print the task-paired agent comparisons (``episode_summary`` rows of kind paired), if any."""
    paired = summary.filter(pl.col("kind") == "paired") if summary.height else summary
    if paired.height:
        _print_frame(pl.DataFrame([
            {"candidate": r["model"], "baseline": r["baseline"], "oracle": r["oracle"], "k": r["k"], "tasks": r["n_tasks"],
             "Δ pass^k": r["value"], "95% CI": "∅" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
             "p": r["p_value"]} for r in paired.sort(["model", "oracle", "k"]).iter_rows(named=True)
        ]), title="agents compared on pass^k, task-paired (bootstrap over tasks, paired sign-flip test)")


def print_agent_results(store, fingerprint: str, show_tasks: bool = True, oracle: str = "episode_pass") -> None:
    """Print pass^k / pass@k per model and oracle, the per-task table, task-paired
    comparisons, consistency, oracle disagreements and the most often wrong actions."""
    summary = store.read("episode_summary", where={"fingerprint": fingerprint})
    if summary.height == 0:
        _fail(f"no episode_summary rows for {fingerprint[:12]}; run `facetlake run CONFIG` on an episodes evaluation first")
    _print_frame(pass_k_table(summary, oracle), title=f"pass^k and pass@k over tasks ({ORACLE_LABELS.get(oracle, oracle)} oracle)")
    others = pass_k_table(summary).filter(pl.col("oracle") != oracle)
    if others.height:
        _print_frame(others.select("model", "oracle", "k", "pass^k", "pass@k", "tasks", "excluded (< k trials)"),
                     title="the other oracles (tasks where they apply)")
    if show_tasks:
        for model in sorted(set(summary["model"].to_list())):
            table = task_table(summary, model, oracle)
            if table.height:
                _print_frame(table, title=f"{model}: per task, trials in order (✓ pass, ✗ fail)")
    print_paired(summary)
    cons = summary.filter(pl.col("kind") == "consistency")
    if cons.height:
        _print_frame(pl.DataFrame([
            {"model": r["model"], "oracle": r["oracle"], "tasks with >= 2 trials": r["n_tasks"], "trials disagree": r["n_pass"],
             "share": r["value"]} for r in cons.sort(["model", "oracle"]).iter_rows(named=True)
        ]), title="consistency across trials")
    dis = summary.filter(pl.col("kind") == "oracle_disagreement")
    if dis.height:
        rows = []
        for r in dis.sort(["model", "oracle", "oracle_b"]).iter_rows(named=True):
            d = json.loads(r["detail"])
            rows.append({"model": r["model"], "A": r["oracle"], "B": r["oracle_b"], "episodes": r["n_trials"],
                         "A pass, B fail": d["a_only"], "A fail, B pass": d["b_only"], "share disagreeing": r["value"]})
        _print_frame(pl.DataFrame(rows), title="oracles that disagree on the same episode")
    wrong = summary.filter(pl.col("kind") == "wrong_action")
    if wrong.height:
        _print_frame(wrong.sort(["model", "value"], descending=[False, True]).group_by("model", maintain_order=True).head(10)
                     .select("model", pl.col("label").alias("mismatch: action"), pl.col("n_trials").alias("episodes"),
                             pl.col("n_tasks").alias("tasks")), title="actions that most often go wrong (action oracle)")


@app.command("demo-agents")
def demo_agents(
    lake: Optional[str] = LakeOption,
    out: Path = typer.Option(Path("agents-report.html"), "--out", "-o", help="Where the HTML report is written."),
    tasks: bool = typer.Option(True, "--tasks/--no-tasks", help="Print the per-task table."),
) -> None:
    """Agent episodes end to end on τ-bench's published gpt-4o airline run (50 tasks x 4 trials).

    Ingests the τ-bench file (data/tau-bench, MIT) into the `episodes` table, scores every
    oracle (recorded reward, write actions against the ground truth, required outputs,
    the policy rule "explicit yes before a booking"), computes pass^k and pass@k for
    k = 1..4 with bootstrap intervals over tasks into `episode_summary`, prints them with
    the per-task table, and writes the HTML report (pass^k curve, task x trial grid, the
    actions that most often go wrong).
    """
    from pipelines.report import ReportError, write_report
    from resources.catalog import evaluation_row
    from resources.evaluation import EvaluationSpec

    store = _lake(lake)
    spec = EvaluationSpec.from_yaml(TAU_BENCH_CONFIG)
    _run_specs([spec], store, "facetlake demo-agents: mean per episode (model x score)")
    fingerprint = evaluation_row(store, spec.name)["fingerprint"]
    print_agent_results(store, fingerprint, show_tasks=tasks)
    try:
        path, statuses = write_report(store, fingerprint, out)
    except ReportError as exc:
        _fail(str(exc))
    agent_sections = [s for s, ok in statuses if s.startswith("agent") and ok]
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); agent sections: {', '.join(agent_sections) or 'none'}")


@app.command("episodes")
def episodes_cmd(
    fingerprint: str = EvaluationOption(required=True, help="An agent evaluation: its name (or a unique prefix), a fingerprint, or name@fp12."),
    oracle: str = typer.Option("episode_pass", help="Pass/fail score that the headline and per-task tables use: episode_pass, action_match, outputs_match, policy_compliance."),
    tasks: bool = typer.Option(True, "--tasks/--no-tasks", help="Print the per-task table."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Print an agent evaluation's pass^k / pass@k per oracle and k, per-task outcomes, task-paired comparisons, consistency and the most often wrong actions."""
    from metric_ops.agents import PASS_SCORES
    from resources.catalog import CatalogError, evaluation_row

    if oracle not in PASS_SCORES:
        _fail(f"unknown oracle score {oracle!r}; use one of {', '.join(PASS_SCORES)}")
    store = _lake(lake)
    if not store.exists("episode_summary"):
        _fail(f"no episode_summary table under {store.root}; run `facetlake demo-agents` or `facetlake run CONFIG` on an episodes evaluation first")
    try:
        fp = evaluation_row(store, fingerprint)["fingerprint"]
    except CatalogError as exc:
        _fail(str(exc))
    print_agent_results(store, fp, show_tasks=tasks, oracle=oracle)


__all__ = ["demo_agents", "episodes_cmd", "pass_k_table", "print_agent_results", "print_paired", "print_pass_k_brief", "task_table"]
