"""The ``facetlake`` command line.

Every subcommand that reads or writes the lake takes ``--lake PATH`` (default
``$FACETLAKE_LAKE`` or ``./lake``). Runs go through Dagster on the persistent instance
(``$DAGSTER_HOME`` or this project folder), so they show up in ``facetlake ui``.
"""

from __future__ import annotations

import os
import sys
import warnings

import typer

from pipelines.cli import demo_bfcl as bfcl_demo
from pipelines.cli import admin as cli_admin
from pipelines.cli import agents as cli_agents
from pipelines.cli import audit as cli_audit
from pipelines.cli import evaluations as cli_evaluations
from pipelines.cli import lm_eval as cli_lm_eval
from pipelines.cli import query as cli_query
from pipelines.cli import report as cli_report
from pipelines.cli import run as cli_run
from pipelines.cli import judge as judge_cli
from pipelines.cli import view as cli_view
from pipelines.cli.common import err, first_sentence, show_flags_as_flags
from pipelines.quiet import quiet_libraries

warnings.filterwarnings("ignore", category=DeprecationWarning)
quiet_libraries()
show_flags_as_flags()

app = typer.Typer(
    rich_markup_mode="markdown",  # docstring paragraphs re-flowed to the terminal (rich mode keeps their line breaks)
    help="facetlake: evaluate language models as a Dagster dataflow over Delta tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # rich's traceback renderer never finishes on the cyclic exception chains Dagster
    # raises (seen hanging and growing in memory); errors are printed by main() instead
    pretty_exceptions_enable=False,
)
# every command module defines its own Typer; merged here in the order `--help` lists them
for _commands in (cli_run, cli_query, cli_report, cli_view, cli_evaluations, cli_audit, judge_cli, bfcl_demo, cli_agents,
                  cli_lm_eval, cli_admin):
    app.add_typer(_commands.app)


def _short_helps(typer_app: typer.Typer) -> None:
    """Each command's line in ``--help`` lists: the whole first sentence of its docstring."""
    for info in typer_app.registered_commands:
        if info.short_help is None and info.callback is not None:
            info.short_help = first_sentence(info.callback.__doc__)
    for group in typer_app.registered_groups:
        _short_helps(group.typer_instance)


def _chain(exc: BaseException):
    """``exc`` and the exceptions behind it: Dagster's ``user_exception`` first, then
    ``__cause__`` / ``__context__``, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = getattr(current, "user_exception", None) or current.__cause__ or current.__context__


def _user_error(exc: BaseException) -> BaseException:
    """The user's own error inside Dagster's step-failure wrappers (first non-Dagster cause)."""
    for current in _chain(exc):
        if getattr(current, "user_exception", None) is None and not type(current).__module__.startswith("dagster"):
            return current
    return exc


_short_helps(app)


def _was_interrupted(exc: BaseException) -> bool:
    """Ctrl-C inside a Dagster run arrives as DagsterExecutionInterruptedError (or a run
    failure caused by it)."""
    return any(isinstance(e, KeyboardInterrupt) or type(e).__name__ == "DagsterExecutionInterruptedError" for e in _chain(exc))


def _interrupted() -> None:
    """One line and exit status 130 (the shell's convention for SIGINT)."""
    err.print("interrupted: rows already stored are kept; run the same command again to resume", highlight=False)
    sys.exit(130)


def main() -> None:
    """Console entry: run the CLI; print errors as one line (set FACETLAKE_DEBUG=1 for the traceback)."""
    from pipelines.runs.heap import cli_process

    cli_process()  # the garbage collector's settings of a short-lived process (pipelines/runs/heap.py)

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
    except KeyboardInterrupt:
        _interrupted()
    except (SystemExit, GeneratorExit):
        raise
    # BaseException: pyo3_runtime.PanicException (a panic inside polars or deltalake) is
    # not an Exception; it too reaches the user as one line
    except BaseException as exc:  # noqa: BLE001 - every error reaches the user as one clear line
        if os.environ.get("FACETLAKE_DEBUG"):
            raise
        from rich.text import Text

        if _was_interrupted(exc):
            _interrupted()
        user = _user_error(exc)
        # literally, not as rich markup (a message may hold "[/]" or "[red]")
        err.print(Text.assemble(("error:", "bold red"), f" {type(user).__name__}: {user}"), soft_wrap=True)
        err.print("(set FACETLAKE_DEBUG=1 for the full traceback)")
        sys.exit(1)
    finally:
        warnings.showwarning = previous
