"""Report sections for agent episodes (issue 17), added to the HTML report of an evaluation
whose fingerprint has episodes (pipelines/report/__init__.py calls :func:`load_agent_data` and
:func:`agent_sections`):

- ``agents-passk``: the pass^k curve against k (and pass@k, dashed) per model and oracle,
  with the 95% bootstrap band over tasks, and the table behind it (eligible and excluded
  tasks per k);
- ``agents-grid``: the per-task outcome grid, task x trial, per model (pass / fail /
  not run), with c/n and pass^k per task;
- ``agents-actions``: the actions that most often go wrong (action oracle: missing,
  wrong arguments, unexpected writes), with example reasons;
- ``agents-consistency``: the share of tasks whose trials disagree, the oracles that
  disagree on the same episode, and agents compared task-paired.

Every number is read from the ``episode_summary`` and ``episodes`` tables.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from pipelines.report.data import ReportData
from pipelines.report.html import PALETTE, Figures, Section, absent, esc, fmt, html_table
from resources.lake.resource import LakeStore

ORACLE_NAMES = {"episode_pass": "reward (environment)", "action_match": "write actions", "outputs_match": "required outputs",
                "policy_compliance": "policy rule"}


def load_agent_data(lake: LakeStore, fingerprint: str) -> dict[str, Any] | None:
    """``{"summary": episode_summary rows, "episodes": episodes (no trajectories)}`` for
    ``fingerprint``; None when it has no episodes."""
    if not lake.exists("episodes"):
        return None
    episodes = lake.read("episodes", where={"fingerprint": fingerprint},
                         columns=["model", "task_id", "trial", "episode_id", "reward", "status", "n_turns", "n_tool_calls"])
    if episodes.height == 0:
        return None
    summary = lake.read("episode_summary", where={"fingerprint": fingerprint}) if lake.exists("episode_summary") else pl.DataFrame()
    return {"summary": summary, "episodes": episodes, "version": lake.version("episode_summary")}


def _rows(d: ReportData, kind: str) -> pl.DataFrame:
    summary = d.agents["summary"] if d.agents else pl.DataFrame()
    return summary.filter(pl.col("kind") == kind) if summary.height else summary


def _task_order(tasks: list[str]) -> list[str]:
    return sorted(set(tasks), key=lambda t: (0, int(t), t) if t.isdigit() else (1, 0, t))


def section_passk(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Agent pass^k curve (pass^k and pass@k against k)"
    rows = _rows(d, "pass_k")
    if rows.height == 0:
        return absent("agents-passk", title, "no episode_summary rows: materialise episode_summary (facetlake score or run does it)")
    fig = go.Figure()
    series = sorted({(r["model"], r["oracle"]) for r in rows.iter_rows(named=True)}, key=lambda s: (s[1] != "episode_pass", s))
    for i, (model, oracle) in enumerate(series):
        part = rows.filter((pl.col("model") == model) & (pl.col("oracle") == oracle) & pl.col("pass_hat_k").is_not_null()).sort("k")
        if part.height == 0:
            continue
        color = PALETTE[i % len(PALETTE)]
        name = f"{model} · {ORACLE_NAMES.get(oracle, oracle)}"
        ks = part["k"].to_list()
        visible = True if oracle == "episode_pass" else "legendonly"
        lo, hi = part["pass_hat_k_low"].to_list(), part["pass_hat_k_high"].to_list()
        if all(v is not None for v in lo + hi):
            fig.add_trace(go.Scatter(x=ks + ks[::-1], y=hi + lo[::-1], mode="lines", fill="toself", fillcolor=color, opacity=0.15, line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, legendgroup=name, visible=visible))
        fig.add_trace(go.Scatter(x=ks, y=part["pass_hat_k"].to_list(), mode="lines+markers", name=f"pass^k · {name}", legendgroup=name,
                                 line=dict(color=color), visible=visible, customdata=part["n_tasks"].to_list(),
                                 hovertemplate="k=%{x}<br>pass^k %{y:.3f}<br>%{customdata} tasks<extra>" + esc(name) + "</extra>"))
        fig.add_trace(go.Scatter(x=ks, y=part["pass_at_k"].to_list(), mode="lines+markers", name=f"pass@k · {name}", legendgroup=name,
                                 line=dict(color=color, dash="dash"), visible=visible,
                                 hovertemplate="k=%{x}<br>pass@k %{y:.3f}<extra>" + esc(name) + "</extra>"))
    fig.update_layout(xaxis=dict(title="k (trials that must all pass for pass^k; any one for pass@k)", dtick=1),
                      yaxis=dict(title="probability", range=[0, 1]))
    table = html_table([
        {"model": r["model"], "oracle": r["oracle"], "k": r["k"], "pass^k": r["pass_hat_k"],
         "pass^k 95% CI": "∅" if r["pass_hat_k_low"] is None else f"[{r['pass_hat_k_low']:.3f}, {r['pass_hat_k_high']:.3f}]",
         "pass@k": r["pass_at_k"], "tasks": r["n_tasks"], "excluded (< k trials)": r["n_excluded"]}
        for r in rows.sort(["model", "oracle", "k"]).iter_rows(named=True)
    ], cls="passk")
    caption = ("<p class='cap'>pass^k = C(c,k)/C(n,k) (τ-bench: all k trials pass), pass@k = 1 − C(n−c,k)/C(n,k) (Chen et al., 2021: "
               "at least one passes), averaged over tasks with at least k trials; tasks with fewer are excluded and counted. "
               "Bands: 95% percentile bootstrap over tasks. The environment reward is shown; click the legend for the other oracles.</p>")
    return Section("agents-passk", title, True, figs.div(fig, 460) + caption + table)


def section_grid(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Agent outcomes per task and trial (task × trial grid)"
    eps = d.agents["episodes"] if d.agents else pl.DataFrame()
    scores = d.scores.filter((pl.col("metric") == "episode_pass") & (pl.col("status") == "scored"))
    if eps.height == 0:
        return absent("agents-grid", title, "no episodes stored")
    outcome = {(r["model"], r["sample_id"]): r["value"] for r in scores.iter_rows(named=True)}
    tasks = _task_order(eps["task_id"].to_list())
    body = []
    for model in sorted(set(eps["model"].to_list())):
        part = eps.filter(pl.col("model") == model)
        n_trials = int(part["trial"].max()) + 1
        z: list[list[float | None]] = [[None] * n_trials for _ in tasks]
        text: list[list[str]] = [["not run"] * n_trials for _ in tasks]
        index = {t: i for i, t in enumerate(tasks)}
        for r in part.iter_rows(named=True):
            v = outcome.get((model, r["episode_id"]))
            z[index[r["task_id"]]][r["trial"]] = v
            text[index[r["task_id"]]][r["trial"]] = (f"reward {fmt(r['reward'], 3)}, {r['n_turns']} turns, {r['n_tool_calls']} tool calls"
                                                   if v is not None else f"not scored ({r['status']})")
        fig = go.Figure(go.Heatmap(
            z=z, x=[f"trial {i}" for i in range(n_trials)], y=[f"task {t}" for t in tasks], text=text, zmin=0, zmax=1,
            colorscale=[[0, "#d62728"], [0.5, "#d62728"], [0.5, "#2ca02c"], [1, "#2ca02c"]], xgap=2, ygap=1,
            colorbar=dict(tickvals=[0.25, 0.75], ticktext=["fail", "pass"], len=0.3),
            hovertemplate="%{y}, %{x}: %{text}<extra>" + esc(model) + "</extra>"))
        fig.update_layout(title=f"{model}: environment reward pass (green) / fail (red), blank = not run",
                          yaxis=dict(autorange="reversed", dtick=1, tickfont=dict(size=9)))
        body.append(figs.div(fig, max(360, 14 * len(tasks) + 120)))
        tasks_rows = _rows(d, "task").filter((pl.col("model") == model) & (pl.col("oracle") == "episode_pass"))
        per_task: dict[str, dict[str, Any]] = {}
        for r in tasks_rows.sort("k").iter_rows(named=True):
            e = per_task.setdefault(r["task_id"], {"task": r["task_id"], "c / n": f"{r['n_pass']} / {r['n_trials']}"})
            e[f"pass^{r['k']}"] = r["pass_hat_k"]
        if per_task:
            body.append(f"<details><summary>{esc(model)}: per-task table ({len(per_task)} tasks)</summary>"
                        + html_table([per_task[t] for t in tasks if t in per_task], cls="tasks") + "</details>")
    return Section("agents-grid", title, True, "".join(body))


def section_actions(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Agent actions that most often go wrong"
    rows = _rows(d, "wrong_action")
    if rows.height == 0:
        return absent("agents-actions", title, "no action-oracle mismatch stored (score action_oracle, or every episode matched)")
    body = []
    for model in sorted(set(rows["model"].to_list())):
        part = rows.filter(pl.col("model") == model).sort("value", descending=True).head(15)
        fig = go.Figure(go.Bar(x=part["value"].to_list()[::-1], y=part["label"].to_list()[::-1], orientation="h",
                               marker_color=[PALETTE[3] if lb.startswith("unexpected") else PALETTE[1] if lb.startswith("wrong") else PALETTE[0]
                                             for lb in part["label"].to_list()[::-1]],
                               customdata=part["n_tasks"].to_list()[::-1],
                               hovertemplate="%{y}: %{x} episodes, %{customdata} tasks<extra>" + esc(model) + "</extra>"))
        fig.update_layout(title=f"{model}: episodes with each mismatch", xaxis_title="episodes", margin=dict(l=260))
        body.append(figs.div(fig, 80 + 26 * part.height))
        body.append(html_table([
            {"model": model, "mismatch": r["label"], "episodes": r["n_trials"], "tasks": r["n_tasks"],
             "example reason": (json.loads(r["detail"]).get("reasons") or [""])[0]} for r in part.iter_rows(named=True)
        ], cls="wrong-actions"))
    caption = ("<p class='cap'>From the action oracle: <b>missing</b> = an expected write never made successfully; "
               "<b>wrong arguments</b> = made with other arguments (the first differing one is named); <b>unexpected</b> = a "
               "successful write no expected action explains. Failed writes (tool answered an error) leave the environment "
               "unchanged and are not counted.</p>")
    return Section("agents-actions", title, True, caption + "".join(body))


def section_consistency(d: ReportData) -> Section:
    title = "Agent consistency across trials and between oracles"
    cons, dis, paired = _rows(d, "consistency"), _rows(d, "oracle_disagreement"), _rows(d, "paired")
    if cons.height == 0:
        return absent("agents-consistency", title, "no episode_summary rows")
    body = "<h3>Tasks whose trials disagree</h3>" + html_table([
        {"model": r["model"], "oracle": r["oracle"], "tasks with ≥ 2 trials": r["n_tasks"], "trials disagree": r["n_pass"],
         "share": r["value"], "tasks": ", ".join(json.loads(r["detail"]).get("inconsistent_tasks", [])[:30])}
        for r in cons.sort(["model", "oracle"]).iter_rows(named=True)])
    if dis.height:
        rows = []
        for r in dis.sort(["model", "oracle", "oracle_b"]).iter_rows(named=True):
            x = json.loads(r["detail"])
            rows.append({"model": r["model"], "A": r["oracle"], "B": r["oracle_b"], "episodes both scored": x["n"],
                         "A pass, B fail": x["a_only"], "A fail, B pass": x["b_only"], "share disagreeing": r["value"],
                         "examples": ", ".join((x["a_only_examples"] + x["b_only_examples"])[:6])})
        body += "<h3>Oracles that disagree on the same episode</h3>" + html_table(rows, cls="disagreement")
    if paired.height:
        body += "<h3>Agents compared task-paired</h3>" + html_table([
            {"candidate": r["model"], "baseline": r["baseline"], "oracle": r["oracle"], "k": r["k"], "paired tasks": r["n_tasks"],
             "candidate pass^k": r["pass_hat_k"], "Δ pass^k": r["value"],
             "95% CI": "∅" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]", "p": r["p_value"]}
            for r in paired.sort(["model", "oracle", "k"]).iter_rows(named=True)], cls="paired")
    return Section("agents-consistency", title, True, body)


def agent_sections(d: ReportData, figs: Figures) -> list[Section]:
    """The agent sections of the report; none when the evaluation has no episodes."""
    if not d.agents:
        return []
    return [section_passk(d, figs), section_grid(d, figs), section_actions(d, figs), section_consistency(d)]
