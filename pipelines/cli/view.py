"""``facetlake view``: the results viewer over the lake (issue 29, pipelines/view/)."""

from __future__ import annotations

from typing import Optional

import typer

from pipelines.cli.common import LakeOption, console, fail, open_lake

app = typer.Typer(rich_markup_mode="markdown")


@app.command()
def view(
    lake: Optional[str] = LakeOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on. The viewer shows sample text: "
                             "bind another interface only on a network you trust."),
    port: int = typer.Option(8765, "--port", help="Port to listen on."),
) -> None:
    """Browse an evaluation's outputs model beside model in a local web page: regressed and improved samples, search, filters, each sample's scores and judge reasoning.

    Pages: the evaluations; **compare** (a baseline and other models sample by sample, the
    output's word-level diff against the baseline, every score with its delta; modes all,
    regressed, improved, both_wrong, errors, unscored; a metric, a metadata and a status
    filter; text or regular-expression search over input, outputs and judge reasoning;
    sorting; every view's URL is its permalink); **sample** (everything stored about one
    sample, token log-probabilities coloured by confidence); **history** (a metric per
    model across the evaluation's scores runs). Read only: reads go through the same
    read-only DuckDB connection as `facetlake sql`, paged on the server. Stop with Ctrl-C.
    """
    import uvicorn

    from pipelines.view import create_app

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluation in the lake at {store.root}; run `facetlake run CONFIG` (or `facetlake demo`) first, or pass --lake")
    console.print(f"facetlake viewer on http://{host}:{port}/ over {store.root} (Ctrl-C to stop)")
    uvicorn.run(create_app(store.root), host=host, port=port, log_level="warning")
