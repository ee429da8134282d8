"""Shared pieces of the ``facetlake`` command line: options, the lake, errors and output.

Every command module (``cli_run``, ``cli_query``, ``cli_report``, ...) imports from here and
defines its own ``typer.Typer``; ``pipelines/cli/__init__.py`` merges them into one ``app``. Nothing
here imports Dagster, polars or a model library at module level, so ``facetlake --help``
stays fast.
"""

from __future__ import annotations

import json
import os
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console, ConsoleDimensions

#: the width output gets when stdout is not a terminal (a pipe, a file) and $COLUMNS is unset:
#: tables print at their natural width as plain lines and no hint wraps inside a command
#: (issue 26, fault 11: rich's 80-column fallback turned tables into vertical records)
PIPE_WIDTH = 4096


class PipeAwareConsole(Console):
    """A rich console that is as wide as its content when it does not write to a terminal.

    In a terminal (or with ``$COLUMNS`` set) it is rich's console; otherwise its width is
    :data:`PIPE_WIDTH`, decided at each print (stdout may be redirected after start-up)."""

    @property
    def size(self) -> ConsoleDimensions:
        dims = Console.size.fget(self)
        if self._width is None and "COLUMNS" not in self._environ and not self.is_terminal:
            return ConsoleDimensions(PIPE_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)


console = PipeAwareConsole()
err = PipeAwareConsole(stderr=True)

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
DEMO_CONFIGS = ("sfres.yaml", "qags.yaml")

LakeOption = typer.Option(
    None, "--lake", help="Lake root folder (or s3://... URI). Default: $FACETLAKE_LAKE or ./lake.", show_default=False
)

EVALUATION_HELP = ("Evaluation: its name (or a unique prefix), a fingerprint (or unique prefix), or a partition key "
                   "name@fp12. `facetlake evaluations` lists them.")


def EvaluationOption(required: bool = False, help: str = EVALUATION_HELP):  # noqa: N802 - reads like the other typer options
    """The ``--evaluation/-e`` option (``--fingerprint`` is accepted as its old name)."""
    return typer.Option(... if required else None, "--evaluation", "-e", "--fingerprint", help=help, show_default=False)


def no_secret(fix: str | None = None):
    """A typer ``callback`` for an option whose value is stored (``--judge``, ``--param``,
    ``--model-args``): a value that looks like a secret (:mod:`metric_ops.secrets`, by shape,
    and by name for ``KEY=VALUE`` items) exits with one line naming the flag and how to pass
    the key instead, before anything runs; the value itself is never printed."""

    def check(param: typer.CallbackParam, value):  # noqa: ANN001, ANN202 - typer passes the parsed value
        from metric_ops.secrets import JUDGE_FIX, find_secrets, secret_message

        items = value if isinstance(value, (list, tuple)) else [value]
        for item in (i for i in items if isinstance(i, str)):
            pairs = dict((p.split("=", 1)[0].strip(), p.split("=", 1)[1]) for p in item.split(",") if "=" in p)
            findings = find_secrets(item) or find_secrets(pairs)
            if findings:
                flag = param.opts[0] if param.opts else str(param.name)
                fail(secret_message(findings, flag, fix or JUDGE_FIX))
        return value

    return check


class OutputFormat(str, Enum):
    """How a result frame is printed: a rich table, CSV or JSON."""

    table = "table"
    csv = "csv"
    json = "json"


FORMAT_HELP = ("table, csv or json. csv and json print only the rows on stdout (json: a list of objects, numbers as "
               "numbers; csv: a header row); notes go to stderr.")


def FormatOption(help: str = FORMAT_HELP):  # noqa: N802 - reads like the other typer options
    """The ``--format/-f table|csv|json`` option of every listing command (``sql``,
    ``evaluations``, ``compare``, ``metrics``, ...): with csv or json, stdout holds only the
    rows (:func:`print_frame`) and a command's other lines go to :func:`notes`' stream."""
    return typer.Option(OutputFormat.table, "--format", "-f", help=help, case_sensitive=False)


def machine(fmt: OutputFormat) -> bool:
    """Whether ``fmt`` is machine-readable (csv or json): only the rows go to stdout."""
    return fmt is not OutputFormat.table


def notes(fmt: OutputFormat) -> Console:
    """Where a listing command prints its other lines (titles of extra sections, hints,
    "wrote FILE", gate messages): stdout beside a table, stderr with csv/json so that stdout
    parses as the rows alone."""
    return err if machine(fmt) else console


def show_flags_as_flags() -> None:
    """Make ``--help`` show boolean flags (``--offline``, ``--help``) without a ``<bool>`` type.

    Typer 0.29's rich help prints every option's value type, flags included, as if
    ``--offline`` took a value. A flag takes none: its type column is left empty."""
    from typer.core import TyperOption

    if getattr(TyperOption.display_type_rich, "_facetlake_flags", False):
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self, ctx):  # noqa: ANN001
        if self.is_flag and self.metavar is None:
            return None
        return original(self, ctx)

    display_type_rich._facetlake_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich


def open_lake(path: Optional[str]):
    """The :class:`resources.lake.resource.LakeStore` at ``path`` (default ``$FACETLAKE_LAKE`` or ``./lake``).

    A malformed ``FACETLAKE_SCORE_WORKERS`` is refused here, before any run starts (one line,
    :class:`metric_ops.scoring.parallel.ParallelConfigError`), not in the middle of a scores step."""
    if os.environ.get("FACETLAKE_SCORE_WORKERS", "").strip():
        from metric_ops.scoring.parallel import requested_workers

        requested_workers()
    from resources.lake.resource import LakeStore

    return LakeStore(root=path) if path else LakeStore()


def fail(message: str) -> None:
    """Print ``message`` as an error and exit with status 1 (raises ``typer.Exit``).

    The message is printed literally: a "[red]" or "[/]" in it is text, not rich markup."""
    from rich.text import Text

    err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)  # one line: the terminal wraps it
    raise typer.Exit(code=1)


def _jsonable_nested(frame):
    """``frame`` with list/struct columns written as JSON text (CSV has no nested values)."""
    import polars as pl

    nested = [c for c, t in frame.schema.items() if isinstance(t, (pl.List, pl.Array, pl.Struct))]
    if not nested:
        return frame
    return frame.with_columns(
        pl.col(c).map_elements(lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
                               return_dtype=pl.String)
        for c in nested
    )


def print_frame(frame, fmt: OutputFormat = OutputFormat.table, title: str | None = None) -> None:
    """Print a polars frame as a rich table, CSV or JSON on stdout.

    Headers, cells and the title are shown literally: query results and column names such
    as ``regexp_extract(s, '[a-z]+')`` are never read as rich markup."""
    if fmt is OutputFormat.csv:
        sys.stdout.write(_jsonable_nested(frame).write_csv())
        return
    if fmt is OutputFormat.json:
        sys.stdout.write(json_rows(frame) + "\n")
        return
    print_table(frame, title)


def _finite(value):
    """``value`` with NaN and infinities as None (JSON has neither), inside lists and dicts too."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def json_rows(frame) -> str:
    """``frame`` as a JSON array of row objects: numbers stay numbers (NaN becomes null),
    dates and times are ISO text."""
    def other(v):  # noqa: ANN001, ANN202
        return v.isoformat() if hasattr(v, "isoformat") else str(v)

    return json.dumps([_finite(r) for r in frame.to_dicts()], default=other, ensure_ascii=False, indent=1)


OUT_SUFFIXES = (".parquet", ".csv", ".json")


def write_frame(frame, path: Path) -> str:
    """Write ``frame`` to ``path``; the format follows the suffix (``.parquet``, ``.csv`` or
    ``.json``, a JSON array of row objects). Returns a one-line description.

    Raises ``ValueError`` naming the accepted suffixes for any other suffix."""
    suffix = path.suffix.lower()
    if suffix not in OUT_SUFFIXES:
        raise ValueError(f"--out {path}: unknown file type {suffix or '(none)'!r}; use a name ending in "
                         + ", ".join(OUT_SUFFIXES))
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        frame.write_parquet(path)
    elif suffix == ".csv":
        _jsonable_nested(frame).write_csv(path)
    else:
        path.write_text(json_rows(frame) + "\n", encoding="utf-8")
    plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")  # noqa: E731
    return f"wrote {plural(frame.height, 'row')} x {plural(frame.width, 'column')} to {path}"


HEX64 = re.compile(r"^[0-9a-f]{64}$")


def cells(frame) -> tuple[list[str], list[list[str]]]:
    """Header and cell texts: floats to 4 decimals, None as ∅, 64-hex fingerprints cut to 12."""
    def text(v) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        if v is None:
            return "∅"
        v = str(v)
        return v[:12] if HEX64.match(v) else v

    return list(frame.columns), [[text(v) for v in row] for row in frame.iter_rows()]


def print_table(frame, title: str | None = None, out: Console | None = None) -> None:
    """A table that fits the terminal: compact borders; when even that is wider than the
    terminal, one record per row (``column  value`` lines) instead of cells broken over
    lines. Everything is shown literally (never read as rich markup). Printed on ``out``
    (default stdout)."""
    screen = out or console
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    header, rows = cells(frame)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in header:
        table.add_column(Text(column), no_wrap=True)
    for row in rows:
        table.add_row(*[Text(v) for v in row])
    if title:
        screen.print(Text(title, style="bold"))  # wrapped at the terminal's width
    if Measurement.get(screen, screen.options.update(max_width=100_000), table).maximum <= screen.width:
        screen.print(table)
        return
    key_width = max(len(h) for h in header)
    for n, row in enumerate(rows, 1):
        screen.print(Text(f"── {n} " + "─" * max(0, min(screen.width, 40) - len(str(n)) - 4), style="dim"))
        record = Table.grid(padding=(0, 2))
        record.add_column(no_wrap=True, style="bold", min_width=key_width)
        record.add_column(overflow="fold")  # a long value wraps under itself, within the terminal
        for column, value in zip(header, row):
            record.add_row(Text(column), Text(value))
        screen.print(record)


def first_sentence(doc: str | None) -> str:
    """The whole first sentence of a docstring's first paragraph, RST markup removed
    (````literal```` and ```x``` become ``literal`` and ``x``; ``:role:`x``` becomes ``x``)."""
    paragraph = " ".join((doc or "").strip().split("\n\n", 1)[0].split())
    text = re.sub(r":[a-z]+:`([^`]*)`", r"\1", paragraph)
    text = text.replace("``", "").replace("`", "")
    # a sentence ends at . ! ? followed by a space and a capital letter (not "et al., 2023")
    match = re.search(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return text[: match.start()] if match else text



def report_refreshed(lake, refreshed, out: Console | None = None) -> None:
    """One line per evaluation whose verdicts a command found older than its scores and
    recomputed (``refreshed``: fingerprint -> verdict assets), on ``out`` (default stdout)."""
    from resources.catalog import evaluation_row

    for fp, assets in refreshed.items():
        (out or console).print(f"{evaluation_row(lake, fp)['name']}: verdicts older than its scores ({', '.join(assets)}; a run stopped "
                      "before them?) recomputed", markup=False, highlight=False)


def refresh_stale_verdicts(lake, fingerprints, out: Console | None = None) -> dict[str, list[str]]:
    """Before a command reads verdicts (``compare``, ``report``, ``export``): recompute those
    of the given evaluations (64-hex fingerprints) that are older than their scores, saying
    so (:func:`report_refreshed`), so no command shows a verdict older than the scores it
    summarises (pipelines/runs/runner.py ``refresh_verdicts``; history and archived evaluations
    are left as stored). The lines go to ``out`` (default stdout). Returns fingerprint ->
    verdict assets recomputed."""
    from pipelines.runs.runner import refresh_verdicts

    refreshed = refresh_verdicts(lake, fingerprints)
    report_refreshed(lake, refreshed, out)
    return refreshed
