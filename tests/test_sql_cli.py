"""`facetlake sql` end to end: a clean exit after an early-stopping query, literal text
(never rich markup) in results and errors, INTERVAL output, and the one-line error
handler of ``main()`` (also for a pyo3 PanicException)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines import cli
from pipelines.cli import common as cli_common
from pipelines.cli import app
from resources.lake.resource import LakeStore

PROJECT_ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def score_row(model: str, fingerprint: str, sample_id: str, value: float) -> dict:
    return {
        "model": model, "fingerprint": fingerprint, "dataset": "d", "sample_id": sample_id, "metric": "bleu",
        "value": value, "direction": "maximize", "dimension": "baseline_grounding", "locality": "local",
        "status": "scored", "detail": '{"x": %s}' % sample_id * 20, "signature": "bleu|v:1", "run_id": "r",
        "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    }


@pytest.fixture(scope="module")
def many_file_lake(tmp_path_factory) -> LakeStore:
    """A scores table of 32 partitions (files) x 3000 rows: enough that DuckDB stops
    reading the Arrow dataset of a ``limit 1`` query while readahead is still running."""
    lake = LakeStore(root=str(tmp_path_factory.mktemp("many_files") / "lake"))
    for p in range(32):
        model, fingerprint = f"m{p}", f"{p:064x}"
        rows = [score_row(model, fingerprint, str(i), value=float(i)) for i in range(3000)]
        lake.replace("scores", rows, {"model": model, "fingerprint": fingerprint})
    return lake


def _sql_subprocess(lake: LakeStore, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("FACETLAKE_DEBUG", None)
    try:
        return subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", "--lake", lake.root, *args],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=PROJECT_ROOT)
    except subprocess.TimeoutExpired as exc:  # the hang after printing the result
        pytest.fail(f"`facetlake sql {' '.join(args)}` hung for {timeout}s after printing {len(exc.stdout or b'')} bytes")


@pytest.mark.slow  # spawns the facetlake command / a Dagster run in a subprocess (> 10 s)
def test_sql_exits_cleanly_when_duckdb_stops_reading_early(many_file_lake):
    # before the fix, 8 of 8 runs segfaulted (139), aborted (134) or hung at interpreter
    # exit: Arrow IO threads calling into deltalake's Python filesystem during finalisation
    for run in range(8):
        out = _sql_subprocess(many_file_lake, "select * from scores limit 1")
        assert out.returncode == 0, f"run {run}: rc {out.returncode}\n{out.stderr[-2000:]}"
        # the whole result was printed: piped, the table keeps its natural width (issue 26, fault 11),
        # so the last line is the row, ending with its last column (created_at)
        assert out.stdout.rstrip().splitlines()[-1].rstrip().endswith("2026-01-01 00:00:00+00:00"), out.stdout


def test_sql_result_text_headers_and_title_are_literal(many_file_lake):
    result = runner.invoke(app, ["sql", "--lake", many_file_lake.root,
                                 "select '[/]' as a, '[red]secret[/red] value' as b, "
                                 "regexp_extract(signature, '[a-z]+') from scores limit 1"])
    assert result.exit_code == 0, result.output
    assert "MarkupError" not in result.output
    assert "[/]" in result.output and "[red]secret[/red] value" in result.output
    assert "regexp_extract(signature, '[a-z]+')" in result.output


def test_print_frame_title_is_literal(capsys):
    import polars as pl

    cli_common.print_frame(pl.DataFrame({"[bold]h[/bold]": ["[/]"]}), title="[red]t[/red] [/]")
    out = capsys.readouterr().out
    assert "[red]t[/red] [/]" in out and "[bold]h[/bold]" in out and "[/]" in out


def test_sql_error_message_is_literal(many_file_lake):
    result = runner.invoke(app, ["sql", "--lake", many_file_lake.root, "select error('boom [red]x[/red] [/]')"])
    assert result.exit_code == 1
    assert "boom [red]x[/red] [/]" in result.stderr
    assert "MarkupError" not in result.output


def test_sql_intervals_as_duckdb_text_in_csv_and_nested(many_file_lake):
    result = runner.invoke(app, ["sql", "--lake", many_file_lake.root, "-f", "csv",
                                 "select interval 3 day as d, interval (-1) month as m"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "d,m\n3 days,-1 month\n"
    result = runner.invoke(app, ["sql", "--lake", many_file_lake.root,
                                 "select [interval 3 day] as l, {'a': interval 3 day} as s"])
    assert result.exit_code == 0, result.output
    assert "[3 days]" in result.stdout and "{'a': 3 days}" in result.stdout


def test_sql_install_is_refused_by_its_own_name(many_file_lake):
    result = runner.invoke(app, ["sql", "--lake", many_file_lake.root, "install httpfs"])
    assert result.exit_code == 1
    assert "refused this INSTALL statement" in result.stderr


def _run_main(monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", ["facetlake", *argv])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    return exc.value.code


def test_main_prints_a_panic_and_markup_errors_as_one_literal_line(monkeypatch, capsys, many_file_lake):
    from polars.exceptions import PanicException  # pyo3_runtime.PanicException, a BaseException

    import resources.sql

    monkeypatch.delenv("FACETLAKE_DEBUG", raising=False)
    monkeypatch.setattr(resources.sql, "query", lambda *a, **k: (_ for _ in ()).throw(PanicException("rust panicked [/]")))
    assert _run_main(monkeypatch, ["sql", "--lake", many_file_lake.root, "select 1"]) == 1
    err = capsys.readouterr().err
    assert "error: PanicException: rust panicked [/]" in err
    assert "Traceback" not in err

    monkeypatch.setattr(resources.sql, "query", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("[red]kept[/red] [/]")))
    assert _run_main(monkeypatch, ["sql", "--lake", many_file_lake.root, "select 1"]) == 1
    err = capsys.readouterr().err
    assert "error: RuntimeError: [red]kept[/red] [/]" in err

    # FACETLAKE_DEBUG shows the traceback (the exception propagates); Ctrl-C stays click's
    # "Aborted!" with status 130, not an error line
    monkeypatch.setattr(resources.sql, "query", lambda *a, **k: (_ for _ in ()).throw(PanicException("again")))
    monkeypatch.setenv("FACETLAKE_DEBUG", "1")
    monkeypatch.setattr(sys, "argv", ["facetlake", "sql", "--lake", many_file_lake.root, "select 1"])
    with pytest.raises(PanicException):
        cli.main()
    monkeypatch.delenv("FACETLAKE_DEBUG")
    monkeypatch.setattr(resources.sql, "query", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert _run_main(monkeypatch, ["sql", "--lake", many_file_lake.root, "select 1"]) == 130
    assert "error:" not in capsys.readouterr().err
