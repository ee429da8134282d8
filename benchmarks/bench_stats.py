"""Time the verdict statistics of issue 28 at 100k paired samples and 10,000 resamples.

Goal: each computation within 1 s per (metric, model pair). Prints one table row per
statistic and cluster count (seconds, best of ``--repeats``). Run:

    .venv/bin/python benchmarks/bench_stats.py [--repeats 3] [--n 100000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from metric_ops import stats
from metric_ops.compare import compare_models


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, r = args.n, args.resamples
    rows = []
    for g in (1_000, 10_000, n // 2):
        labels = np.repeat(np.arange(g), n // g)[:n]
        x = rng.normal(60, 20, labels.size)
        y = x + rng.normal(0, 3, g)[labels] + rng.normal(0, 3, labels.size)
        d = y - x
        cases = {
            "cluster_robust_se": lambda: stats.cluster_robust_se(d, labels),
            "cluster_summary (SEs, ICC, design effect)": lambda: stats.cluster_summary(d, labels),
            "clustered_paired_test": lambda: stats.clustered_paired_test(x, y, labels, n_resamples=r),
            "cluster_bootstrap_ci": lambda: stats.cluster_bootstrap_ci(d, labels, n_resamples=r),
        }
        for name, fn in cases.items():
            rows.append((name, g, _best(fn, args.repeats)))
    x = rng.normal(60, 20, n)
    rows.append(("paired_permutation_test (ties counted)", None, _best(lambda: stats.paired_permutation_test(x, x + rng.normal(0, 3, n), n_resamples=r), args.repeats)))
    rows.append(("min_detectable_effect", None, _best(lambda: stats.min_detectable_effect(float(x.std()), n), args.repeats)))
    from metric_ops.stats.trials import hierarchical_bootstrap_ci

    trial_items = [f"s{i}" for i in range(n // 4) for _ in range(4)]
    rows.append((f"hierarchical_bootstrap_ci ({n // 4:,} items x 4 trials; wild past 2^25 draws)", None,
                 _best(lambda: hierarchical_bootstrap_ci(x[: len(trial_items)], trial_items, n_resamples=r), args.repeats)))
    rows.append((f"  the same, resampling indices at every level, 1,000 resamples", None,
                 _best(lambda: hierarchical_bootstrap_ci(x[: len(trial_items)], trial_items, n_resamples=1000, wild=False), 1)))
    import polars as pl

    frame = pl.DataFrame({"model": ["a"] * n + ["b"] * n, "sample_id": [f"s{i}" for i in range(n)] * 2, "metric": "m",
                          "value": np.concatenate([x, x + rng.normal(0.1, 3, n)]), "direction": "maximize",
                          "dimension": "baseline_grounding", "status": "scored", "detail": None},
                         schema_overrides={"detail": pl.String})
    rows.append(("compare_models, 2 models (all of the above per pair + tie groups)", None,
                 _best(lambda: compare_models(frame, baseline="a", n_resamples=r, n_permutations=r), 1)))
    print(f"{'statistic':<68} {'clusters':>9} {'seconds':>8}")
    for name, g, sec in rows:
        print(f"{name:<68} {'' if g is None else g:>9} {sec:>8.3f}")
    print(f"\nn = {n:,} paired samples, {r:,} resamples; goal: each within 1 s per (metric, model pair)")


if __name__ == "__main__":
    main()
