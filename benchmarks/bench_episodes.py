"""Cost of the agent-episode path on τ-bench's gpt-4o airline run (200 episodes): reading
the file, each oracle, and the corpus statistics (pass@k / pass^k with bootstrap over
tasks, k = 1..4). Prints one table: wall time per step and per episode, and each step's
share of the whole (ratios within one run, so machine load matters less).

    .venv/bin/python benchmarks/bench_episodes.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metric_ops.base import Sample  # noqa: E402
from metric_ops.agents.passk import is_pass, pass_k_curve  # noqa: E402
from metric_ops.registry import get_metric  # noqa: E402
from resources.agents.episodes import EpisodesDataset, read_episodes  # noqa: E402

TAU = ROOT / "data" / "tau-bench" / "gpt-4o-airline.json"


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    t_read, records = best_of(args.repeat, lambda: read_episodes(TAU))
    rows.append(("read τ-bench file (200 episodes)", t_read))
    t_tasks, tasks = best_of(args.repeat, lambda: {s.sample_id: s for s in EpisodesDataset(path=str(TAU)).load()})
    rows.append(("tasks as samples (50)", t_tasks))
    samples = [Sample(f"{r.task_id}#{r.trial}", tasks[r.task_id].input, metadata={**tasks[r.task_id].metadata, "reward": r.reward})
               for r in records]
    outputs = [json.dumps(r.messages) for r in records]
    passes = {}
    for name in ("episode_reward", "action_oracle", "outputs_oracle", "policy_oracle"):
        metric = get_metric(name)
        t, scores = best_of(args.repeat, lambda m=metric: m.score_batch(samples, outputs))
        rows.append((f"oracle {name}", t))
        if name == "episode_reward":
            passes = scores
    table: dict[str, list[bool]] = {}
    for r, s in zip(records, passes):
        table.setdefault(r.task_id, []).append(is_pass(s["episode_pass"].value))
    t_stats, _ = best_of(args.repeat, lambda: pass_k_curve(table, n_resamples=2000))
    rows.append(("pass@k + pass^k, k=1..4, 2x2000 bootstrap", t_stats))
    total = sum(t for _, t in rows)
    n = len(records)
    print(f"{'step':48} {'seconds':>9} {'ms/episode':>11} {'share':>7}")
    for name, t in rows:
        print(f"{name:48} {t:9.4f} {1000 * t / n:11.3f} {t / total:7.1%}")
    print(f"{'total':48} {total:9.4f} {1000 * total / n:11.3f} {1:7.0%}")


if __name__ == "__main__":
    main()
