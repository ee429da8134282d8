"""Cost of the analysis stage.

1. Statistics, old against new (always): per test, the implementation facetlake used
   before (scipy.stats.permutation_test / scipy.stats.bootstrap / scipy's binomtest
   Wilson, one call per test) and the vectorised one in metric_ops.stats, at 1k, 10k
   and 100k paired samples, timed side by side in one process, with the agreement of
   their values (difference of p-values against the Monte Carlo standard error;
   difference of interval bounds in units of sd/sqrt(n)).
2. Corpus-level tests against sacrebleu's own paired_bs / paired_ar (always), on
   synthetic corpora of 1k and 10k segments: time and p-values at the same seed.
3. With --lake: the analysis assets' functions on a demo lake (comparisons,
   correlations, the HTML report), per demo evaluation.

    python benchmarks/bench_analysis.py [--sizes 1000,10000,100000] [--resamples 10000]
    facetlake demo --lake /tmp/demo-lake && python benchmarks/bench_analysis.py --lake /tmp/demo-lake
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from metric_ops import stats  # noqa: E402


# --------------------------------------------------------------------------- the implementations facetlake used before
def old_permutation(x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int) -> float:
    """metric_ops.stats.paired_permutation_test before issue 14 (scipy.stats.permutation_test)."""
    from scipy import stats as sps

    def mean_diff(u, v, axis=-1):
        return np.mean(v - u, axis=axis)

    n = x.size
    res = sps.permutation_test((x, y), mean_diff, permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                               rng=np.random.default_rng(seed), batch=max(1, min(n_resamples, 2_000_000 // max(n, 1))))
    return float(min(1.0, res.pvalue))


def old_bootstrap(x: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    """metric_ops.stats.bootstrap_ci before issue 14 (scipy.stats.bootstrap, percentile)."""
    from scipy import stats as sps

    res = sps.bootstrap((x,), np.mean, n_resamples=n_resamples, method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def old_wilson(k: int, n: int) -> tuple[float, float]:
    """metric_ops.stats.wilson_interval before issue 14 (scipy binomtest proportion_ci)."""
    from scipy import stats as sps

    ci = sps.binomtest(k, n).proportion_ci(method="wilson")
    return float(ci.low), float(ci.high)


def _timed(fn, *args, repeat: int = 1, **kwargs):
    """(best wall time of `repeat` calls, the result): the minimum damps noise from other
    work on a shared machine."""
    best = math.inf
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, out


def statistics_table(sizes: list[int], resamples: int, bootstrap_resamples: int, seed: int, repeat: int = 3) -> Table:
    table = Table(title=f"paired statistics, old (scipy, per call) vs new (vectorised), {resamples} permutations, "
                        f"{bootstrap_resamples} bootstrap resamples")
    for col in ("test", "n", "old s", "new s", "old/new", "old value", "new value", "agreement"):
        table.add_column(col, justify="right")
    rng = np.random.default_rng(seed)
    for n in sizes:
        x = rng.beta(2, 5, n)  # skewed per-sample scores in [0, 1]
        noise = rng.normal(0, 0.1, n)
        y = x + noise - noise.mean() + 1.5 * float(np.std(noise)) / math.sqrt(n)  # mean shift of 1.5 standard errors: p ~ 0.13
        # sign-flip permutation test
        t_old, p_old = _timed(old_permutation, x, y, resamples, seed)
        t_new, res = _timed(stats.paired_permutation_test, x, y, resamples, seed, repeat=repeat)
        se = math.sqrt(2 * p_old * (1 - p_old) / resamples)
        table.add_row("paired permutation p", f"{n:,}", f"{t_old:.3f}", f"{t_new:.3f}", f"{t_old / t_new:.1f}x", f"{p_old:.4f}",
                      f"{res.p_value:.4f}", f"|dp| {abs(res.p_value - p_old):.4f} = {abs(res.p_value - p_old) / se:.1f} MC se")
        # percentile bootstrap of the mean
        t_old, (lo_old, hi_old) = _timed(old_bootstrap, y, bootstrap_resamples, seed)
        t_new, ci = _timed(stats.bootstrap_ci, y, np.mean, stats.CONFIDENCE, bootstrap_resamples, seed, repeat=repeat)
        unit = float(np.std(y)) / math.sqrt(n)
        worst = max(abs(ci.low - lo_old), abs(ci.high - hi_old)) / unit
        table.add_row("bootstrap CI of mean" + (" (wild)" if "wild" in ci.method else ""), f"{n:,}", f"{t_old:.3f}", f"{t_new:.3f}",
                      f"{t_old / t_new:.1f}x", f"[{lo_old:.4f}, {hi_old:.4f}]", f"[{ci.low:.4f}, {ci.high:.4f}]",
                      f"max |d bound| {worst:.3f} sd/sqrt(n)")
        # Wilson interval
        k = int((y > 0.3).sum())
        t_old, (lo_old, hi_old) = _timed(old_wilson, k, n)
        t_new, w = _timed(stats.wilson_interval, k, n, repeat=repeat)
        table.add_row("Wilson interval", f"{n:,}", f"{t_old * 1e3:.2f} ms", f"{t_new * 1e3:.2f} ms", f"{t_old / t_new:.1f}x",
                      f"[{lo_old:.5f}, {hi_old:.5f}]", f"[{w.low:.5f}, {w.high:.5f}]",
                      f"max |d| {max(abs(w.low - lo_old), abs(w.high - hi_old)):.1e}")
        # a whole (metric, model pair) at this size: one permutation test + both models' intervals,
        # every one with `resamples` resamples
        flavour = stats.bootstrap_resampling(n, resamples)
        t_pair = sum(_timed(f, repeat=repeat)[0] for f in (
            lambda: stats.paired_permutation_test(x, y, resamples, seed),
            lambda: stats.bootstrap_ci(x, np.mean, stats.CONFIDENCE, resamples, seed, flavour),
            lambda: stats.bootstrap_ci(y, np.mean, stats.CONFIDENCE, resamples, seed, flavour)))
        table.add_row("(metric, model pair): test + 2 intervals", f"{n:,}", "", f"{t_pair:.3f}", "", "", "",
                      f"{resamples} resamples each ({flavour} bootstrap)")
    return table


def corpus_table(sizes: list[int], seed: int) -> Table:
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import _paired_ar_test, _paired_bs_test

    from metric_ops.lexical.bleu import bleu_from_totals

    table = Table(title="corpus BLEU significance: sacrebleu's paired_bs / paired_ar vs metric_ops.stats (same seed)")
    for col in ("test", "segments", "sacrebleu s", "facetlake s", "ratio", "sacrebleu p", "facetlake p"):
        table.add_column(col, justify="right")
    rnd = np.random.default_rng(seed)
    vocab = np.array("the a cat dog sat ran on under mat rug house garden red blue big small bird fish tree road".split())
    for n in sizes:
        refs = [" ".join(rnd.choice(vocab, 12)) for _ in range(n)]

        def noisy(ref: str) -> str:
            w = ref.split()
            for i in rnd.choice(12, 4, replace=False):
                w[i] = str(rnd.choice(vocab))
            return " ".join(w)

        a, b = [noisy(r) for r in refs], [noisy(r) for r in refs]
        bleu = BLEU()
        stats_a = bleu._extract_corpus_statistics(a, [refs])
        base = bleu._aggregate_and_compute(stats_a)
        sa, sb = np.array(stats_a, float), np.array(bleu._extract_corpus_statistics(b, [refs]), float)
        from sacrebleu.significance import Result

        info = {"BLEU": (stats_a, Result(base.score))}
        for name, sacre_fn, ours_fn, trials in (
            ("paired bootstrap", _paired_bs_test, stats.paired_bootstrap_corpus, 1000),
            ("approximate randomisation", _paired_ar_test, stats.approximate_randomization, 10000),
        ):
            t_ref, (_, res) = _timed(sacre_fn, info, "B", b, [refs], {"BLEU": bleu}, trials, -1, 12345)
            t_new, ours = _timed(ours_fn, sa, sb, bleu_from_totals, trials, seed=12345)
            table.add_row(name, f"{n:,}", f"{t_ref:.3f}", f"{t_new:.3f}", f"{t_ref / t_new:.1f}x", f"{res['BLEU'].p_value:.4f}",
                          f"{ours.p_value:.4f}")
    return table


def lake_table(lake_root: str, permutations: int, resamples: int) -> Table:
    from assets.comparisons import ComparisonsConfig, comparison_rows
    from assets.correlations import correlation_table
    from pipelines.report import write_report
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=lake_root)
    table = Table(title="analysis stage on a demo lake (one process, warm imports)")
    for col in ("evaluation", "samples", "models", "scores", "comparisons s", "rows", "correlations s", "rows ", "report s", "MB"):
        table.add_column(col, justify="right")
    comparison_rows(lake, lake.read("evaluations")["fingerprint"][0], "warm-up", ComparisonsConfig(n_permutations=99, n_resamples=99))
    for ev in lake.read("evaluations").sort("name").iter_rows(named=True):
        fp = ev["fingerprint"]
        scores = lake.read("scores", where={"fingerprint": fp})
        if scores.height == 0:
            continue
        t0 = time.perf_counter()
        comp, _, _ = comparison_rows(lake, fp, "bench", ComparisonsConfig(n_permutations=permutations, n_resamples=resamples))
        t1 = time.perf_counter()
        corr, _ = correlation_table(lake, fp, "bench")
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            path, _ = write_report(lake, fp, Path(tmp) / "r.html")
            size = path.stat().st_size / 1e6
        t3 = time.perf_counter()
        table.add_row(ev["name"], str(ev["n_samples"]), str(scores["model"].n_unique()), str(scores["metric"].n_unique()),
                      f"{t1 - t0:.2f}", str(len(comp)), f"{t2 - t1:.2f}", str(len(corr)), f"{t3 - t2:.2f}", f"{size:.1f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="paired sample sizes, comma-separated")
    parser.add_argument("--resamples", type=int, default=10000, help="permutation resamples (and per-pair interval resamples)")
    parser.add_argument("--bootstrap-resamples", type=int, default=stats.DEFAULT_RESAMPLES, help="bootstrap resamples, old vs new")
    parser.add_argument("--corpus-sizes", default="1000,10000", help="corpus segments for the sacrebleu comparison")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="new implementation: best of this many calls")
    parser.add_argument("--lake", help="also time the analysis assets on a lake written by `facetlake demo`")
    parser.add_argument("--permutations", type=int, default=9999, help="with --lake: permutations per pairwise test")
    args = parser.parse_args()
    console = Console(width=200)
    console.print(f"machine: {platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores, "
                  f"python {platform.python_version()}, numpy {np.__version__}")
    console.print(f"load average before: {__import__('os').getloadavg()}")
    console.print(statistics_table([int(s) for s in args.sizes.split(",")], args.resamples, args.bootstrap_resamples, args.seed,
                                   args.repeat))
    if args.corpus_sizes:
        console.print(corpus_table([int(s) for s in args.corpus_sizes.split(",")], args.seed))
    if args.lake:
        console.print(lake_table(args.lake, args.permutations, args.bootstrap_resamples))
    console.print(f"load average after: {__import__('os').getloadavg()}")


if __name__ == "__main__":
    main()
