"""``facetlake sql``, ``metrics`` and ``datasets``: read the lake and the registries.

``sql`` loads neither Dagster nor a model library: it opens the lake through
:class:`resources.lake.tables.LakeTables` and DuckDB only (``facetlake sql`` starts in well under
a second; benchmarks/bench_startup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from pipelines.cli.common import FormatOption, LakeOption, OutputFormat, fail, first_sentence, print_frame, write_frame

app = typer.Typer(rich_markup_mode="markdown")

#: rows `facetlake sql` prints by default: printing is bounded like the query (issue 26, fault 5)
PRINT_MAX_ROWS = 10_000


@app.command()
def sql(
    statement: str = typer.Argument(..., help='A read-only query, e.g. "select metric, count(*) from scores group by 1".'),
    lake: Optional[str] = LakeOption,
    format: OutputFormat = FormatOption(),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="DuckDB memory limit, e.g. 2GB (also caps the result). Default: $FACETLAKE_SQL_MEMORY_LIMIT or a quarter of RAM, at most 4GiB.", show_default=False),
    threads: Optional[int] = typer.Option(None, "--threads", help="DuckDB threads. Default: $FACETLAKE_SQL_THREADS or half the cores.", show_default=False),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before the query is interrupted (0 = none). Default: $FACETLAKE_SQL_TIMEOUT_S or 120.", show_default=False),
    include_raw: bool = typer.Option(False, "--include-raw", help="Also expose raw-text tables (samples_raw: sample text before anonymisation, kept only where a spec sets privacy.store_raw)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the result to FILE.parquet, FILE.csv or FILE.json (the suffix picks the format) instead of printing it.", show_default=False, dir_okay=False),
    as_of: Optional[List[str]] = typer.Option(None, "--as-of", help="Read the lake as it was: a timestamp (2026-12-04T03:10:00Z; every table at its last commit by then) or TABLE=VERSION (e.g. scores=12; the other tables as of that commit). Repeatable.", show_default=False),
    run: Optional[str] = typer.Option(None, "--run", help="Read the tables as run RUN_ID (a unique prefix) left them: the versions it wrote, the rest as of its end.", show_default=False),
    max_rows: Optional[int] = typer.Option(None, "--max-rows", help=f"Print at most this many rows (0 = all). Default: {PRINT_MAX_ROWS:,} when printing, all with --out.", show_default=False, min=0),
) -> None:
    """Query the lake with DuckDB: every Delta table is a view of the same name; writes are refused.

    External file access is off, and memory, threads and run time are bounded. `--out`
    exports the result (DuckDB's COPY stays refused: the query cannot write files itself).
    `--as-of` and `--run` read an earlier state of every table (Delta time travel; see
    docs/recurring.md, "Versions")."""
    from pipelines.cli.common import OUT_SUFFIXES

    if out is not None and out.suffix.lower() not in OUT_SUFFIXES:
        fail(f"--out {out}: unknown file type {out.suffix or '(none)'!r}; use a name ending in {', '.join(OUT_SUFFIXES)}")
    import duckdb

    from resources.sql import SQLLimitError, SQLLimits, SQLRefusedError, query

    from resources.lake.tables import LakeTables  # the lake without Dagster: `sql` starts fast

    store = LakeTables(root=lake)
    if not store.tables():
        fail(f"no Delta tables under {store.root}; run `facetlake demo` first or pass --lake")
    try:
        from resources.sql import AsOfError, resolve_as_of

        point = resolve_as_of(store, store.tables(), as_of or [], run)
    except AsOfError as exc:
        fail(str(exc))
    if point is not None:
        from pipelines.cli.common import err

        err.print(point.described, highlight=False)
    try:
        limits = SQLLimits.resolve(memory_limit, threads, timeout)
        cap = (0 if out is not None else PRINT_MAX_ROWS) if max_rows is None else max_rows
        # one row past the cap tells whether more follow; the time limit covers reading the result
        frame = query(store, statement, limits, include_raw=include_raw, max_rows=cap + 1 if cap else None, as_of=point)
    except (SQLRefusedError, SQLLimitError, ValueError) as exc:
        fail(str(exc))
    except duckdb.Error as exc:
        from resources.sql import RAW_TABLES

        fail(f"{exc}\ntables: {', '.join(t for t in store.tables() if include_raw or t not in RAW_TABLES)}")
    more = bool(cap) and frame.height > cap
    if more:
        frame = frame.head(cap)
    if out is not None:
        from pipelines.cli.common import console

        console.print(write_frame(frame, out), highlight=False)
    else:
        print_frame(frame, format)
    if more:
        from pipelines.cli.common import err

        err.print(f"first {cap:,} rows shown; more follow: add a LIMIT, raise --max-rows (0 = all) or write them with "
                  "--out FILE.parquet", highlight=False)


@app.command()
def metrics(format: OutputFormat = FormatOption()) -> None:
    """List registered metrics with direction, dimension, locality and version."""
    import polars as pl

    from metric_ops.registry import list_metrics

    rows = [
        {"metric": cls.name, "scores": ", ".join(cls.emitted()), "direction": cls.direction.value,
         "dimension": cls.dimension, "locality": cls.locality, "version": cls.version, "requires": ", ".join(cls.requires)}
        for cls in list_metrics()
    ]
    print_frame(pl.DataFrame(rows), format, title="registered metrics")


datasets_app = typer.Typer(rich_markup_mode="markdown", invoke_without_command=True, no_args_is_help=False,
                           help="Dataset kinds (use one as dataset: {kind: ...} in an evaluation spec); "
                                "`datasets diff EVAL` lists the samples that changed between two of its fingerprints.")
app.add_typer(datasets_app, name="datasets")


@datasets_app.callback()
def datasets(ctx: typer.Context, format: OutputFormat = FormatOption()) -> None:
    """List dataset kinds (use one as dataset: {kind: ...} in an evaluation spec)."""
    if ctx.invoked_subcommand is not None:
        return
    import polars as pl

    from resources.datasets import DATASETS

    rows = [{"kind": k, "default file": cls.default_path or "(path required)", "about": first_sentence(cls.__doc__)}
            for k, cls in sorted(DATASETS.items())]
    print_frame(pl.DataFrame(rows), format, title="dataset kinds")


@datasets_app.command("diff")
def datasets_diff(
    evaluation: str = typer.Argument(..., help="The evaluation (name, name@fp12 or fingerprint)."),
    older: Optional[str] = typer.Argument(None, help="From: a fingerprint (prefix), name@fp12, or ~N (N fingerprints before the current). Default: the fingerprint before TO."),
    newer: Optional[str] = typer.Argument(None, help="To: as FROM. Default: the evaluation's current fingerprint."),
    lake: Optional[str] = LakeOption,
    format: OutputFormat = FormatOption(),
) -> None:
    """List the sample ids added, removed and changed (with the fields that changed) between two fingerprints of an evaluation.

    A changed dataset file gives the evaluation a new fingerprint; the earlier samples stay
    in the lake as history. `facetlake evaluations --history` lists the fingerprints."""
    from pipelines.cli.common import notes, open_lake
    from resources.catalog import CatalogError, sample_diff

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake run SPEC.yaml` first, or pass --lake")
    try:
        diff = sample_diff(store, evaluation, older, newer)
    except CatalogError as exc:
        fail(str(exc))
    notes(format).print(f"{diff.older} -> {diff.newer}: {diff.summary()}", highlight=False)
    print_frame(diff.frame(), format, title=f"samples changed from {diff.older} to {diff.newer}")
