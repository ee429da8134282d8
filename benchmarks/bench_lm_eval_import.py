"""Cost of mapping an lm-eval output into lake rows, against the number of docs.

Builds synthetic lm-eval output folders of N docs by repeating the docs of the
lm-eval 0.4.11 test folder (tests/data/lm_eval_0_4_11: a multiple-choice task, and a
generate-until task with two filters) under new doc ids, then times, in process, what an
import computes from them: the samples (and their content hash), each doc's output, the
``lm_eval_responses`` rows and the ``scores`` rows. Prints a table per task: N, seconds,
microseconds per doc, and the ratio of the per-doc cost at the largest N to the smallest
(1.0 = linear; the Dagster materialisations and Delta writes are not included).

    python benchmarks/bench_lm_eval_import.py [--sizes 500,4000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import polars as pl  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from resources.datasets import content_hash  # noqa: E402
from resources.lm_eval.results import find_task_runs  # noqa: E402
from resources.lm_eval.bridge import score_rows_from_responses  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "lm_eval_0_4_11" / "tiny"


def synthetic_folder(n: int, out: Path) -> Path:
    """An lm-eval output folder with ``n`` docs per task (doc ids 0..n-1)."""
    folder = out / f"n{n}" / "tiny"
    folder.mkdir(parents=True)
    results = next(SOURCE.glob("results_*.json"))
    shutil.copy(results, folder / results.name)
    for samples in SOURCE.glob("samples_*.jsonl"):
        records = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines() if line.strip()]
        docs = sorted({r["doc_id"] for r in records})
        with (folder / samples.name).open("w", encoding="utf-8") as handle:
            for i in range(n):
                for r in records:
                    if r["doc_id"] == docs[i % len(docs)]:
                        handle.write(json.dumps({**r, "doc_id": i}) + "\n")
    return folder


def map_task(run) -> tuple[int, float]:
    started = time.perf_counter()
    samples = run.samples()
    content_hash(samples)
    for doc in run.docs:
        run.output(doc)
    rows = run.response_rows()
    frame = pl.DataFrame(rows, infer_schema_length=None)
    n_scores = sum(1 for _ in score_rows_from_responses(frame))
    return n_scores, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,4000", help="comma-separated doc counts")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    table = Table(title="lm-eval output -> lake rows (one process, warm imports)")
    for col in ("task", "docs", "score rows", "seconds", "µs per doc", "per-doc ratio vs smallest"):
        table.add_column(col)
    with tempfile.TemporaryDirectory() as tmp:
        per_doc: dict[str, float] = {}
        for n in sizes:
            folder = synthetic_folder(n, Path(tmp))
            for run in find_task_runs(folder):
                n_scores, seconds = map_task(run)
                cost = seconds / n
                per_doc.setdefault(run.task, cost)
                table.add_row(run.task, str(n), str(n_scores), f"{seconds:.3f}", f"{cost * 1e6:.0f}", f"{cost / per_doc[run.task]:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
