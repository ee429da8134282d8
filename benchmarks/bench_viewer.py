"""The results viewer at scale (issue 29): first paint and next page of the compare view at
50,000 and 500,000 samples per model (two models), on a real Delta lake.

The lake: an evaluation registered the normal way over N question/answer samples (text
from SF-RES's real references, repeated), two models' outputs and exact-match / token-F1
score rows written straight to the Delta tables (what the assets would write; generating
and scoring a million rows through Dagster would measure the pipeline, not the viewer).
The viewer runs as `facetlake view` does (uvicorn on 127.0.0.1); timings are HTTP
responses read in full (the HTML the browser paints):

- ``first paint``: the first compare page of a server just started (its DuckDB connection
  opened on the first request), default and ``regressed`` mode;
- ``next page``: page 2, then a page far down (warm server), median of the repeats;
- ``search``: a regular expression over inputs and outputs.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_viewer.py [--samples 50000 500000] [--repeats 5]

Goal (issue 29): first paint under 2 s, next page under 300 ms on this machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import polars as pl

from pipelines.view import create_app
from tests.support.serving import BackgroundServer

MODELS = ("base", "tuned")


def build_lake(root: Path, n: int, prices: dict | None = None) -> tuple[str, str]:
    """A lake at ``root`` with evaluation ``scale`` over ``n`` samples and two models;
    ``prices``: the spec's ``runtime.prices`` (tokens in and out are then recorded: words of
    the input and of the output). Returns (lake root, fingerprint)."""
    from resources.catalog import register_evaluation
    from resources.catalog.spec import EvaluationSpec, resolve
    from resources.lake.resource import LakeStore
    from resources.lake.sample_codec import sample_frame

    refs = _sfres_references()
    data = root / "scale.jsonl"
    with data.open("w") as f:
        for i in range(n):
            ref = refs[i % len(refs)]
            f.write(json.dumps({"id": f"s{i}", "question": f"#{i}: restate: {ref}", "answer": ref}) + "\n")
    spec = EvaluationSpec.from_mapping({
        "name": "scale", "dataset": {"kind": "file", "path": str(data),
                                     "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "models": {m: "precomputed:column=answer" for m in MODELS}, "metrics": ["exact_match", "token_f1"],
        **({"runtime": {"prices": prices}} if prices else {})})
    resolved = resolve(spec)
    lake = LakeStore(root=str(root / "lake"))
    register_evaluation(lake, resolved)
    fp = resolved.fingerprint
    lake.replace("samples", sample_frame(resolved.samples, fp, resolved.dataset_name, resolved.dataset_hash), {"fingerprint": fp})
    now = dt.datetime.now(dt.timezone.utc)
    ids = [s.sample_id for s in resolved.samples]
    answers = [s.references[0] for s in resolved.samples]
    for k, model in enumerate(MODELS):
        # base answers every third sample wrong, tuned every fifth: regressions and improvements both occur
        wrong = 3 if k == 0 else 5
        outputs = [a if i % wrong else "I do not know." for i, a in enumerate(answers)]
        lake.replace("generations", pl.DataFrame({
            "model": model, "fingerprint": fp, "dataset": resolved.dataset_name, "sample_id": ids, "output": outputs,
            "status": "ok", "error": None, "backend": "precomputed", "prompt": None, "latency_s": 0.0,
            "tokens_in": [len(s.input.split()) for s in resolved.samples] if prices else None,
            "tokens_out": [len(o.split()) for o in outputs] if prices else None, "run_id": "bench", "created_at": now}, schema_overrides={
            "error": pl.String, "prompt": pl.String, "tokens_in": pl.Int64, "tokens_out": pl.Int64}), {"model": model, "fingerprint": fp})
        em = [1.0 if i % wrong else 0.0 for i in range(n)]
        f1 = [1.0 if i % wrong else 0.1 * ((i // wrong) % 7) / 7 for i in range(n)]
        frames = [pl.DataFrame({"model": model, "fingerprint": fp, "dataset": resolved.dataset_name, "sample_id": ids,
                                "metric": metric, "value": values, "direction": "maximize", "dimension": "baseline_grounding",
                                "locality": "local", "status": "scored", "detail": "{}", "signature": f"{metric}|bench",
                                "params": None, "run_id": "bench", "created_at": now},
                               schema_overrides={"params": pl.String})
                  for metric, values in (("exact_match", em), ("token_f1", f1))]
        lake.replace("scores", pl.concat(frames), {"model": model, "fingerprint": fp})
    return lake.root, fp


def _sfres_references() -> list[str]:
    """SF-RES's real reference texts (the shipped data)."""
    from resources.datasets import make_dataset

    return [s.references[0] for s in make_dataset({"kind": "sfres", "limit": 500}).load() if s.references]


def _get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
    seconds = time.perf_counter() - start
    assert b'id="total"' in body, body[:500]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[50_000, 500_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for n in args.samples:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            root, _ = build_lake(Path(tmp), n)
            built = time.perf_counter() - t0
            view = {"evaluation": "scale", "baseline": "base", "metric": "token_f1"}
            timings: dict[str, list[float]] = {}
            for _ in range(args.repeats):
                viewer = BackgroundServer(create_app(root), name="the viewer", lifespan="on").start()
                base = viewer.url  # a fresh server: its first request opens the DuckDB connection
                try:
                    timings.setdefault("first paint", []).append(_get(f"{base}/compare?{urlencode(view)}"))
                    timings.setdefault("first paint, regressed", []).append(
                        _get(f"{base}/compare?{urlencode({**view, 'mode': 'regressed'})}"))
                    timings.setdefault("next page", []).append(_get(f"{base}/compare?{urlencode({**view, 'page': 2})}"))
                    timings.setdefault("page 500", []).append(_get(f"{base}/compare?{urlencode({**view, 'page': 500})}"))
                    timings.setdefault("regex search", []).append(
                        _get(f"{base}/compare?{urlencode({**view, 'q': 'restaurant[s]? near', 'regex': 1})}"))
                finally:
                    viewer.stop()
            for what, values in timings.items():
                rows.append((n, what, statistics.median(values), min(values), max(values)))
            print(f"# {n} samples x {len(MODELS)} models: lake built in {built:.1f} s", flush=True)
    print(f"{'samples':>8} {'request':<24} {'median s':>9} {'min s':>7} {'max s':>7}")
    for n, what, med, lo, hi in rows:
        print(f"{n:>8} {what:<24} {med:>9.3f} {lo:>7.3f} {hi:>7.3f}")


if __name__ == "__main__":
    main()
