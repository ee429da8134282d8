"""Scale: N samples x 2 precomputed models x lexical metrics, end to end (issues 13 and 14).

For each size (in score rows: N samples x 2 models x 4 scores, BLEU + ROUGE-L's P/R/F)
the benchmark writes a dataset of SF-RES pairs repeated with unique ids and two
precomputed output files (the shipped system output and a word-shuffled copy), then
times, each in a fresh process:

1. ``metric compute``: the same metrics through facetlake's metric classes alone
   (``score_batch`` over every pair of both models; no Dagster, no Delta, no analysis);
2. ``facetlake run SPEC``: register, samples, generations, annotations, scores and the
   verdicts (summary, comparisons, correlations);
3. ``chrF alone`` and ``facetlake score --metric chrf``: a rescore against the metric
   computed alone over the same pairs.

Wall time and peak RSS come from ``/usr/bin/time``; the per-stage rows are read from the
lake's ``runs`` table (each asset's start, finish and rows). Overhead = run - metric
compute. The scores asset spreads lexical metrics over the machine's cores
(metric_ops/scoring/parallel.py), so the table also gives *metric compute, all cores* (the same
metrics through the same worker pool, with the runner's per-row checks: the least the run's
scoring can cost here) and the overhead against it: a run that is faster than one-process
compute still has its overhead shown. The exponent of cost against size is the least-squares slope of log(time) on
log(size) over the sizes given (>= 10k score rows when there are two such sizes).

    python benchmarks/bench_scale.py --rows 1000,10000,100000,1000000
    python benchmarks/bench_scale.py --profile distributed --rows 10000,100000

``--profile distributed`` runs the same commands with ``--submit`` on a PostgreSQL
instance, Celery workers (RabbitMQ) and the lake on S3 (moto), set up and torn down by
``tests/support/services.py``'s ``deployment()`` (docs/deploy.md). Peak RSS there is the
CLI's and, read from /proc at the end, the largest Celery worker process's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
BIN = Path(sys.executable).parent
SCORES_PER_SAMPLE = 2 * 4  # 2 models x (bleu, rouge_l_precision, rouge_l_recall, rouge_l_f)

# the pairs and the metrics, read the same way by both measurements below
_LOAD = r"""
import json, sys, time
from metric_ops import Sample, get_metric
folder, metrics = sys.argv[1], sys.argv[2].split(",")
rows = [json.loads(l) for l in open(folder + "/data.jsonl")]
samples = [Sample(r["sample_id"], r["input"], (r["reference"],)) for r in rows]
outs = [[json.loads(l)["output"] for l in open(f"{folder}/{m}.jsonl")] for m in ("v1", "v2")]
built = [get_metric(name) for name in metrics]
"""

COMPUTE = _LOAD + r"""
for metric in built:  # first call outside the timer: lazy library imports are start-up, not compute
    metric.score_batch(samples[:1], outs[0][:1])
t0 = time.perf_counter()
n = 0
for metric in built:
    for out in outs:
        for i in range(0, len(samples), 256):
            n += len(metric.score_batch(samples[i:i + 256], out[i:i + 256]))
print(json.dumps({"compute_s": time.perf_counter() - t0, "scored": n}))
"""

# the same metrics spread over the machine's cores as the scores asset spreads them
# (metric_ops.scoring.parallel: chunks in a forkserver pool, with the runner's per-row checks and
# detail JSON): what the run's scoring could cost at best on this machine
COMPUTE_PARALLEL = _LOAD + r"""
from metric_ops.scoring.parallel import _pool, configured_workers, parallel_columns
workers = configured_workers()
if __name__ == "__main__":
    _pool(workers)  # the pool's start-up outside the timer, as the lazy imports above
    for metric in built:
        parallel_columns(metric, samples[:2 * workers], outs[0][:2 * workers], 256, workers)
    t0 = time.perf_counter()
    for metric in built:
        for out in outs:
            parallel_columns(metric, samples, out, 256, workers)
    print(json.dumps({"compute_s": time.perf_counter() - t0, "workers": workers}))
"""


def make_data(folder: Path, n: int) -> Path:
    """Dataset, two precomputed output files and the spec for ``n`` samples; returns the spec."""
    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "data.jsonl", "w") as f, open(folder / "v1.jsonl", "w") as a, open(folder / "v2.jsonl", "w") as b:
        for i in range(n):
            d = data[i % len(data)]
            sid = f"s{i:07d}"
            f.write(json.dumps({"sample_id": sid, "input": d["source"], "reference": d["reference"]}) + "\n")
            a.write(json.dumps({"sample_id": sid, "output": d["system_output"]}) + "\n")
            words = d["system_output"].split()
            rng.shuffle(words)
            b.write(json.dumps({"sample_id": sid, "output": " ".join(words)}) + "\n")
    spec = folder / "spec.yaml"
    spec.write_text(
        f"name: scale-{n}\n"
        f"dataset: {{kind: file, path: {folder / 'data.jsonl'}, mapping: {{input: input, references: reference, sample_id: sample_id}}}}\n"
        f"models:\n  m1: \"precomputed:{folder / 'v1.jsonl'}\"\n  m2: \"precomputed:{folder / 'v2.jsonl'}\"\n"
        "baseline: m1\nmetrics: [bleu, rouge_l]\n"
    )
    return spec


def timed(args: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``args`` under /usr/bin/time; wall seconds, peak RSS (MiB), stdout."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tf.name, *args], cwd=ROOT, env=env or os.environ.copy(),
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        fields = (tf.read().strip().splitlines() or ["0 0"])[-1].split()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    # peak RSS is the command's own: scoring workers are the forkserver's children, not its
    return {"wall_s": wall, "rss_mib": int(fields[-1]) / 1024, "stdout": proc.stdout}


def stage_rows(lake_root: str, since: float, env: dict[str, str]) -> list[dict]:
    """Per-asset wall time and rows since ``since`` (epoch s), summed over partitions, from ``runs``."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        import polars as pl

        from resources.lake.resource import LakeStore

        runs = LakeStore(root=lake_root).read("runs", columns=["asset", "rows", "started_at", "finished_at"])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    import datetime as dt

    runs = runs.filter(pl.col("started_at") >= dt.datetime.fromtimestamp(since, dt.timezone.utc))
    agg = (runs.with_columns(s=(pl.col("finished_at") - pl.col("started_at")).dt.total_microseconds() / 1e6)
           .group_by("asset").agg(pl.col("s").sum(), pl.col("rows").sum(), pl.col("started_at").min()).sort("started_at"))
    return agg.select("asset", "s", "rows").to_dicts()


def fit_exponent(sizes: list[int], times: list[float]) -> float | None:
    """Least-squares slope of log(time) on log(size) (None with fewer than two sizes)."""
    pts = [(math.log(n), math.log(t)) for n, t in zip(sizes, times) if t > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def worker_peak_mib(infra) -> float:
    """Largest VmHWM (peak RSS) among the Celery worker processes' groups, from /proc."""
    peak = 0
    for name, proc in infra.processes.items():
        if not name.startswith("worker"):
            continue
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.getpgid(int(pid)) != proc.pid:
                    continue
                for line in open(f"/proc/{pid}/status"):
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except (OSError, ProcessLookupError):
                continue
    return peak / 1024


def run_size(rows: int, work: Path, profile: str, infra=None) -> dict:
    n = max(1, rows // SCORES_PER_SAMPLE)
    folder = work / f"n{n}"
    spec = make_data(folder, n)
    py = str(BIN / "python")
    env = dict(infra.env) if infra else {**os.environ, "DAGSTER_HOME": str(work / "dagster_home")}
    (work / "dagster_home").mkdir(exist_ok=True)
    if not infra:  # the project's instance settings (telemetry off), as a user's project has
        shutil.copy(ROOT / "dagster.yaml", work / "dagster_home" / "dagster.yaml")
    lake = infra.lake_uri if infra else str(folder / "lake")  # workers read the deployment's lake; one evaluation per size
    env["FACETLAKE_LAKE"] = lake
    submit = ["--submit"] if infra else []
    out: dict = {"rows": rows, "samples": n}
    compute = timed([py, "-c", COMPUTE, str(folder), "bleu,rouge_l"])
    out["compute_s"] = json.loads(compute["stdout"])["compute_s"]
    out["compute_rss"] = compute["rss_mib"]
    parallel = timed([py, "-c", COMPUTE_PARALLEL, str(folder), "bleu,rouge_l"])
    out["compute_all_cores_s"] = json.loads(parallel["stdout"])["compute_s"]
    t0 = time.time()
    r = timed([str(BIN / "facetlake"), "run", str(spec), *submit], env)
    out["run_s"], out["run_rss"] = r["wall_s"], r["rss_mib"]
    storage = {k: v for k, v in env.items() if k.startswith("AWS_")}
    out["run_stages"] = stage_rows(lake, t0 - 1, storage)
    chrf = timed([py, "-c", COMPUTE, str(folder), "chrf"])
    out["chrf_alone_s"] = json.loads(chrf["stdout"])["compute_s"]
    out["chrf_alone_wall_s"] = chrf["wall_s"]
    t1 = time.time()
    r = timed([str(BIN / "facetlake"), "score", "--metric", "chrf", "-e", f"scale-{n}", *submit], env)
    out["rescore_s"], out["rescore_rss"] = r["wall_s"], r["rss_mib"]
    out["rescore_stages"] = stage_rows(lake, t1 - 1, storage)
    if infra:
        out["worker_rss"] = worker_peak_mib(infra)
    if not infra:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def machine() -> str:
    load = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = cpu
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {os.cpu_count()} cores ({model}), {mem:.0f} GiB RAM, Python {platform.python_version()}, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def report(results: list[dict], profile: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    table = Table(title=f"facetlake at scale ({profile} profile): run = register + samples + generations + scores + verdicts")
    for col in ("score rows", "samples", "metric compute s", "run s", "overhead s", "overhead / compute",
                "compute, all cores s", "overhead / compute, all cores", "run rows/s",
                "run peak MiB", "chrF alone s", "rescore s", "rescore / (alone + 5 s)", "rescore peak MiB"):
        table.add_column(col, justify="right")
    for r in results:
        overhead = r["run_s"] - r["compute_s"]
        par = r.get("compute_all_cores_s")
        table.add_row(f"{r['rows']:,}", f"{r['samples']:,}", f"{r['compute_s']:.2f}", f"{r['run_s']:.2f}", f"{overhead:.2f}",
                      f"{overhead / r['compute_s']:.2f}", f"{par:.2f}" if par else "-",
                      f"{(r['run_s'] - par) / par:.2f}" if par else "-",
                      f"{r['rows'] / r['run_s']:,.0f}",
                      f"{r['run_rss']:.0f}" + (f" (+worker {r['worker_rss']:.0f})" if "worker_rss" in r else ""),
                      f"{r['chrf_alone_s']:.2f}", f"{r['rescore_s']:.2f}", f"{r['rescore_s'] / (r['chrf_alone_s'] + 5):.2f}",
                      f"{r['rescore_rss']:.0f}")
    console.print(table)
    stages = Table(title="per stage (from the runs table: seconds summed over partitions, rows written, rows/s)")
    stages.add_column("score rows", justify="right")
    stages.add_column("command")
    stages.add_column("stage")
    for col in ("s", "rows", "rows/s"):
        stages.add_column(col, justify="right")
    for r in results:
        for command in ("run", "rescore"):
            for st in r[f"{command}_stages"]:
                rate = f"{st['rows'] / st['s']:,.0f}" if st["s"] > 0 and st["rows"] else "-"
                stages.add_row(f"{r['rows']:,}", command, st["asset"], f"{st['s']:.2f}", f"{st['rows']:,}", rate)
    console.print(stages)
    big = [r for r in results if r["rows"] >= 10_000]
    fit = big if len(big) >= 2 else results
    sizes = [r["samples"] for r in fit]
    for label, key in (("metric compute", "compute_s"), ("facetlake run", "run_s"), ("rescore", "rescore_s")):
        k = fit_exponent(sizes, [r[key] for r in fit])
        print(f"fitted exponent of {label} time vs samples over {len(fit)} sizes: {k:.2f}" if k is not None else
              f"fitted exponent of {label}: needs two sizes")
    if len(fit) >= 2:
        # linear model t = a + b*N: b is the per-sample cost, a the fixed start-up
        for label, key in (("facetlake run", "run_s"), ("metric compute", "compute_s"), ("rescore", "rescore_s")):
            xs, ys = sizes, [r[key] for r in fit]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            print(f"{label}: fixed {my - b * mx:.1f} s + {b * 1e6:.1f} s per million samples")
    print(machine())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000,10000,100000,1000000", help="score-row sizes, comma separated")
    parser.add_argument("--profile", choices=("embedded", "distributed"), default="embedded")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (distributed profile)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    sizes = [int(s) for s in args.rows.split(",") if s]
    print(machine())
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = Path(tmp)
        if args.profile == "distributed":
            from tests.support.services import deployment

            try:
                with deployment(work / "infra", workers=args.workers) as infra:
                    for rows in sizes:
                        results.append(run_size(rows, work, args.profile, infra))
                        print(json.dumps({k: v for k, v in results[-1].items() if not k.endswith("stages")}), flush=True)
            except BaseException as exc:  # pytest.skip raises a BaseException naming what is missing
                if type(exc).__name__ == "Skipped":
                    sys.exit(f"distributed profile unavailable: {exc}")
                raise
        else:
            for rows in sizes:
                results.append(run_size(rows, work, args.profile))
                print(json.dumps({k: v for k, v in results[-1].items() if not k.endswith("stages")}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    report(results, args.profile)


if __name__ == "__main__":
    main()
