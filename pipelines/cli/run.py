"""``facetlake demo``, ``run``, ``register`` and ``score``: materialise evaluations and print
their tables and verdict lines."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from pipelines.cli.common import (
    CONFIG_DIR, DEMO_CONFIGS, EvaluationOption, LakeOption, console, fail, no_secret, open_lake, print_frame, report_refreshed,
)

app = typer.Typer(rich_markup_mode="markdown")


def run_specs(specs, lake, title: str, take_over: bool = False, replace: bool = False, submit: bool = False,
               workers: int = 1, show_correlations: bool = False) -> None:
    from pipelines.runs.launch import LaunchError
    from resources.backends import BackendError
    from resources.catalog import CatalogCollisionError
    from resources.catalog.spec import SpecError
    from resources.catalog.writes import PinnedDatasetChanged
    from pipelines.runs.instance import get_instance
    from pipelines.runs.runner import launch_evaluation, run_evaluation, summary_table

    instance = get_instance(capture_logs=submit or workers > 1)  # in-process runs print to this terminal
    fingerprints = []
    for spec in specs:
        console.print(f"[bold]evaluation[/] {spec.name}: dataset {spec.dataset.get('kind')}, models {', '.join(spec.models)}")
        try:
            if submit or workers > 1:
                resolved = launch_evaluation(spec, lake, instance, submit=submit, workers=workers, take_over=take_over, replace=replace)
            elif spec.lm_eval and not spec.dataset.get("path"):  # lm-eval runs the task first (issue 18)
                from pipelines.runs.lm_eval_run import run_lm_eval_spec

                resolved = run_lm_eval_spec(spec, lake, instance)
            else:
                resolved = run_evaluation(spec, lake, instance, take_over=take_over, replace=replace)
        except PinnedDatasetChanged as exc:  # pinned content, changed source: nothing new scored, and why (issue 31)
            console.print(f"  [yellow]{exc}[/]", highlight=False)
            continue
        except (CatalogCollisionError, SpecError, LaunchError, BackendError) as exc:
            fail(str(exc))
        reg = resolved.registration
        for notice in reg.notices:
            console.print(f"  [yellow]notice:[/] {notice}", highlight=False)
        for line in resolved.reused:
            console.print(f"  reused: {line}", highlight=False)
        console.print(f"  fingerprint {resolved.fingerprint[:12]}  partition {reg.partition_key}  ({len(resolved.samples)} samples)",
                      highlight=False)
        from resources.catalog import pairs_of

        added = sorted({p["model"] for p in pairs_of(lake, resolved.fingerprint)} - set(spec.models))
        if added:  # models the inbox added to this evaluation run with it
            console.print(f"  also models added by the inbox: {', '.join(added)}", highlight=False)
        fingerprints.append(resolved.fingerprint)
    if not fingerprints:
        return
    print_frame(summary_table(lake, fingerprints), title=title)
    for fp in fingerprints:
        print_verdicts(lake, fp, correlations=show_correlations)
    from pipelines.cli.agent_tables import print_pass_k_brief  # agent evaluations: pass^k per k (issue 17)

    print_pass_k_brief(lake, fingerprints)
    where = lake.root if "://" in lake.root else str(Path(lake.root).expanduser().resolve())  # "lake: lake" said little
    console.print(f"lake: {where}   try: facetlake sql \"select metric, count(*) from scores group by 1\"", highlight=False)


def print_verdicts(lake, fingerprint: str, correlations: bool = False) -> None:
    """The evaluation's verdict lines: winners per metric, the regression alert, missing
    outputs and (``correlations``) each metric's Spearman correlation with the human ratings."""
    import polars as pl

    from resources.catalog import evaluation_row

    name = evaluation_row(lake, fingerprint)["name"]
    comp = lake.read("comparisons", where={"fingerprint": fingerprint}) if lake.exists("comparisons") else pl.DataFrame()
    if comp.height:
        winners = comp.filter((pl.col("kind") == "model_metric") & pl.col("is_winner")).sort("metric")
        if winners.height and comp.filter(pl.col("kind") == "model_metric")["model"].n_unique() > 1:
            console.print(f"[bold]{name}[/] winners: " + ", ".join(f"{r['metric']} {r['model']}" for r in winners.iter_rows(named=True)),
                          highlight=False)
        bad = comp.filter((pl.col("kind") == "pairwise") & (pl.col("verdict") == "regressed"))
        if bad.height:
            console.print(f"[bold red]{name} regression alert[/]: " + "; ".join(
                f"{r['model']} worse than {r['baseline']} on {r['metric']} (Δ {r['delta']:+.4g}, p_holm {r['p_holm']:.2g})"
                for r in bad.head(5).iter_rows(named=True)) + (f"; and {bad.height - 5} more" if bad.height > 5 else ""),
                highlight=False)
    gens = lake.read("generations", where={"fingerprint": fingerprint}, columns=["model", "status"])
    missing = gens.filter(pl.col("status") == "error").group_by("model").len().sort("model")
    for r in missing.iter_rows(named=True):
        total = gens.filter(pl.col("model") == r["model"]).height
        console.print(f"[yellow]{name}: {r['model']} has no output for {r['len']} of {total} samples[/] (status error in "
                      "generations; those samples are unscored)", highlight=False)
    if correlations and lake.exists("correlations"):
        corr = lake.read("correlations", where={"fingerprint": fingerprint}).filter(pl.col("kind") == "metric-human")
        if corr.height:
            parts = []
            for r in corr.sort("spearman", descending=True, nulls_last=True).iter_rows(named=True):
                human, metric = (r["metric_a"], r["metric_b"]) if r["metric_a"].startswith("human:") else (r["metric_b"], r["metric_a"])
                if r["spearman"] is not None:
                    parts.append(f"{metric}~{human.split(':', 1)[1]} {r['spearman']:+.2f}")
            console.print(f"[bold]{name}[/] metric vs human ratings (Spearman): " + ", ".join(parts[:8]),
                          highlight=False)


@app.command()
def demo(lake: Optional[str] = LakeOption, limit: Optional[int] = typer.Option(None, help="Use only the first N rows of each dataset.")) -> None:
    """Run the main job end to end on the shipped real data (SF-RES and QAGS-CNNDM).

    Registers both evaluations, materialises samples (with their Great Expectations
    checks), the precomputed system outputs, the scores and the summary, and prints
    mean / n scored / n total per dataset x model x metric.
    """
    from resources.catalog.spec import EvaluationSpec

    specs = []
    for name in DEMO_CONFIGS:
        spec = EvaluationSpec.from_yaml(CONFIG_DIR / name)
        if limit:
            spec.dataset["limit"] = limit
        specs.append(spec)
    run_specs(specs, open_lake(lake), "facetlake demo: mean per dataset x model x metric", show_correlations=True)


@app.command()
def run(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="Evaluation spec (YAML): name, dataset, models, metrics."),
    lake: Optional[str] = LakeOption,
    offline: bool = typer.Option(False, "--offline", help="Offline mode: every external metric/backend is refused before any connection (FACETLAKE_OFFLINE=1)."),
    anonymise: Optional[str] = typer.Option(None, "--anonymise", help="Anonymise outbound text: off, ner, rule_based, presidio, model (comma list). FACETLAKE_ANONYMISE_FORCE still applies."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Practitioner profile (technical_expert, domain_expert, compliance_officer, or a YAML file): adds its metrics and shows its output form."),
    take_over: bool = typer.Option(False, "--take-over", help="Move the fingerprint from the evaluation that owns it to this spec's name (refused otherwise)."),
    replace: bool = typer.Option(False, "--replace", help="Redefine an evaluation name registered over another dataset (refused otherwise; its old results stay as history)."),
    submit: bool = typer.Option(False, "--submit", help="Queue the runs on the Dagster instance (pools, run retries, run monitoring apply; a daemon such as `facetlake ui` or `dagster-daemon run` starts them) and wait for them."),
    workers: int = typer.Option(1, "--workers", min=1, help="Run up to N model partitions at once, each a Dagster run in its own process (1: every step in this process); each run then scores lexical metrics on its share of the cores (FACETLAKE_SCORE_WORKERS overrides)."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Stop sending model and judge calls at this spend, e.g. usd=5,tokens=2000000,calls=10000 (replaces the spec's budget:). Finished rows are kept; a re-run with a larger budget sends only the rest."),
) -> None:
    """Register an evaluation spec and materialise it end to end (samples → generations → scores → verdicts).

    Re-running a spec reuses what did not change (same dataset content, same model source
    and metric signature) and regenerates or rescores only what did; the run says what it
    reused. Metrics added with `facetlake score` stay part of the evaluation.
    """
    from pipelines.cli.audit import after_run, spec_for_run

    spec = spec_for_run(config, offline=offline, anonymise=anonymise, profile=profile, in_process=not submit and workers == 1,
                        budget=budget)
    run_specs([spec], open_lake(lake), f"{config.name}: mean per model x metric", take_over=take_over, replace=replace,
               submit=submit, workers=workers)
    after_run(spec, open_lake(lake))


@app.command()
def register(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="Evaluation spec (YAML)."),
    lake: Optional[str] = LakeOption,
    take_over: bool = typer.Option(False, "--take-over", help="Move the fingerprint from the evaluation that owns it to this spec's name."),
    replace: bool = typer.Option(False, "--replace", help="Redefine an evaluation name registered over another dataset."),
) -> None:
    """Register an evaluation (its fingerprint and its (evaluation, model) partitions) without running it.

    Materialise it from the UI, or let its `schedule:` run it (`facetlake ui` runs the
    evaluation_scheduler sensor by default).
    """
    from pipelines.runs.instance import get_instance
    from pipelines.runs.register import register as do_register
    from resources.catalog import CatalogCollisionError
    from resources.catalog.spec import EvaluationSpec, SpecError

    try:
        resolved = do_register(EvaluationSpec.from_yaml(config), open_lake(lake), get_instance(), take_over=take_over, replace=replace)
    except (CatalogCollisionError, SpecError) as exc:
        fail(str(exc))
    reg = resolved.registration
    for notice in reg.notices:
        console.print(f"[yellow]notice:[/] {notice}", highlight=False)
    console.print(f"registered {resolved.spec.name}: fingerprint {resolved.fingerprint[:12]}, partitions "
                  + ", ".join(reg.pair_keys.values()), highlight=False)


@app.command()
def score(
    metric: list[str] = typer.Option(..., "--metric", "-m", help="Metric name (repeatable). See `facetlake metrics`."),
    fingerprint: Optional[str] = EvaluationOption(help="Only this evaluation (name, prefix or fingerprint); default: every active evaluation."),
    force: bool = typer.Option(False, help="Recompute even where rows with the same signature exist."),
    param: list[str] = typer.Option([], "--param", "-p", callback=no_secret(), help="Metric parameter KEY=VALUE (all selected metrics) or METRIC.KEY=VALUE; enters the signature."),
    judge: Optional[str] = typer.Option(None, "--judge", callback=no_secret(), help="Judge model spec for judged metrics, e.g. api:gpt-4o-mini@https://api.openai.com/v1 (same as --param judge=SPEC)."),
    submit: bool = typer.Option(False, "--submit", help="Queue the scoring runs on the Dagster instance (a daemon starts them; pools and retries apply) and wait."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Score every stored generation under a metric not yet computed, without regenerating.

    Adds that metric's rows to `scores`, recomputes no other metric and leaves the
    `generations` table's Delta version unchanged. The metric becomes part of each
    evaluation scored: re-runs and scheduled runs keep it. A partition holds one variant per
    metric: scoring it again with other --param/--judge settings replaces that metric's
    rows (the earlier ones stay reachable by Delta time travel; the signature column says
    which settings produced each row). Verdicts (summary, comparisons, correlations) older
    than the scores, as a killed earlier command leaves them, are recomputed even when every
    metric is skipped as already scored.
    """
    from metric_ops.registry import UnknownMetricError
    from pipelines.runs.launch import LaunchError
    from pipelines.runs.instance import get_instance
    from pipelines.runs.runner import rescore

    store = open_lake(lake)
    if not store.exists("generations") and not store.exists("episodes"):
        fail(f"no generations or agent episodes under {store.root}; run `facetlake demo` or `facetlake run CONFIG` first")
    try:
        params = [*param, *([f"judge={judge}"] if judge else [])]
        done = rescore(metric, store, get_instance(capture_logs=submit), fingerprint=fingerprint, force=force, params=params, submit=submit)
    except (UnknownMetricError, ValueError, TypeError, LookupError, LaunchError) as exc:
        fail(str(exc))
    if not done:
        fail("no stored generations to score" + (f" in evaluation {fingerprint!r}" if fingerprint else "")
              + "; run `facetlake run SPEC.yaml` first")
    import polars as pl

    from pipelines.runs.runner import scoring_outcome

    frame = pl.DataFrame(
        [{"evaluation": d["evaluation"], "model": d["model"], "scored": ", ".join(d["scored"]) or "-",
          "skipped (already scored)": ", ".join(d["skipped"]) or "-"} for d in done]
    )
    print_frame(frame, title="rescoring")
    scored_now = {d["fingerprint"] for d in done if d["scored"]}
    report_refreshed(store, {d["fingerprint"]: d["verdicts_refreshed"] for d in done
                             if d.get("verdicts_refreshed") and d["fingerprint"] not in scored_now})
    outcome = scoring_outcome(store, done)
    if outcome.height:
        print_frame(
            outcome.with_columns(pl.col("fingerprint").str.slice(0, 12), pl.col("first_error").str.slice(0, 120)),
            title="rows stored (status scored / error / unscored)",
        )
    failed = outcome.filter((pl.col("scored") == 0) & (pl.col("error") > 0))
    if failed.height:
        first = failed.row(0, named=True)
        fail(
            f"{failed.height} metric partition(s) stored only errors, e.g. {first['metric']} on {first['model']}: "
            f"{first['first_error']} (rows kept with status 'error'; see their detail column)"
        )
