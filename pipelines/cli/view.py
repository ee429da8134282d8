"""``facetlake view``: the results viewer over the lake (issue 29, pipelines/view/)."""

from __future__ import annotations

from typing import Optional

import typer

from pathlib import Path

from pipelines.cli.common import EvaluationOption, FormatOption, LakeOption, OutputFormat, console, fail, notes, open_lake, print_frame

app = typer.Typer(rich_markup_mode="markdown")
review_app = typer.Typer(rich_markup_mode="markdown", no_args_is_help=True,
                         help="Human review on the evaluation's rubrics (the spec's review: block; docs/viewer.md, Review): "
                              "import reviews from a spreadsheet, list a reviewer's queue, measure agreement.")
app.add_typer(review_app, name="review")


@app.command()
def view(
    lake: Optional[str] = LakeOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on. The viewer shows sample text: "
                             "bind another interface only on a network you trust."),
    port: int = typer.Option(8765, "--port", help="Port to listen on."),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="Record every review from this server under this "
                                           "reviewer id (default: each review form names its reviewer)."),
    export: Optional[Path] = typer.Option(None, "--export", help="Write the compare view of --url to this folder as "
                                          "static pages that open from file:// (no server), then exit."),
    url: Optional[str] = typer.Option(None, "--url", help="The compare view to export: its permalink, e.g. "
                                      "'/compare?evaluation=qa&mode=regressed'."),
    max_samples: int = typer.Option(5000, "--max-samples", help="Refuse to export a view of more samples than this."),
) -> None:
    """Browse an evaluation's outputs model beside model in a local web page: regressed and improved samples, search, filters, each sample's scores and judge reasoning.

    Pages: the evaluations; **compare** (a baseline and other models sample by sample, the
    output's word-level diff against the baseline, every score with its delta; modes all,
    regressed, improved, both_wrong, errors, unscored; a metric, a metadata and a status
    filter; text or regular-expression search over input, outputs and judge reasoning;
    sorting; every view's URL is its permalink); **sample** (everything stored about one
    sample, token log-probabilities coloured by confidence, and the review form when the
    evaluation declares rubrics); **queue** (a reviewer's samples still to review);
    **history** (a metric per model across the evaluation's scores runs). Reads go through
    the same read-only DuckDB connection as `facetlake sql`, paged on the server; the only
    writes are reviews. Stop with Ctrl-C.
    """
    import uvicorn

    from pipelines.view import create_app

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluation in the lake at {store.root}; run `facetlake run CONFIG` (or `facetlake demo`) first, or pass --lake")
    if export is not None or url is not None:
        from pipelines.view import ViewError
        from pipelines.view.export import export_view

        if export is None or not url:
            fail("--export DIR and --url '/compare?evaluation=...' go together: copy the view's permalink into --url")
        try:
            done = export_view(store.root, url, export, max_samples)
        except ViewError as exc:
            fail(str(exc))
        console.print(f"wrote {done['samples']} samples on {done['pages']} page(s) to {export}/index.html (open it in a browser)",
                      markup=False, highlight=False)
        return
    console.print(f"facetlake viewer on http://{host}:{port}/ over {store.root} (Ctrl-C to stop)")
    if reviewer:
        from metric_ops.review import ReviewSpecError, check_reviewer

        try:
            reviewer = check_reviewer(reviewer)
        except ReviewSpecError as exc:
            fail(str(exc))
    uvicorn.run(create_app(store.root, reviewer=reviewer), host=host, port=port, log_level="warning")


@review_app.command("import")
def review_import(
    file: Path = typer.Argument(..., help="CSV with a header: sample_id, model, rubric, value (a label or a number), reviewer."),
    evaluation: str = EvaluationOption(required=True),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="The reviewer of every row (instead of a reviewer column)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Record the reviews of a spreadsheet (CSV); importing the same file again adds nothing.

    Each row is checked against the evaluation's rubric (a label it declares, or a number on
    its scale), sample and model; a bad row is reported with its line and the others are
    recorded. The `human:<rubric>` score rows are rewritten from every review, and the
    verdicts refresh like after any rescore.
    """
    from metric_ops.review import ReviewSpecError
    from resources.review import import_csv

    try:
        report = import_csv(open_lake(lake), evaluation, file, reviewer)
    except (ReviewSpecError, FileNotFoundError) as exc:
        fail(str(exc))
    for line, message in report.errors:
        notes(OutputFormat.table).print(f"line {line}: {message}", markup=False, highlight=False)
    console.print(f"{report.added} review(s) added, {report.already} already stored, {len(report.errors)} row(s) left out"
                  + (f"; human score rows rewritten for {', '.join(f'{m}/{r}' for m, r in report.refreshed)}" if report.refreshed else ""),
                  markup=False, highlight=False)
    if report.errors:
        raise typer.Exit(1)


@review_app.command("agreement")
def review_agreement(
    evaluation: str = EvaluationOption(required=True),
    fmt: OutputFormat = FormatOption(),
    lake: Optional[str] = LakeOption,
) -> None:
    """Agreement per rubric: Cohen's kappa per reviewer pair, Fleiss' kappa, Krippendorff's alpha, and every judge or metric against the reviews.

    Judge vs human is AUROC for a two-label rubric, Spearman's rho otherwise. A statistic
    with nothing to measure (one label throughout, fewer than two items) is listed as
    skipped with the reason, never shown as 0.
    """
    import polars as pl

    from metric_ops.review import ReviewSpecError
    from resources.review import agreement_rows

    try:
        rows, skipped = agreement_rows(open_lake(lake), evaluation)
    except ReviewSpecError as exc:
        fail(str(exc))
    print_frame(pl.DataFrame(rows).drop("detail") if rows else pl.DataFrame(), fmt, title="agreement")
    for reason in skipped:
        notes(fmt).print(f"skipped: {reason}", markup=False, highlight=False)

