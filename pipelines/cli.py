"""The ``facetlake`` command line.

Every subcommand that reads or writes the lake takes ``--lake PATH`` (default
``$FACETLAKE_LAKE`` or ``./lake``). Runs go through Dagster on the persistent instance
(``$DAGSTER_HOME`` or this project folder), so they show up in ``facetlake ui``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*is currently in beta.*")
warnings.filterwarnings("ignore", message=".*is currently in preview.*")

app = typer.Typer(
    help="facetlake: evaluate language models as a Dagster dataflow over Delta tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # rich's traceback renderer never finishes on the cyclic exception chains Dagster
    # raises (seen hanging and growing in memory); errors are printed by main() instead
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
DEMO_CONFIGS = ("sfres.yaml", "qags.yaml")

LakeOption = typer.Option(
    None, "--lake", help="Lake root folder (or s3://... URI). Default: $FACETLAKE_LAKE or ./lake.", show_default=False
)


EVALUATION_HELP = ("Evaluation: its name (or a unique prefix), a fingerprint (or unique prefix), or a partition key "
                   "name@fp12. `facetlake evaluations` lists them.")


def EvaluationOption(required: bool = False, help: str = EVALUATION_HELP):  # noqa: N802 - reads like the other typer options
    """The ``--evaluation/-e`` option (``--fingerprint`` is accepted as its old name)."""
    return typer.Option(... if required else None, "--evaluation", "-e", "--fingerprint", help=help, show_default=False)


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _lake(path: Optional[str]):
    from resources.lake import LakeStore

    return LakeStore(root=path) if path else LakeStore()


def _fail(message: str) -> None:
    """Print ``message`` as an error and exit with status 1 (raises ``typer.Exit``).

    The message is printed literally: a "[red]" or "[/]" in it is text, not rich markup."""
    from rich.text import Text

    err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)  # one line: the terminal wraps it
    raise typer.Exit(code=1)


def _print_frame(frame, fmt: OutputFormat = OutputFormat.table, title: str | None = None) -> None:
    """Print a polars frame as a rich table, CSV or JSON on stdout.

    Headers, cells and the title are shown literally: query results and column names such
    as ``regexp_extract(s, '[a-z]+')`` are never read as rich markup."""
    from rich.text import Text

    if fmt is OutputFormat.csv:
        import polars as pl

        # CSV has no nested values: list/struct columns are written as JSON text
        nested = [c for c, t in frame.schema.items() if isinstance(t, (pl.List, pl.Array, pl.Struct))]
        if nested:
            frame = frame.with_columns(
                pl.col(c).map_elements(lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
                                       return_dtype=pl.String)
                for c in nested
            )
        sys.stdout.write(frame.write_csv())
        return
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False, indent=1) + "\n")
        return
    _print_table(frame, title)


HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _cells(frame) -> tuple[list[str], list[list[str]]]:
    """Header and cell texts: floats to 4 decimals, None as ∅, 64-hex fingerprints cut to 12."""
    def text(v) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        if v is None:
            return "∅"
        v = str(v)
        return v[:12] if HEX64.match(v) else v

    return list(frame.columns), [[text(v) for v in row] for row in frame.iter_rows()]


def _print_table(frame, title: str | None = None) -> None:
    """A table that fits the terminal: compact borders; when even that is wider than the
    terminal, one record per row (``column  value`` lines) instead of cells broken over
    lines. Everything is shown literally (never read as rich markup)."""
    from rich import box
    from rich.text import Text

    from rich.measure import Measurement

    header, rows = _cells(frame)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in header:
        table.add_column(Text(column), no_wrap=True)
    for row in rows:
        table.add_row(*[Text(v) for v in row])
    if title:
        console.print(Text(title, style="bold"), soft_wrap=True)
    if Measurement.get(console, console.options.update(max_width=100_000), table).maximum <= console.width:
        console.print(table)
        return
    key_width = max(len(h) for h in header)
    for n, row in enumerate(rows, 1):
        console.print(Text(f"── {n} " + "─" * max(0, min(console.width, 40) - len(str(n)) - 4), style="dim"))
        for column, value in zip(header, row):
            console.print(Text.assemble((column.ljust(key_width), "bold"), "  ", value), soft_wrap=True)


def _run_specs(specs, lake, title: str, take_over: bool = False, replace: bool = False, submit: bool = False,
               workers: int = 1, show_correlations: bool = False) -> None:
    from pipelines.launch import LaunchError
    from resources.catalog import CatalogCollisionError
    from resources.evaluation import SpecError
    from pipelines.runner import get_instance, launch_evaluation, run_evaluation, summary_table

    instance = get_instance()
    fingerprints = []
    for spec in specs:
        console.print(f"[bold]evaluation[/] {spec.name}: dataset {spec.dataset.get('kind')}, models {', '.join(spec.models)}")
        try:
            if submit or workers > 1:
                resolved = launch_evaluation(spec, lake, instance, submit=submit, workers=workers, take_over=take_over, replace=replace)
            else:
                resolved = run_evaluation(spec, lake, instance, take_over=take_over, replace=replace)
        except (CatalogCollisionError, SpecError, LaunchError) as exc:
            _fail(str(exc))
        reg = resolved.registration
        for notice in reg.notices:
            console.print(f"  [yellow]notice:[/] {notice}", highlight=False)
        console.print(f"  fingerprint {resolved.fingerprint[:12]}  partition {reg.partition_key}  ({len(resolved.samples)} samples)",
                      highlight=False)
        fingerprints.append(resolved.fingerprint)
    _print_frame(summary_table(lake, fingerprints), title=title)
    for fp in fingerprints:
        _print_verdicts(lake, fp, correlations=show_correlations)
    from pipelines.cli_agents import print_pass_k_brief  # agent evaluations: pass^k per k (issue 17)

    print_pass_k_brief(lake, fingerprints)
    console.print(f"lake: {lake.root}   try: facetlake sql \"select metric, count(*) from scores group by 1\"", highlight=False)


def _print_verdicts(lake, fingerprint: str, correlations: bool = False) -> None:
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
    from resources.evaluation import EvaluationSpec

    specs = []
    for name in DEMO_CONFIGS:
        spec = EvaluationSpec.from_yaml(CONFIG_DIR / name)
        if limit:
            spec.dataset["limit"] = limit
        specs.append(spec)
    _run_specs(specs, _lake(lake), "facetlake demo: mean per dataset x model x metric", show_correlations=True)


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
    workers: int = typer.Option(1, "--workers", min=1, help="Run up to N model partitions at once, each a Dagster run in its own process (1: every step in this process)."),
) -> None:
    """Register an evaluation spec and materialise it end to end (samples → generations → scores → verdicts).

    Re-running a spec reuses what did not change (same dataset content, same model source
    and metric signature) and regenerates or rescores only what did; the run says what it
    reused. Metrics added with `facetlake score` stay part of the evaluation.
    """
    from pipelines.cli_audit import after_run, spec_for_run

    spec = spec_for_run(config, offline=offline, anonymise=anonymise, profile=profile)
    _run_specs([spec], _lake(lake), f"{config.name}: mean per model x metric", take_over=take_over, replace=replace,
               submit=submit, workers=workers)
    after_run(spec, _lake(lake))


@app.command()
def register(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="Evaluation spec (YAML)."),
    lake: Optional[str] = LakeOption,
    take_over: bool = typer.Option(False, "--take-over", help="Move the fingerprint from the evaluation that owns it to this spec's name."),
    replace: bool = typer.Option(False, "--replace", help="Redefine an evaluation name registered over another dataset."),
) -> None:
    """Register an evaluation (its fingerprint and its (evaluation, model) partitions) without running it.

    Materialise it from the UI, or let its `schedule:` run it (`dagster dev` runs the
    evaluation_scheduler sensor by default).
    """
    from pipelines.runner import get_instance
    from pipelines.runner import register as do_register
    from resources.catalog import CatalogCollisionError
    from resources.evaluation import EvaluationSpec, SpecError

    try:
        resolved = do_register(EvaluationSpec.from_yaml(config), _lake(lake), get_instance(), take_over=take_over, replace=replace)
    except (CatalogCollisionError, SpecError) as exc:
        _fail(str(exc))
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
    param: list[str] = typer.Option([], "--param", "-p", help="Metric parameter KEY=VALUE (all selected metrics) or METRIC.KEY=VALUE; enters the signature."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge model spec for judged metrics, e.g. api:gpt-4o-mini@https://api.openai.com/v1 (same as --param judge=SPEC)."),
    submit: bool = typer.Option(False, "--submit", help="Queue the scoring runs on the Dagster instance (a daemon starts them; pools and retries apply) and wait."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Score every stored generation under a metric not yet computed, without regenerating.

    Adds that metric's rows to `scores`, recomputes no other metric and leaves the
    `generations` table's Delta version unchanged. The metric becomes part of each
    evaluation scored: re-runs and scheduled runs keep it. A partition holds one variant per
    metric: scoring it again with other --param/--judge settings replaces that metric's
    rows (the earlier ones stay reachable by Delta time travel; the signature column says
    which settings produced each row).
    """
    from metric_ops.registry import UnknownMetricError
    from pipelines.launch import LaunchError
    from pipelines.runner import get_instance, rescore

    store = _lake(lake)
    if not store.exists("generations") and not store.exists("episodes"):
        _fail(f"no generations or agent episodes under {store.root}; run `facetlake demo` or `facetlake run CONFIG` first")
    try:
        params = [*param, *([f"judge={judge}"] if judge else [])]
        done = rescore(metric, store, get_instance(), fingerprint=fingerprint, force=force, params=params, submit=submit)
    except (UnknownMetricError, ValueError, TypeError, LookupError, LaunchError) as exc:
        _fail(str(exc))
    if not done:
        _fail("no stored generations to score" + (f" in evaluation {fingerprint!r}" if fingerprint else "")
              + "; run `facetlake run SPEC.yaml` first")
    import polars as pl

    from pipelines.runner import scoring_outcome

    frame = pl.DataFrame(
        [{"evaluation": d["evaluation"], "model": d["model"], "scored": ", ".join(d["scored"]) or "-",
          "skipped (already scored)": ", ".join(d["skipped"]) or "-"} for d in done]
    )
    _print_frame(frame, title="rescoring")
    outcome = scoring_outcome(store, done)
    if outcome.height:
        _print_frame(
            outcome.with_columns(pl.col("fingerprint").str.slice(0, 12), pl.col("first_error").str.slice(0, 120)),
            title="rows stored (status scored / error / unscored)",
        )
    failed = outcome.filter((pl.col("scored") == 0) & (pl.col("error") > 0))
    if failed.height:
        first = failed.row(0, named=True)
        _fail(
            f"{failed.height} metric partition(s) stored only errors, e.g. {first['metric']} on {first['model']}: "
            f"{first['first_error']} (rows kept with status 'error'; see their detail column)"
        )


@app.command()
def sql(
    statement: str = typer.Argument(..., help='A read-only query, e.g. "select metric, count(*) from scores group by 1".'),
    lake: Optional[str] = LakeOption,
    format: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, csv or json."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="DuckDB memory limit, e.g. 2GB (also caps the result). Default: $FACETLAKE_SQL_MEMORY_LIMIT or a quarter of RAM, at most 4GiB.", show_default=False),
    threads: Optional[int] = typer.Option(None, "--threads", help="DuckDB threads. Default: $FACETLAKE_SQL_THREADS or half the cores.", show_default=False),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before the query is interrupted (0 = none). Default: $FACETLAKE_SQL_TIMEOUT_S or 120.", show_default=False),
    include_raw: bool = typer.Option(False, "--include-raw", help="Also expose raw-text tables (samples_raw: sample text before anonymisation, kept only where a spec sets privacy.store_raw)."),
) -> None:
    """Query the lake with DuckDB: every Delta table is a view of the same name; writes are refused.

    External file access is off, and memory, threads and run time are bounded."""
    import duckdb

    from resources.sql import SQLLimitError, SQLLimits, SQLRefusedError, query

    store = _lake(lake)
    if not store.tables():
        _fail(f"no Delta tables under {store.root}; run `facetlake demo` first or pass --lake")
    try:
        limits = SQLLimits.resolve(memory_limit, threads, timeout)
        frame = query(store, statement, limits, include_raw=include_raw)
    except (SQLRefusedError, SQLLimitError, ValueError) as exc:
        _fail(str(exc))
    except duckdb.Error as exc:
        from resources.sql import RAW_TABLES

        _fail(f"{exc}\ntables: {', '.join(t for t in store.tables() if include_raw or t not in RAW_TABLES)}")
    _print_frame(frame, format)


@app.command()
def metrics() -> None:
    """List registered metrics with direction, dimension, locality and version."""
    import polars as pl

    from metric_ops.registry import list_metrics

    rows = [
        {"metric": cls.name, "scores": ", ".join(cls.emitted()), "direction": cls.direction.value,
         "dimension": cls.dimension, "locality": cls.locality, "version": cls.version, "requires": ", ".join(cls.requires)}
        for cls in list_metrics()
    ]
    _print_frame(pl.DataFrame(rows), title="registered metrics")


@app.command()
def datasets() -> None:
    """List dataset kinds (use one as dataset: {kind: ...} in an evaluation spec)."""
    import polars as pl

    from resources.datasets import DATASETS

    rows = [{"kind": k, "default file": cls.default_path or "(path required)", "about": (cls.__doc__ or "").strip().splitlines()[0]}
            for k, cls in sorted(DATASETS.items())]
    _print_frame(pl.DataFrame(rows), title="dataset kinds")


@app.command()
def ui(
    port: int = typer.Option(3000, help="Port for the Dagster UI."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0 to reach it from other machines)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Start `dagster dev` (UI and daemon) on this project; DAGSTER_HOME defaults to the project folder.

    The daemon runs the evaluation_scheduler, inbox_sensor and analysis_sensor (all on by
    default), so scheduled evaluations, inbox drops and fresh verdicts need no hand step.
    """
    from pipelines.runner import PROJECT_ROOT, dagster_home

    env = dict(os.environ, DAGSTER_HOME=str(dagster_home()))
    if lake:
        env["FACETLAKE_LAKE"] = str(Path(lake).resolve())
    # beside this interpreter: a virtualenv's bin/ is not on PATH unless activated
    dagster = Path(sys.executable).with_name("dagster")
    if not dagster.exists():
        import shutil

        found = shutil.which("dagster")
        if not found:
            _fail(f"cannot find the `dagster` command beside {sys.executable} or on PATH; reinstall with `bash scripts/setup.sh`")
        dagster = Path(found)
    env["PATH"] = f"{dagster.parent}{os.pathsep}{env.get('PATH', '')}"
    os.execve(str(dagster), [str(dagster), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml"), "-h", host, "-p", str(port)], env)


@app.command()
def migrate(lake: Optional[str] = LakeOption) -> None:
    """Bring a lake written by an earlier facetlake up to date (explicit schema migrations).

    Rewrites only the catalog tables and gives old outbound-ledger rows a call id and status;
    samples, generations, scores and runs are not touched. Running it again changes nothing.
    """
    from resources.migrations import MigrationError, migrate_catalog_identity, pending

    store = _lake(lake)
    todo = pending(store)
    if not todo:
        console.print(f"{store.root}: up to date, nothing to migrate")
        return
    try:
        counts = migrate_catalog_identity(store)
    except MigrationError as exc:
        _fail(str(exc))
    from assets.partitions import sync_partitions
    from pipelines.runner import get_instance

    sync_partitions(store, get_instance())
    console.print(f"{store.root}: migrated {', '.join(todo)}: " + ", ".join(f"{t} {n} rows" for t, n in counts.items()))


@app.command()
def crossval(out: Optional[Path] = typer.Option(None, "--out", help="Markdown file to write (default docs/crossvalidation.md).")) -> None:
    """Cross-validate every metric variant against its reference library on real data and write the report.

    Compares facetlake's numbers with sacrebleu, rouge-score, NLTK, bert-score (same model
    and layer) and the SQuAD v2 script's rules; exits 1 when any variant is out of tolerance.
    """
    from assets.crossval import main as crossval_main

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise typer.Exit(code=crossval_main([str(out)] if out else []))


from pipelines import bfcl_demo as _bfcl_demo  # noqa: E402,F401  (registers the demo-bfcl command)
from pipelines import judge_cli as _judge_cli  # noqa: E402,F401  (pairwise, stability, meta-eval: issue 4)
from pipelines import cli_audit as _cli_audit  # noqa: E402,F401  (export, verify, profiles, anonymise: privacy issue)
from pipelines import cli_report as _cli_report  # noqa: E402,F401  (report, compare, lineage: issue 8)
from pipelines import cli_evaluations as _cli_evaluations  # noqa: E402,F401  (evaluations: list, archive, restore)
from pipelines import cli_agents as _cli_agents  # noqa: E402,F401  (demo-agents, episodes: issue 17)
from pipelines import cli_lm_eval as _cli_lm_eval  # noqa: E402,F401  (lm-eval, import lm-eval: issue 18)


def _user_error(exc: BaseException) -> BaseException:
    """The user's own error inside Dagster's step-failure wrappers (first non-Dagster cause)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        user = getattr(current, "user_exception", None)
        if user is not None:
            current = user
            continue
        if not type(current).__module__.startswith("dagster"):
            return current
        current = current.__cause__ or current.__context__
    return exc


def main() -> None:
    """Console entry: run the CLI; print errors as one line (set FACETLAKE_DEBUG=1 for the traceback)."""

    shown: set[str] = set()

    def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        from rich.text import Text

        if str(message) not in shown:  # a dataset is read at registration and again in the run
            shown.add(str(message))
            err.print(Text.assemble(("warning:", "bold yellow"), f" {message}"))

    previous = warnings.showwarning
    if not os.environ.get("FACETLAKE_DEBUG"):
        warnings.showwarning = one_line_warning
    try:
        app()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    # BaseException: pyo3_runtime.PanicException (a panic inside polars or deltalake) is
    # not an Exception; it too reaches the user as one line
    except BaseException as exc:  # noqa: BLE001 - every error reaches the user as one clear line
        if os.environ.get("FACETLAKE_DEBUG"):
            raise
        from rich.text import Text

        user = _user_error(exc)
        # literally, not as rich markup (a message may hold "[/]" or "[red]")
        err.print(Text.assemble(("error:", "bold red"), f" {type(user).__name__}: {user}"), soft_wrap=True)
        err.print("(set FACETLAKE_DEBUG=1 for the full traceback)")
        sys.exit(1)
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":  # pragma: no cover
    main()
