"""Model and judge calls against the server's own limit (issue 30).

A scripted OpenAI-compatible server (tests/support/scripted_llm.py) runs in its own process
on 127.0.0.1 and answers every request after a fixed latency L (default 200 ms); nothing
else limits it. N calls at C in flight then take at best N x L / C (the ideal). For
N generations (the API backend, resources/backends/api.py) and N G-Eval judge calls (the
``g_eval`` metric with an ``api:`` judge, through the judge cache) at each concurrency,
with the outbound ledger on (a real Delta lake: every intent committed before its call is
sent) and off, the table gives the wall time, the ideal, their ratio, calls per second,
the ledger's cost (wall with / wall without) and what the run's spend counter recorded at
an example price.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_calls.py [--n 2000] [--latency 0.2] [--concurrency 8 32 128]

Goal (issue 30): at most 1.15x the ideal at concurrency 32, with the ledger on.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metric_ops.base import Sample  # noqa: E402
from resources.backends import GenerationRequest  # noqa: E402
from resources.backends.api import APIBackend  # noqa: E402
from resources.backends.endpoints import call_session, run_spend  # noqa: E402
from resources.lake.resource import LakeStore  # noqa: E402
from tests.support.serving import free_port  # noqa: E402

PRICE = {"scripted": {"input_per_1m": 0.15, "output_per_1m": 0.60, "batch_discount": 0.5}}  # an example price table


@contextlib.contextmanager
def server(latency: float):
    """The scripted server in its own process; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.scripted_llm", "--port", str(port), "--latency", str(latency)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def samples(n: int, tag: str) -> list[Sample]:
    return [Sample(sample_id=f"{tag}{i}", input=f"What is the opening time of restaurant number {i} ({tag})?") for i in range(n)]


def generations(base_url: str, n: int, concurrency: int, tag: str) -> tuple[float, int]:
    runtime = {"concurrency": concurrency, "prices": PRICE}
    backend = APIBackend(f"api:scripted@{base_url}", runtime)
    requests = [GenerationRequest(sample=s, prompt=s.input) for s in samples(n, tag)]
    with call_session(runtime):
        t0 = time.perf_counter()
        ok = sum(r.status == "ok" for r in backend.generate(requests, {"max_tokens": 64}))
        return time.perf_counter() - t0, ok, run_spend()


def geval(base_url: str, n: int, concurrency: int, tag: str, lake: LakeStore | None) -> tuple[float, int]:
    from metric_ops.registry import REGISTRY
    from resources.scoring.judges import judge_session

    runtime = {"concurrency": concurrency, "prices": PRICE}
    metric = REGISTRY.create("g_eval", judge=f"api:scripted@{base_url}",
                             criteria=[{"name": "helpfulness", "description": "answers the question", "steps": ["Read it.", "Rate it."]}])
    items = samples(n, tag)
    outputs = [f"It opens at {i % 12 + 1} am." for i in range(n)]
    with call_session(runtime), (judge_session(lake) if lake is not None else contextlib.nullcontext()):
        t0 = time.perf_counter()
        scores = metric.score_batch(items, outputs)
        wall = time.perf_counter() - t0
        return wall, sum(s["g_eval"].status == "scored" for s in scores), run_spend()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="calls per cell (default 2000)")
    parser.add_argument("--latency", type=float, default=0.2, help="the server's latency per call in seconds (default 0.2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    args = parser.parse_args()
    from resources.privacy.session import outbound_session

    rows = []
    with server(args.latency) as base_url:
        generations(base_url, 64, 8, "warm")  # connections, imports
        for c in args.concurrency:
            ideal = args.n * args.latency / c
            for kind in ("generation", "G-Eval"):
                walls = {}
                for ledger in (False, True):
                    tag = f"{kind[0]}{c}{int(ledger)}-"
                    lake = LakeStore(root=tempfile.mkdtemp(prefix="bench-calls-"))
                    scope = outbound_session(lake, run_id=tag, fingerprint="f", model="m") if ledger else contextlib.nullcontext()
                    with scope:
                        if kind == "generation":
                            wall, ok, spend = generations(base_url, args.n, c, tag)
                        else:
                            wall, ok, spend = geval(base_url, args.n, c, tag, lake)
                    walls[ledger] = wall
                    if ok != args.n:
                        raise SystemExit(f"{kind} at concurrency {c}: {args.n - ok} of {args.n} calls failed")
                rows.append((kind, c, walls[True], ideal, walls[True] / ideal, args.n / walls[True], walls[True] / walls[False],
                             walls[False] / ideal, spend["calls"], spend["usd"]))
    print(f"\n{args.n} calls per cell, server latency {args.latency * 1000:.0f} ms, ledger on (a Delta lake) unless said\n")
    head = ("kind", "C", "wall s", "ideal s", "x ideal", "calls/s", "ledger cost", "x ideal (no ledger)", "calls", "USD (example price)")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for kind, c, wall, ideal, ratio, rate, cost, bare, calls, usd in rows:
        print(f"{kind} | {c} | {wall:.2f} | {ideal:.2f} | {ratio:.2f} | {rate:.0f} | {cost:.2f}x | {bare:.2f} | {calls} | {usd:.4f}")


if __name__ == "__main__":
    main()
