"""Cost of the analysis stage on the demo data: comparisons (bootstrap intervals, paired
permutation tests, Holm), correlations (Pearson/Spearman/Kendall over every pair) and the
HTML report, per demo evaluation, measured in process on an existing demo lake.

Prints a table: evaluation, samples, models, score names, comparisons seconds (and rows),
correlations seconds (and rows), report seconds (and MB).

    facetlake demo --lake /tmp/demo-lake
    python benchmarks/bench_analysis.py --lake /tmp/demo-lake [--permutations 9999]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from assets.comparisons import ComparisonsConfig, comparison_rows  # noqa: E402
from assets.correlations import correlation_table  # noqa: E402
from pipelines.report import write_report  # noqa: E402
from resources.lake import LakeStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="a lake written by `facetlake demo`")
    parser.add_argument("--permutations", type=int, default=9999)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    lake = LakeStore(root=args.lake)
    table = Table(title="analysis stage (one process, warm imports)")
    for col in ("evaluation", "samples", "models", "scores", "comparisons s", "rows", "correlations s", "rows ", "report s", "MB"):
        table.add_column(col, justify="right")
    comparison_rows(lake, lake.read("evaluations")["fingerprint"][0], "warm-up", ComparisonsConfig(n_permutations=99, n_resamples=99))
    for ev in lake.read("evaluations").sort("name").iter_rows(named=True):
        fp = ev["fingerprint"]
        scores = lake.read("scores", where={"fingerprint": fp})
        if scores.height == 0:
            continue
        t0 = time.perf_counter()
        comp, _, _ = comparison_rows(lake, fp, "bench", ComparisonsConfig(n_permutations=args.permutations, n_resamples=args.resamples))
        t1 = time.perf_counter()
        corr, _ = correlation_table(lake, fp, "bench")
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            path, _ = write_report(lake, fp, Path(tmp) / "r.html")
            size = path.stat().st_size / 1e6
        t3 = time.perf_counter()
        table.add_row(ev["name"], str(ev["n_samples"]), str(scores["model"].n_unique()), str(scores["metric"].n_unique()),
                      f"{t1 - t0:.2f}", str(len(comp)), f"{t2 - t1:.2f}", str(len(corr)), f"{t3 - t2:.2f}", f"{size:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
