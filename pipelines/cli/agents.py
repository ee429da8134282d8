"""``facetlake demo-agents`` and ``facetlake episodes`` (issue 17); the tables they print are
in pipelines/cli/agent_tables.py."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from pipelines.cli.common import (
    CONFIG_DIR, EvaluationOption, FormatOption, LakeOption, OutputFormat, console, fail, machine, open_lake, print_frame,
)
from pipelines.cli.run import run_specs

app = typer.Typer(rich_markup_mode="markdown")

TAU_BENCH_CONFIG = CONFIG_DIR / "tau_bench_airline.yaml"


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
    from pipelines.cli.agent_tables import print_agent_results
    from pipelines.report import ReportError, write_report
    from resources.catalog import evaluation_row
    from resources.catalog.spec import EvaluationSpec

    store = open_lake(lake)
    spec = EvaluationSpec.from_yaml(TAU_BENCH_CONFIG)
    run_specs([spec], store, "facetlake demo-agents: mean per episode (model x score)")
    fingerprint = evaluation_row(store, spec.name)["fingerprint"]
    print_agent_results(store, fingerprint, show_tasks=tasks)
    try:
        path, statuses = write_report(store, fingerprint, out)
    except ReportError as exc:
        fail(str(exc))
    agent_sections = [s for s, ok in statuses if s.startswith("agent") and ok]
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); agent sections: {', '.join(agent_sections) or 'none'}")


@app.command("episodes")
def episodes_cmd(
    fingerprint: str = EvaluationOption(required=True, help="An agent evaluation: its name (or a unique prefix), a fingerprint, or name@fp12."),
    oracle: str = typer.Option("episode_pass", help="Pass/fail score that the headline and per-task tables use: episode_pass, action_match, outputs_match, policy_compliance."),
    tasks: bool = typer.Option(True, "--tasks/--no-tasks", help="Print the per-task table."),
    format: OutputFormat = FormatOption("table, csv or json. csv and json print only the pass^k / pass@k rows (every oracle, "
                                        "each 95% CI as low and high numbers) on stdout."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Print an agent evaluation's pass^k / pass@k per oracle and k, per-task outcomes, task-paired comparisons, consistency and the most often wrong actions."""
    from metric_ops.agents.oracles import PASS_SCORES
    from pipelines.cli.agent_tables import print_agent_results
    from resources.catalog import CatalogError, evaluation_row

    if oracle not in PASS_SCORES:
        fail(f"unknown oracle score {oracle!r}; use one of {', '.join(PASS_SCORES)}")
    store = open_lake(lake)
    if not store.exists("episode_summary"):
        fail(f"no episode_summary table under {store.root}; run `facetlake demo-agents` or `facetlake run CONFIG` on an episodes evaluation first")
    try:
        fp = evaluation_row(store, fingerprint)["fingerprint"]
    except CatalogError as exc:
        fail(str(exc))
    if machine(format):
        from pipelines.cli.agent_tables import pass_k_table

        summary = store.read("episode_summary", where={"fingerprint": fp})
        if summary.height == 0:
            fail(f"no episode_summary rows for {fp[:12]}; run `facetlake run CONFIG` on an episodes evaluation first")
        print_frame(pass_k_table(summary, numbers=True), format)
        return
    print_agent_results(store, fp, show_tasks=tasks, oracle=oracle)


__all__ = ["demo_agents", "episodes_cmd"]
