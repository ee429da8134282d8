"""Agent-evaluation tables for the command line (issue 17): pass^k / pass@k per model and
oracle, per-task trials, task-paired comparisons, consistency and oracle disagreements,
read from ``episode_summary`` rows. Used by ``facetlake run``, ``compare``, ``episodes`` and
``demo-agents``."""

from __future__ import annotations

import json

import polars as pl

from pipelines.cli.common import console, fail, print_frame

ORACLE_LABELS = {"episode_pass": "reward", "action_match": "actions", "outputs_match": "outputs", "policy_compliance": "policy"}


def pass_k_table(summary: pl.DataFrame, oracle: str | None = None, numbers: bool = False) -> pl.DataFrame:
    """One row per model x oracle x k: pass^k and pass@k with their 95% bootstrap intervals
    over tasks, eligible and excluded tasks (from ``episode_summary`` rows of kind pass_k).

    ``numbers`` (``episodes --format csv|json``): each interval as two number columns
    (``pass^k 95% CI low`` and ``... high``) instead of one ``[low, high]`` text."""
    rows = summary.filter(pl.col("kind") == "pass_k")
    if oracle:
        rows = rows.filter(pl.col("oracle") == oracle)

    def ci(name: str, lo: float | None, hi: float | None) -> dict:
        if numbers:
            return {f"{name} 95% CI low": lo, f"{name} 95% CI high": hi}
        return {f"{name} 95% CI": "∅" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"}

    return pl.DataFrame([
        {"model": r["model"], "oracle": r["oracle"], "k": r["k"], "pass^k": r["pass_hat_k"],
         **ci("pass^k", r["pass_hat_k_low"], r["pass_hat_k_high"]), "pass@k": r["pass_at_k"],
         **ci("pass@k", r["pass_at_k_low"], r["pass_at_k_high"]), "tasks": r["n_tasks"], "excluded (< k trials)": r["n_excluded"]}
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
        print_frame(pl.DataFrame([
            {"candidate": r["model"], "baseline": r["baseline"], "oracle": r["oracle"], "k": r["k"], "tasks": r["n_tasks"],
             "Δ pass^k": r["value"], "95% CI": "∅" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
             "p": r["p_value"]} for r in paired.sort(["model", "oracle", "k"]).iter_rows(named=True)
        ]), title="agents compared on pass^k, task-paired (bootstrap over tasks, paired sign-flip test)")


def print_agent_results(store, fingerprint: str, show_tasks: bool = True, oracle: str = "episode_pass") -> None:
    """Print pass^k / pass@k per model and oracle, the per-task table, task-paired
    comparisons, consistency, oracle disagreements and the most often wrong actions."""
    summary = store.read("episode_summary", where={"fingerprint": fingerprint})
    if summary.height == 0:
        fail(f"no episode_summary rows for {fingerprint[:12]}; run `facetlake run CONFIG` on an episodes evaluation first")
    print_frame(pass_k_table(summary, oracle), title=f"pass^k and pass@k over tasks ({ORACLE_LABELS.get(oracle, oracle)} oracle)")
    others = pass_k_table(summary).filter(pl.col("oracle") != oracle)
    if others.height:
        print_frame(others.select("model", "oracle", "k", "pass^k", "pass@k", "tasks", "excluded (< k trials)"),
                     title="the other oracles (tasks where they apply)")
    if show_tasks:
        for model in sorted(set(summary["model"].to_list())):
            table = task_table(summary, model, oracle)
            if table.height:
                print_frame(table, title=f"{model}: per task, trials in order (✓ pass, ✗ fail)")
    print_paired(summary)
    cons = summary.filter(pl.col("kind") == "consistency")
    if cons.height:
        print_frame(pl.DataFrame([
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
        print_frame(pl.DataFrame(rows), title="oracles that disagree on the same episode")
    wrong = summary.filter(pl.col("kind") == "wrong_action")
    if wrong.height:
        print_frame(wrong.sort(["model", "value"], descending=[False, True]).group_by("model", maintain_order=True).head(10)
                     .select("model", pl.col("label").alias("mismatch: action"), pl.col("n_trials").alias("episodes"),
                             pl.col("n_tasks").alias("tasks")), title="actions that most often go wrong (action oracle)")
