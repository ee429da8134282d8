"""Start-up time of the ``facetlake`` command line (issue 14, "Start-up": ``--help`` and
``sql`` within 1 s; torch, transformers, sentence-transformers, Great Expectations and
Dagster loaded only by the commands that need them).

Each command runs ``--repeats`` times in a fresh interpreter (``python -c "...main()"``,
the console script's own entry point); the table shows the median and the fastest wall
time, and which heavy libraries the command imported (checked in the same process, from
``sys.modules`` at exit). ``python -X importtime`` on the same command shows where the
rest goes.

    python benchmarks/bench_startup.py [--repeats 7]

``--run`` measures the fixed cost of a run instead (issue 26, "Fixed cost of a run"): the CPU
seconds (user + system, the operating system's accounting of the finished process) of
``facetlake run`` on a 10-sample, two-model SF-RES evaluation (the precomputed system and the
copy-input heuristic; four metrics), each time in a fresh lake and a fresh Dagster home.
``--baseline REV`` runs the same command from a ``git worktree`` of REV (e.g. the commit before
a change) in turn with this checkout (A B A B ...), so the ratio is taken pair by pair on the
same machine state. A last row times the floor under such a run: the same libraries
imported, the same in-process instance, and four in-process Dagster runs of trivial assets
(:data:`FLOOR_PROBE`), i.e. what the four runs of a two-model evaluation cost with no work
of ours in them:

    python benchmarks/bench_startup.py --run --baseline 5b73d7a --repeats 7
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


RUN_SPEC = """name: fixed-cost
dataset: {kind: sfres, limit: 10}
adapter: {kind: generation, template: "{input}", version: "1"}
generation: {temperature: 0.0, max_tokens: 64, seed: 0}
models:
  sfres-system: "precomputed:column=system_output"
  copy-input: "heuristic:copy-input"
baseline: sfres-system
metrics: [exact_match, token_f1, bleu, rouge_l]
"""


FLOOR_PROBE = """
import gc, os, sys
sys.path.insert(0, os.getcwd())
gc.set_threshold(50000, 20, 20)  # as a facetlake command line process (pipelines/runs/heap.py)
import dagster as dg
import deltalake, numpy, polars, pyarrow, scipy.special  # what every facetlake run loads besides Dagster
from pipelines.runs.instance_storage import hold_connections, in_process_instance

parts = dg.DynamicPartitionsDefinition(name="p")

@dg.asset(partitions_def=parts)
def a():
    return dg.MaterializeResult(metadata={"n": 1})

@dg.asset(partitions_def=parts, deps=[a])
def b():
    return dg.MaterializeResult(metadata={"n": 1})

@dg.asset(partitions_def=parts, deps=[b])
def c():
    return dg.MaterializeResult(metadata={"n": 1})

@dg.asset_check(asset=c)
def c_ok():
    return dg.AssetCheckResult(passed=True)

defs = dg.Definitions(assets=[a, b, c], asset_checks=[c_ok], jobs=[dg.define_asset_job("j", selection=[a, b, c])])
instance = in_process_instance(os.environ["DAGSTER_HOME"])
gc.freeze()
instance.add_dynamic_partitions("p", ["k1", "k2", "k3", "k4"])
with hold_connections(instance):
    for key in ("k1", "k2", "k3", "k4"):
        assert defs.resolve_job_def("j").execute_in_process(instance=instance, partition_key=key).success
"""


def floor_cpu(work: Path) -> float:
    """CPU seconds of the floor under a 10-sample run: the same libraries imported, the same
    in-process instance (fresh home), and four in-process Dagster runs of three trivial
    partitioned assets and a check each (what a two-model evaluation's four runs cost
    Dagster with no work of ours in them)."""
    import resource
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", work / "home" / "dagster.yaml")
    env = dict(os.environ, DAGSTER_HOME=str(work / "home"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", FLOOR_PROBE], capture_output=True, text=True, cwd=ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"the Dagster floor probe failed:\n{out.stderr[-3000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def run_cpu(tree: Path, work: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``facetlake run`` of :data:`RUN_SPEC` with the code
    of ``tree``, in a fresh lake and Dagster home under ``work``."""
    import resource
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    shutil.copy(tree / "dagster.yaml", work / "home" / "dagster.yaml")
    spec = work / "spec.yaml"
    spec.write_text(RUN_SPEC, encoding="utf-8")
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv = ['facetlake', 'run', {str(spec)!r}, '--lake', "
            f"{str(work / 'lake')!r}]\nfrom pipelines.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n"
            "    sys.exit(e.code)\n")
    env = dict(os.environ, DAGSTER_HOME=str(work / "home"), COLUMNS="120")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=work, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"facetlake run ({tree}) failed:\n{out.stderr[-3000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def run_table(repeats: int, baseline: str | None) -> None:
    """Print the fixed cost of a 10-sample run (this checkout, and ``baseline`` side by side)."""
    from rich.console import Console
    from rich.table import Table

    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this checkout": ROOT}
        if baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", "-f", str(base), baseline], cwd=ROOT, check=True, capture_output=True)
            trees[f"baseline {baseline}"] = base
        try:
            run_cpu(ROOT, Path(tmp) / "warm")  # warm the file cache once (not counted)
            cpu: dict[str, list[float]] = {k: [] for k in trees}
            wall: dict[str, list[float]] = {k: [] for k in trees}
            floor: list[float] = []
            for _ in range(repeats):
                for label, tree in trees.items():  # A B A B ...
                    c, w = run_cpu(tree, Path(tmp) / "work")
                    cpu[label].append(c)
                    wall[label].append(w)
                floor.append(floor_cpu(Path(tmp) / "floor"))
        finally:
            if baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
        table = Table(title=f"facetlake run, 10 samples x 2 models x 4 metrics, fresh lake, {repeats} runs each "
                            f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()})")
        for column in ("code", "median CPU s", "min CPU s", "median wall s", "CPU / baseline (median of pairs)"):
            table.add_column(column)
        labels = list(trees)
        for label in labels:
            ratio = ""
            if baseline and label != labels[-1]:
                ratio = f"{statistics.median(a / b for a, b in zip(cpu[label], cpu[labels[-1]])):.2f}"
            table.add_row(label, f"{statistics.median(cpu[label]):.2f}", f"{min(cpu[label]):.2f}",
                          f"{statistics.median(wall[label]):.2f}", ratio)
        floor_ratio = f"{statistics.median(f / b for f, b in zip(floor, cpu[labels[-1]])):.2f}" if baseline else ""
        table.add_row("floor: imports, instance, 4 trivial Dagster runs", f"{statistics.median(floor):.2f}", f"{min(floor):.2f}", "",
                      floor_ratio)
        Console(width=160).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--run", action="store_true", help="the CPU cost of a 10-sample facetlake run instead of start-up")
    parser.add_argument("--baseline", help="with --run: a git revision to run side by side (A B A B)")
    args = parser.parse_args()
    if args.run:
        run_table(args.repeats, args.baseline)
        return
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
