"""Start-up of the command line (issue 14) and its layout (issue 19): ``--help`` and ``sql``
import none of torch, transformers, sentence-transformers, Great Expectations and Dagster,
and the command modules form no import cycle (no module imports ``pipelines.cli``).
Timing is benchmarks/bench_startup.py's job; these tests count what was imported."""

from __future__ import annotations

import ast
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
from benchmarks.bench_startup import HEAVY, PROBE  # noqa: E402 - the same probe the benchmark times


def _heavy_modules(*args: str) -> tuple[str, subprocess.CompletedProcess]:
    env = dict(os.environ, COLUMNS="120")
    env.pop("FACETLAKE_DEBUG", None)
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    line = [x for x in out.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line, out.stderr[-2000:]
    return line[-1][len("HEAVY="):], out


@pytest.fixture(scope="module")
def tiny_lake(tmp_path_factory) -> str:
    from resources.lake.tables import LakeTables

    lake = LakeTables(root=str(tmp_path_factory.mktemp("startup") / "lake"))
    rows = [{"model": "m", "fingerprint": "0" * 64, "dataset": "d", "sample_id": str(i), "metric": "bleu",
             "value": float(i), "direction": "maximize", "dimension": "x", "locality": "local", "status": "scored",
             "detail": "{}", "signature": "bleu|v:1", "run_id": "r",
             "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)} for i in range(3)]
    lake.replace("scores", rows, {"model": "m", "fingerprint": "0" * 64})
    return lake.root


def test_help_imports_no_heavy_library():
    heavy, out = _heavy_modules("--help")
    assert "Usage" in out.stdout and "sql" in out.stdout
    assert heavy == "", f"`facetlake --help` imported {heavy}"


def test_sql_imports_no_heavy_library_and_answers(tiny_lake):
    heavy, out = _heavy_modules("sql", "--lake", tiny_lake, "-f", "csv", "select count(*) as n, sum(value) as s from scores")
    assert out.stdout.strip().splitlines() == ["n,s", "3,3.0"], out.stdout + out.stderr
    assert heavy == "", f"`facetlake sql` imported {heavy}"


def test_a_dagster_command_still_loads_dagster(tiny_lake):
    # the probe is not blind: `evaluations` reads the catalog through the Dagster-backed modules
    heavy, _ = _heavy_modules("evaluations", "--lake", tiny_lake)
    assert "dagster" in heavy.split(",")


def _imports(path: Path) -> set[str]:
    """Every module an ``import``/``from ... import`` in ``path`` names (function bodies included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (every import; a package's ``__init__``
    is the package name; ``__main__`` modules left out)."""
    modules = {}
    for p in (ROOT / package).rglob("*.py"):
        if p.stem == "__main__" or "__pycache__" in p.parts:
            continue
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = p
    return {m: {n for n in _imports(p) if n in modules and n != m} for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]], within: set[str]) -> list[str] | None:
    """One import cycle through modules of ``within``, if any (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(within):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_cli_command_modules_do_not_import_the_cli_entry():
    graph = _graph("pipelines")
    entry_app = "pipelines.cli"  # the app assembly (pipelines/cli/__init__.py)
    cli_modules = {m for m in graph if m.startswith("pipelines.cli.")}
    importers = sorted(m for m in cli_modules if entry_app in graph[m])
    assert importers == [], f"{importers} import pipelines.cli (register by add_typer in pipelines/cli/__init__.py instead)"
    # nothing outside the command line imports it, so a cycle through a command module stays inside them;
    # the console script's module (pipelines/console.py) is the one entry above pipelines.cli, imported by nothing
    entry = "pipelines.console"
    assert graph[entry] & (cli_modules | {entry_app}) == {entry_app}
    assert [m for m in graph if entry in graph[m]] == []
    outside = sorted(m for m in graph if m not in cli_modules and m not in {entry, entry_app} and graph[m] & (cli_modules | {entry_app}))
    assert outside == [], f"{outside} import command-line modules"
    assert _cycle({m: graph[m] & cli_modules for m in cli_modules}, cli_modules) is None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"a"}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}, {"a"}) is None


def test_no_bottom_of_file_imports_in_cli():
    tree = ast.parse((ROOT / "pipelines" / "cli" / "__init__.py").read_text(encoding="utf-8"))
    seen_code = False
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert not seen_code, f"import after code at line {node.lineno} of pipelines/cli/__init__.py"
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            seen_code = True


GC_PROBE = (
    "import gc, os, sys\n"
    "sys.path.insert(0, os.getcwd())\n"
    "import pipelines.runs.heap as heap\n"
    "default = gc.get_threshold()\n"
    "if sys.argv[1] == 'cli':\n"
    "    heap.cli_process()\n"
    "before = gc.get_freeze_count()\n"
    "from pipelines.runs.instance import get_instance\n"
    "instance = get_instance(capture_logs=False)\n"
    "import numpy\n"
    "print(gc.get_threshold() == default, gc.get_threshold() == heap.THRESHOLDS, before, gc.get_freeze_count(),\n"
    "      os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n"
)


@pytest.mark.parametrize("mode", ["cli", "library"])
def test_the_collector_is_tuned_only_in_a_command_line_process(mode, tmp_path):
    """issue 26, "Fixed cost of a run": a CLI process raises the collector's thresholds and
    freezes what its imports left alive when it opens its instance, and runs OpenBLAS on one
    thread unless the user said otherwise; a test process, a code server or a run worker
    (which live long) keep CPython's defaults, freeze nothing and leave BLAS alone."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | {"DAGSTER_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", GC_PROBE, mode], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    default, tuned, before, after, blas = out.stdout.split()[-5:]
    if mode == "cli":
        assert (default, tuned) == ("False", "True") and int(before) == 0 and int(after) > 100_000  # Dagster and the assets, frozen
        assert blas == "1"
        told = subprocess.run([sys.executable, "-c", GC_PROBE, mode], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env=env | {"OPENBLAS_NUM_THREADS": "3"})
        assert told.returncode == 0 and told.stdout.split()[-1] == "3"  # the user's setting wins
    else:
        assert (default, tuned) == ("True", "False") and int(after) == 0 and blas == "-"


def test_a_command_run_in_process_gives_the_collector_back():
    """The conftest fixture undoes main()'s settings after a test; leave_cli_process itself."""
    import gc

    from pipelines.runs.heap import THRESHOLDS, cli_process, freeze_long_lived, leave_cli_process

    before = gc.get_threshold()
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    cli_process()  # numpy is loaded in a test process: the BLAS setting would come too late, so it is not made
    try:
        assert gc.get_threshold() == THRESHOLDS and freeze_long_lived() is True and gc.get_freeze_count() > 0
        assert os.environ.get("OPENBLAS_NUM_THREADS") == blas
    finally:
        leave_cli_process(before)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0 and freeze_long_lived() is False
