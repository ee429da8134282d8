"""The ``facetlake`` console entry (pipelines/console.py, issue 14): the command's exit
status, output and ``atexit`` handlers are kept; only the interpreter's teardown after the
command is skipped (0.5-0.9 s of every command)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import atexit, sys
from pipelines import console
import pipelines.cli as cli

class Teardown:
    def __del__(self):
        sys.stderr.write("teardown ran\n")

KEEP = Teardown()  # a module global: collected only by the interpreter's teardown
original = cli.main

def wrapped():
    atexit.register(lambda: open(MARKER, "w").write("atexit ran"))  # as a library's handler would be
    sys.stdout.write("unflushed partial line")  # a pipe is block-buffered: only a flush gets it out
    original()

cli.main = wrapped
sys.argv = ["facetlake", *ARGS]
console.main()
"""


def _run(tmp_path: Path, args: list[str]) -> tuple[subprocess.CompletedProcess, Path]:
    marker = tmp_path / "marker"
    code = PROBE.replace("ARGS", repr(args)).replace("MARKER", repr(str(marker)))
    env = {"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(tmp_path), "FACETLAKE_LAKE": str(tmp_path / "lake"), "COLUMNS": "100"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    return result, marker


@pytest.mark.parametrize(
    ("args", "status", "stream", "text"),
    [
        (["--help"], 0, "stdout", "Usage: facetlake"),
        (["sql", "select 1 +"], 1, "stderr", "error:"),  # an error: one line, status 1
        (["no-such-command"], 2, "stderr", "No such command"),  # a usage error: Click's status 2
    ],
)
def test_status_output_and_atexit_handlers_are_kept_and_teardown_skipped(tmp_path, args, status, stream, text):
    result, marker = _run(tmp_path, args)
    assert result.returncode == status, result.stderr[-2000:]
    assert text in getattr(result, stream)
    assert result.stdout.startswith("unflushed partial line")
    assert marker.read_text() == "atexit ran"
    assert "teardown ran" not in result.stderr  # the interpreter's teardown did not run


def test_the_installed_command_goes_through_the_console_entry():
    script = Path(sys.executable).parent / "facetlake"
    assert "from pipelines.console import main" in script.read_text()
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"})
    assert result.returncode == 0 and "Usage: facetlake" in result.stdout
