"""Start-up time of the ``facetlake`` command line (issue 14, "Start-up": ``--help`` and
``sql`` within 1 s; torch, transformers, sentence-transformers, Great Expectations and
Dagster loaded only by the commands that need them).

Each command runs ``--repeats`` times in a fresh interpreter (``python -c "...main()"``,
the console script's own entry point); the table shows the median and the fastest wall
time, and which heavy libraries the command imported (checked in the same process, from
``sys.modules`` at exit). ``python -X importtime`` on the same command shows where the
rest goes.

    python benchmarks/bench_startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

HEAVY = ("torch", "transformers", "sentence_transformers", "great_expectations", "dagster")
PROBE = (
    "import sys\n"
    "from pipelines.cli import main\n"
    "sys.argv = ['facetlake', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


def tiny_lake(root: Path) -> str:
    """A lake with one ``scores`` partition of 100 rows (enough for ``sql`` to read a table)."""
    from resources.lake.tables import LakeTables

    lake = LakeTables(root=str(root))
    rows = [{"model": "m", "fingerprint": "0" * 64, "dataset": "d", "sample_id": str(i), "metric": "bleu",
             "value": float(i), "direction": "maximize", "dimension": "x", "locality": "local", "status": "scored",
             "detail": "{}", "signature": "bleu|v:1", "run_id": "r",
             "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)} for i in range(100)]
    lake.replace("scores", rows, {"model": "m", "fingerprint": "0" * 64})
    return lake.root


def time_command(args: list[str], repeats: int) -> tuple[list[float], str]:
    """Wall times of ``facetlake ARGS`` in fresh interpreters, and the heavy modules it loaded."""
    times, heavy = [], ""
    env = dict(os.environ, COLUMNS="120")
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT, env=env)
        times.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise SystemExit(f"facetlake {' '.join(args)} failed:\n{out.stderr[-2000:]}")
        heavy = next((line[6:] for line in out.stderr.splitlines() if line.startswith("HEAVY=")), "?")
    return times, heavy or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    with tempfile.TemporaryDirectory() as tmp:
        root = tiny_lake(Path(tmp) / "lake")
        commands = {
            "python -c pass (interpreter alone)": None,
            "facetlake --help": ["--help"],
            "facetlake sql --help": ["sql", "--help"],
            "facetlake sql \"select count(*) from scores\"": ["sql", "--lake", root, "select count(*) from scores"],
            "facetlake datasets": ["datasets"],
        }
        table = Table(title=f"facetlake start-up, {args.repeats} runs each ({platform.processor() or platform.machine()}, "
                            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()})")
        for column in ("command", "median s", "fastest s", "heavy libraries loaded"):
            table.add_column(column)
        for label, argv in commands.items():
            if argv is None:
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    subprocess.run([sys.executable, "-c", "pass"], check=True)
                    times.append(time.perf_counter() - start)
                heavy = "none"
            else:
                times, heavy = time_command(argv, args.repeats)
            table.add_row(label, f"{statistics.median(times):.3f}", f"{min(times):.3f}", heavy)
        Console(width=160).print(table)


if __name__ == "__main__":
    main()
