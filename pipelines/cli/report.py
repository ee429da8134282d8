"""``facetlake report``, ``facetlake compare`` and ``facetlake lineage`` (merged into the
main typer app by pipelines/cli/__init__.py)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from pipelines.cli.common import (
    EVALUATION_HELP, EvaluationOption, FormatOption, LakeOption, OutputFormat, console, fail, machine, notes, open_lake,
    print_frame, refresh_stale_verdicts,
)

app = typer.Typer(rich_markup_mode="markdown")


class LineageFormat(str, Enum):
    text = "text"
    mermaid = "mermaid"
    dot = "dot"


@app.command()
def report(
    fingerprint: str = EvaluationOption(required=True),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="Output HTML file."),
    compare: Optional[List[str]] = typer.Option(None, "--compare", help="Another evaluation or fingerprint (e.g. an earlier one, name@fp12) whose runs join the multi-run comparison (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Compare fingerprints whose inputs differ (the report lists the differences)."),
    samples: int = typer.Option(30, "--samples", help="Samples shown in the per-sample view."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Write one self-contained HTML report (plotly inlined; opens with no network) for a fingerprint.

    Sections: per-metric statistics and verdicts, radar, box plots, hallucination
    histogram, correlation heatmap, RAG Triad scatter, jury agreement, per-sample heatmap,
    BERTScore P/R, execution timeline, multi-run comparison, per-sample view. Sections
    without data say so.
    """
    from assets.comparisons import IncomparableError
    from pipelines.report import ReportError, write_report
    from resources.catalog import CatalogError, evaluation_row

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake demo` or `facetlake run CONFIG` first, or pass --lake")
    try:
        refresh_stale_verdicts(store, [evaluation_row(store, ref)["fingerprint"] for ref in [fingerprint, *(compare or [])]])
        path, statuses = write_report(store, fingerprint, out, compare or [], force, samples)
    except (ReportError, IncomparableError, CatalogError) as exc:
        fail(str(exc))
    present = [s for s, ok in statuses if ok]
    missing = [s for s, ok in statuses if not ok]
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {len(present)} sections with data"
                  + (f"; without data: {', '.join(missing)}" if missing else ""))


@app.command()
def compare(
    fingerprint: Optional[str] = EvaluationOption(help=EVALUATION_HELP + " Default: every active evaluation."),
    other: Optional[List[str]] = typer.Option(None, "--with", help="Check that another evaluation or fingerprint is comparable (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Report the differences instead of refusing."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when any compared evaluation's gate fires: a significant (Holm-adjusted) regression against the baseline, or a `gate:` rule of its spec (margin, min, max, max_severity, min_trials_passed). The regression asset check applies the same rule."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Write the gate verdicts as JUnit XML to this file (one test case per model x metric against the baseline).", dir_okay=False),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write the gate verdict as Markdown to this file (for a pull-request comment).", dir_okay=False),
    format: OutputFormat = FormatOption("table, csv or json. csv and json print only rows on stdout: one per evaluation x "
                                        "metric x model (mean, ci_low, ci_high, winner, n_scored, n_total, tie_group), or "
                                        "with --pairwise one per pairwise verdict; notes and gate messages go to stderr."),
    pairwise: bool = typer.Option(False, "--pairwise", help="With --format csv or json: the pairwise verdict rows instead of the means."),
    against: Optional[str] = typer.Option(None, "--against", help="Compare today's verdict with an earlier one: a run id (prefix), a timestamp or TABLE=VERSION (read by Delta time travel): per metric and model the stored mean then and now, the difference and the samples whose scores changed.", show_default=False),
    lake: Optional[str] = LakeOption,
) -> None:
    """Print each evaluation's comparisons: statistics, winners, pairwise verdicts, regression alert.

    The gate (--fail-on-regression, --junit, --markdown) fires on a significant regression
    against the spec's baseline or on a breach of the spec's `gate:` rules; see
    docs/analysis.md "Gates".

    With --with OTHER, first checks that OTHER evaluates the same thing: different
    fingerprint inputs are refused (listing them) unless --force. Verdicts older than the
    scores they summarise (left by a killed run) are recomputed first, and said so.
    """
    import polars as pl

    from assets.comparisons import IncomparableError, headline, pairwise_table, require_comparable, trials_table
    from metric_ops.gates import GateRules, evaluate_gates, junit_xml, markdown_summary
    from resources.catalog import CatalogError, evaluation_row, evaluation_spec, list_evaluations

    say = notes(format)  # with csv/json, stdout holds only the rows
    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake demo` or `facetlake run SPEC.yaml` first, or pass --lake")
    try:
        if fingerprint:
            rows_to_show = [evaluation_row(store, fingerprint)]
        else:
            listing = list_evaluations(store)
            rows_to_show = [evaluation_row(store, fp) for fp in listing["fingerprint"].to_list()]
        if other:
            rows_to_show = rows_to_show[:1]
            fp = rows_to_show[0]["fingerprint"]
            diffs = require_comparable(store, [fp, *other], force=force)
            for o, d in diffs.items():
                say.print(f"[yellow]{o[:12]} differs from {fp[:12]}:[/] " + "; ".join(f"{k}: {v[0]} vs {v[1]}" for k, v in d.items()),
                          highlight=False)
            for o in other:  # then each other evaluation, beside the first
                row = evaluation_row(store, o)
                if row["fingerprint"] not in {r["fingerprint"] for r in rows_to_show}:
                    rows_to_show.append(row)
    except (IncomparableError, CatalogError) as exc:
        fail(str(exc))
    if not rows_to_show:
        fail("no active evaluations; `facetlake evaluations --all` lists archived ones")
    refresh_stale_verdicts(store, [ev["fingerprint"] for ev in rows_to_show], say)  # never a verdict older than its scores
    if against:
        _print_against(store, rows_to_show, against, format, say)
        return
    if other and len(rows_to_show) > 1 and not machine(format):
        labelled = {_label(ev): store.read("comparisons", where={"fingerprint": ev["fingerprint"]}).to_dicts() for ev in rows_to_show}
        print_frame(side_by_side(labelled), title="side by side: mean [95% CI] per metric x model (each evaluation's own "
                                                  "samples; Δ = mean minus the first one's, not a paired test)")
    alerts, not_compared = [], []
    verdicts: list = []
    out_rows: list[tuple] = []  # csv/json: every evaluation's rows, printed once at the end
    for ev in rows_to_show:
        fp = ev["fingerprint"]
        label = _label(ev)
        frame = store.read("comparisons", where={"fingerprint": fp})
        if frame.height == 0:
            not_compared.append(label)
            say.print(f"[yellow]{label}: no comparisons yet[/]; `facetlake run SPEC.yaml` materialises them (or the analysis_sensor, "
                      "after its scores change)", highlight=False)
            continue
        rows = frame.to_dicts()
        spec = evaluation_spec(store, fp)
        verdict = evaluate_gates(rows, getattr(spec, "baseline", None), GateRules.from_mapping(getattr(spec, "gate", None)))
        verdicts.append((label, verdict))
        if machine(format):
            out_rows.extend(pairwise_rows(label, rows) if pairwise else mean_rows(label, rows))
        else:
            print_frame(headline(rows), title=f"{label}: mean [95% CI] per metric x model (★ winner by declared direction; "
                                                 "tie group 1 = statistically tied with the best)")
            pw = pairwise_table(rows)
            if pw.height:
                print_frame(pw.with_columns(pl.col("p", "p_holm").round(6)), title=f"{label}: pairwise, paired test, Holm-corrected; "
                                                                      "Δ [95% CI] in the metric's units; detectable = the "
                                                                      "smallest difference this evaluation detects at 80% power")
            repeated = trials_table(rows)
            if repeated.height:
                print_frame(repeated, title=f"{label}: repeated trials (k per sample; flip rate = share of trial pairs that "
                                            "disagree; pass@k / pass^k at k, binary scores)")
            if store.exists("episode_summary"):  # agent episodes: pass^k compared task-paired (issue 17)
                from pipelines.cli.agent_tables import print_paired

                print_paired(store.read("episode_summary", where={"fingerprint": fp}))
        if not verdict.passed:
            alerts.append(label)
            say.print(f"[bold red]{label} gate fired:[/] " + "; ".join(f"{f.gate}: {f.message}" for f in verdict.fired),
                      highlight=False)
    if machine(format):
        schema = {k: getattr(pl, t) for k, t in (PAIRWISE_SCHEMA if pairwise else MEAN_SCHEMA).items()}
        print_frame(pl.DataFrame(out_rows, schema=schema, orient="row"), format)
    if junit is not None:
        junit.write_text(junit_xml(verdicts), encoding="utf-8")
        say.print(f"wrote {junit} (JUnit XML, {sum(len(v.checked) for _, v in verdicts)} test cases)", highlight=False)
    if markdown is not None:
        markdown.write_text(markdown_summary(verdicts), encoding="utf-8")
        say.print(f"wrote {markdown} (Markdown gate summary)", highlight=False)
    if alerts and fail_on_regression:
        fail(f"gate fired in {', '.join(alerts)} (--fail-on-regression)")
    if not_compared and fail_on_regression:  # a gate never passes on nothing measured
        fail(f"no comparisons yet for {', '.join(not_compared)}: nothing to gate on (--fail-on-regression); "
             "run the evaluation first (`facetlake run SPEC.yaml`)")


def _print_against(store, evaluations: list[dict], against: str, format: OutputFormat, say) -> None:
    """``compare --against``: each evaluation's verdict now beside the one ``against`` names."""
    import polars as pl

    from pipelines.report.against import point_of, verdict_against
    from resources.catalog import CatalogError
    from resources.sql import AsOfError

    try:
        point = point_of(store, against)
    except AsOfError as exc:
        fail(str(exc))
    say.print(point.described, highlight=False)
    frames = []
    for ev in evaluations:
        try:
            frame, ends = verdict_against(store, ev["fingerprint"], point)
        except CatalogError as exc:
            say.print(f"[yellow]{ev['name']}: {exc}[/]", highlight=False)
            continue
        if machine(format):
            frames.append(frame.with_columns(pl.lit(ends["then"]).alias("then_evaluation"), pl.lit(ends["now"]).alias("now_evaluation")))
        else:
            print_frame(frame, title=f"{ends['now']} now vs {ends['then']} then ({against}): stored means, difference, "
                                     "samples whose scores changed")
    if machine(format):
        print_frame(pl.concat(frames) if frames else pl.DataFrame(), format)


#: the columns of ``compare --format csv|json``: the headline table's, with each interval and
#: count as numbers (``mean [95% CI]`` is mean, ci_low, ci_high and winner; ``n`` is n_scored/n_total)
MEAN_SCHEMA = {"evaluation": "String", "metric": "String", "direction": "String", "model": "String", "mean": "Float64",
               "ci_low": "Float64", "ci_high": "Float64", "winner": "Boolean", "n_scored": "Int64", "n_total": "Int64",
               "tie_group": "Int64"}
#: ``compare --pairwise --format csv|json``: the pairwise table's columns (``delta [95% CI]`` as delta_ci_low, delta_ci_high)
PAIRWISE_SCHEMA = {"evaluation": "String", "baseline": "String", "candidate": "String", "metric": "String", "delta": "Float64",
                   "delta_ci_low": "Float64", "delta_ci_high": "Float64", "detectable": "Float64", "retention": "Float64",
                   "test": "String", "p": "Float64", "p_holm": "Float64", "effect": "Float64", "verdict": "String"}


def mean_rows(label: str, rows: list[dict]) -> list[tuple]:
    """One :data:`MEAN_SCHEMA` row per ``model_metric`` comparisons row of one evaluation."""
    from metric_ops.gates import row_detail

    return [(label, r["metric"], r["direction"], r["model"], r["mean"], r["ci_low"], r["ci_high"], bool(r["is_winner"]),
             r["n_scored"], r["n_total"], row_detail(r).get("tie_group"))
            for r in rows if r["kind"] == "model_metric"]


def pairwise_rows(label: str, rows: list[dict]) -> list[tuple]:
    """One :data:`PAIRWISE_SCHEMA` row per ``pairwise`` comparisons row of one evaluation."""
    from metric_ops.gates import row_detail

    out = []
    for r in rows:
        if r["kind"] != "pairwise":
            continue
        det = row_detail(r)
        out.append((label, r["baseline"], r["model"], r["metric"], r["delta"], det.get("delta_ci_low"), det.get("delta_ci_high"),
                    det.get("mde"), r["retention"], r["test"], r["p_value"], r["p_holm"], r["effect_size"], r["verdict"]))
    return out


def _label(ev: dict) -> str:
    return f"{ev['name']}@{ev['fingerprint'][:12]}" + (" (history)" if ev["status"] == "history" else "")


def side_by_side(labelled: dict[str, list[dict]]):
    """One row per metric x model, one ``mean [95% CI]`` column per evaluation (in the order
    given; ``∅`` where an evaluation lacks that metric or model) and a ``Δ vs FIRST`` column
    for each later one: its mean minus the first evaluation's. ``labelled`` maps a label to
    that evaluation's ``comparisons`` rows (kind ``model_metric`` is used)."""
    import polars as pl

    labels = list(labelled)
    stats = {label: {(r["metric"], r["model"]): r for r in rows if r["kind"] == "model_metric"} for label, rows in labelled.items()}
    keys = sorted({k for table in stats.values() for k in table})
    out = []
    for metric, model in keys:
        row = {"metric": metric, "model": model}
        first = stats[labels[0]].get((metric, model))
        for n, label in enumerate(labels):
            r = stats[label].get((metric, model))
            mean = None if r is None else r["mean"]
            ci = "" if r is None or r["ci_low"] is None else f" [{r['ci_low']:.4g}, {r['ci_high']:.4g}]"
            row[label] = "∅" if mean is None else ("★ " if r["is_winner"] else "") + f"{mean:.4g}" + ci
            if n:
                row[f"Δ {label} vs first"] = (None if mean is None or first is None or first["mean"] is None
                                              else mean - first["mean"])
        out.append(row)
    return pl.DataFrame(out) if out else pl.DataFrame({"metric": []})


@app.command()
def lineage(
    fingerprint: str = EvaluationOption(required=True),
    format: LineageFormat = typer.Option(LineageFormat.text, "--format", help="text, mermaid or dot."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Print the provenance graph of a fingerprint from the `runs` table: each comparison,
    correlation and summary run, the scores runs (metric signatures) and generations runs
    (model identity) it read, down to the dataset content hash."""
    from pipelines.report.lineage import LineageError, build_lineage, render
    from resources.catalog import CatalogError

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake demo` first, or pass --lake")
    try:
        graph = build_lineage(store, fingerprint)
    except (LineageError, CatalogError) as exc:
        fail(str(exc))
    typer.echo(render(graph, format.value))
