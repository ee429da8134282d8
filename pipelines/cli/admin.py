"""``facetlake ui``, ``migrate`` and ``crossval``: the UI, lake migrations and the metric
cross-validation report."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from pipelines.cli.common import LakeOption, console, fail, open_lake

app = typer.Typer(rich_markup_mode="markdown")


@app.command()
def ui(
    port: int = typer.Option(3000, help="Port for the Dagster UI."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0 to reach it from other machines)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Start the Dagster UI and daemon on this project (`dg dev`); DAGSTER_HOME defaults to the project folder.

    The daemon runs the evaluation_scheduler, inbox_sensor and analysis_sensor (all on by
    default), so scheduled evaluations, inbox drops and fresh verdicts need no hand step.
    `dg dev` is how Dagster now starts a local instance (`dagster dev` is superseded); the
    project's `[tool.dg]` settings in pyproject.toml point it at pipelines/definitions.py.
    """
    from pipelines.runs.instance import PROJECT_ROOT, dagster_home

    env = dict(os.environ, DAGSTER_HOME=str(dagster_home()))
    if lake:
        env["FACETLAKE_LAKE"] = str(Path(lake).resolve())
    # beside this interpreter: a virtualenv's bin/ is not on PATH unless activated
    dg = Path(sys.executable).with_name("dg")
    if not dg.exists():
        import shutil

        found = shutil.which("dg")
        if not found:
            fail(f"cannot find the `dg` command (dagster-dg-cli) beside {sys.executable} or on PATH; reinstall with `bash scripts/setup.sh`")
        dg = Path(found)
    env["PATH"] = f"{dg.parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = sys.prefix  # the code server runs on this interpreter (--use-active-venv)
    os.execve(str(dg), [str(dg), "dev", "--target-path", str(PROJECT_ROOT), "--use-active-venv", "--check-yaml",
                        "-h", host, "-p", str(port)], env)


@app.command()
def migrate(lake: Optional[str] = LakeOption) -> None:
    """Bring a lake written by an earlier facetlake up to date (explicit schema migrations).

    Rewrites only the catalog tables and gives old outbound-ledger rows a call id and status;
    samples, generations, scores and runs are not touched. Running it again changes nothing.
    """
    from resources.catalog.migrations import MigrationError, migrate_catalog_identity, pending

    store = open_lake(lake)
    todo = pending(store)
    if not todo:
        console.print(f"{store.root}: up to date, nothing to migrate")
        return
    try:
        counts = migrate_catalog_identity(store)
    except MigrationError as exc:
        fail(str(exc))
    from assets.partitions import sync_partitions
    from pipelines.runs.instance import get_instance

    sync_partitions(store, get_instance())
    console.print(f"{store.root}: migrated {', '.join(todo)}: " + ", ".join(f"{t} {n} rows" for t, n in counts.items()))


@app.command()
def crossval(out: Path = typer.Option(Path("crossvalidation.md"), "--out", help="Markdown file to write (in the working directory by default).")) -> None:
    """Cross-validate every metric variant against its reference library on real data and write the report.

    Compares facetlake's numbers with sacrebleu, rouge-score, NLTK, bert-score (same model
    and layer) and the SQuAD v2 script's rules; exits 1 when any variant is out of tolerance.
    """
    from pipelines.quiet import quiet_libraries
    from pipelines.crossval.run import main as crossval_main

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    quiet_libraries()
    try:
        code = crossval_main([str(out.resolve())])
    except FileNotFoundError as exc:  # the real data (data/ of a source checkout, or FACETLAKE_DATA_DIR)
        fail(str(exc))
    except ModuleNotFoundError as exc:  # bert-score: a reference library of the test extra only
        fail(f"facetlake crossval needs the reference library {exc.name!r}: pip install 'facetlake[test]'")
    raise typer.Exit(code=code)
