"""Generation throughput of the live backends on the tiny test LM (no GPU, no network).

Prints a table: backend, batch size / concurrency, samples, wall seconds, output tokens
per second, mean per-request latency. The hf rows measure batched generation on CPU; the
api rows measure the same model behind the project's OpenAI-format test server on
127.0.0.1 (HTTP + JSON overhead, concurrency with one model lock on the server).

    python benchmarks/bench_generation.py [--samples 32] [--max-tokens 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from resources.backends import GenerationRequest, ModelBackends  # noqa: E402
from resources.datasets import make_dataset  # noqa: E402
from support.openai_server import TinyOpenAIServer  # noqa: E402
from support.tiny_lm import build_tiny_lm  # noqa: E402


def run(backend, requests, settings):
    t0 = time.perf_counter()
    results = list(backend.generate(requests, settings))
    wall = time.perf_counter() - t0
    tokens = sum(r.tokens_out or 0 for r in results)
    lat = [r.latency_s for r in results if r.latency_s is not None]
    return wall, tokens / wall if wall else 0.0, statistics.fmean(lat) if lat else float("nan"), sum(r.status == "ok" for r in results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    path = build_tiny_lm()
    samples = make_dataset({"kind": "sfres", "limit": args.samples}).load()
    plain = [GenerationRequest(sample=s, prompt=s.input) for s in samples]
    chat = [GenerationRequest(sample=s, prompt=s.input, messages=[{"role": "user", "content": s.input}]) for s in samples]
    settings = {"temperature": 0.0, "max_tokens": args.max_tokens, "seed": 0, "logprobs": True, "top_logprobs": 3}
    rows = []
    warm = ModelBackends().backend_for(f"hf:{path}", {"batch_size": 4})
    list(warm.generate(plain[:4], settings))  # load once, warm up
    for batch in (1, 4, 16):
        backend = ModelBackends().backend_for(f"hf:{path}", {"batch_size": batch})
        rows.append(("hf", f"batch {batch}", *run(backend, plain, settings)))
    server = TinyOpenAIServer(path).start()
    try:
        for conc in (1, 4):
            backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"concurrency": conc})
            rows.append(("api (127.0.0.1)", f"concurrency {conc}", *run(backend, chat, settings)))
    finally:
        server.stop()
    print(f"tiny LM, {args.samples} samples x {args.max_tokens} new tokens, logprobs top-3")
    print(f"{'backend':<16} {'setting':<15} {'wall_s':>8} {'tok/s':>9} {'lat_mean_s':>11} {'ok':>4}")
    for name, setting, wall, tps, lat, ok in rows:
        print(f"{name:<16} {setting:<15} {wall:>8.2f} {tps:>9.1f} {lat:>11.3f} {ok:>4}")


if __name__ == "__main__":
    main()
