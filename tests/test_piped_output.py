"""Output to a pipe or a file is a plain full-width table (issue 26, fault 11): rich's
80-column fallback made tables into vertical records and wrapped hint lines in the middle
of a command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.cli.common import PIPE_WIDTH, PipeAwareConsole

ROOT = Path(__file__).resolve().parents[1]


def test_a_wide_result_stays_one_table_row_when_piped(evaluated_lake, monkeypatch):
    lake, _ = evaluated_lake
    monkeypatch.delenv("COLUMNS", raising=False)
    out = CliRunner().invoke(app, ["sql", "--lake", lake.root, "select repeat('x', 300) as wide, 'end-of-row' as last_col"])
    assert out.exit_code == 0, out.output
    lines = out.output.rstrip().splitlines()
    header = next(line for line in lines if line.startswith("wide"))
    assert "last_col" in header  # both columns on the header line
    assert lines[-1].rstrip().endswith("end-of-row") and "x" * 300 in lines[-1]
    assert "── 1" not in out.output  # no vertical records


def test_hint_lines_are_not_wrapped_in_a_file(tmp_path):
    """A real pipe, in a subprocess: the long line naming the command to run stays whole."""
    lake = tmp_path / "nolake"
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "compare", "--lake", str(lake)],
                          capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    text = proc.stdout + proc.stderr
    line = next(line for line in text.splitlines() if "no evaluations under" in line)
    assert "facetlake demo" in line and "facetlake run SPEC.yaml" in line  # one line, command not broken


def test_console_width_follows_the_destination(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    console = PipeAwareConsole(file=open("/dev/null", "w"))
    assert console.width == PIPE_WIDTH  # not a terminal
    monkeypatch.setenv("COLUMNS", "100")
    assert PipeAwareConsole(file=open("/dev/null", "w")).width == 100  # an explicit width wins
    forced = PipeAwareConsole(file=open("/dev/null", "w"), force_terminal=True, width=72)
    assert forced.width == 72
