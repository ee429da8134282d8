"""What the crash and concurrency guarantees cost (issue 16).

Prints a table of the cost per call / per commit on a local lake:

- outbound ledger: the old buffered ledger (one plain append per 32 calls, rows lost on a
  crash) against durable intents (one group commit before each call is sent, completions
  merged per 32), called from 1 thread and from 8 threads (a concurrent API backend);
- appends: a plain Delta append against the keyed MERGE every append now is;
- the generation lease: take + release;
- the secret check every stored spec passes (issue 26): the detector over a shipped spec,
  and a spec refused for a key under an innocuous name (its cost is paid once per
  registration, beside a Delta commit).

    python benchmarks/bench_reliability.py [--calls 64]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from resources.lake.resource import LakeStore  # noqa: E402
from resources.lake.tables import to_arrow  # noqa: E402
from resources.lake.lease import Lease  # noqa: E402
from resources.privacy.ledger import DurableLedger  # noqa: E402

CALL = {"host": "127.0.0.1", "model": "m", "purpose": "generation", "text_sha256": "0" * 64, "n_chars": 10, "entity_counts": {}}


def buffered(lake: LakeStore, calls: int, threads: int) -> int:
    """The pre-issue-16 ledger: rows buffered, one plain append per 32 (returns commits)."""
    from deltalake import write_deltalake

    ledger = DurableLedger(lake, "r", "f", "m")
    rows, commits = [], 0
    for i in range(calls):
        rows.append(ledger.row({**CALL, "called_at": dt.datetime.now(dt.timezone.utc)}))
        if len(rows) == 32 or i == calls - 1:
            data = to_arrow("outbound_ledger", rows)
            if lake.exists("outbound_ledger"):
                write_deltalake(lake.uri("outbound_ledger"), data, mode="append")
            else:
                lake.append("outbound_ledger", rows)
            rows, commits = [], commits + 1
    return commits


def durable(lake: LakeStore, calls: int, threads: int) -> int:
    ledger = DurableLedger(lake, "r", "f", "m")

    def one(_: int) -> None:
        call_id = ledger({**CALL, "called_at": dt.datetime.now(dt.timezone.utc)})
        time.sleep(0.002)  # the request itself (a local server's round trip)
        ledger.complete(call_id)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(calls)))
    ledger.flush()
    assert lake.read("outbound_ledger").height == calls
    return ledger.commits


def appends(lake: LakeStore, calls: int, keyed: bool) -> int:
    from deltalake import write_deltalake

    now = dt.datetime.now(dt.timezone.utc)
    lake.append("runs", [{"run_id": "seed", "asset": "a", "model": None, "fingerprint": "f", "dataset": "d", "table_name": "t",
                          "table_version": 0, "rows": 0, "started_at": now, "finished_at": now, "mode": "online", "provenance": "{}"}])
    for i in range(calls):
        row = [{"run_id": f"r{i}", "asset": "a", "model": None, "fingerprint": "f", "dataset": "d", "table_name": "t",
                "table_version": 0, "rows": 0, "started_at": now, "finished_at": now, "mode": "online", "provenance": "{}"}]
        if keyed:
            lake.append("runs", row)
        else:
            write_deltalake(lake.uri("runs"), to_arrow("runs", row), mode="append")
    return calls


def leases(lake: LakeStore, calls: int) -> int:
    for _ in range(calls):
        Lease(lake, "a" * 64, "m").acquire(wait_s=5).release()
    return calls


def secret_scans(calls: int, refused: bool) -> int:
    """Run the secret detector over every shipped spec (or one holding a key) ``calls`` times."""
    import yaml

    from metric_ops.secrets import find_secrets

    specs = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "pipelines" / "configs").glob("*.yaml"))]
    if refused:
        specs = [{**specs[0], "runtime": {"note": "sk-proj-" + "Q7x" * 16, "extra_headers": {"Authorization": "Bearer abc123" * 4}}}]
    for i in range(calls):
        findings = find_secrets(specs[i % len(specs)])
        assert bool(findings) == refused, findings
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=64)
    args = parser.parse_args()
    n = args.calls
    cases = [
        ("ledger: buffered (old, loses rows on a crash)", "call", lambda lake: buffered(lake, n, 1), n),
        ("ledger: durable intents, 1 thread", "call", lambda lake: durable(lake, n, 1), n),
        ("ledger: durable intents, 8 threads (group commit)", "call", lambda lake: durable(lake, n, 8), n),
        ("append: plain Delta append", "append", lambda lake: appends(lake, n // 4, False), n // 4),
        ("append: keyed MERGE (idempotent)", "append", lambda lake: appends(lake, n // 4, True), n // 4),
        ("lease: take + release", "lease", lambda lake: leases(lake, n // 8), n // 8),
        ("secret check: a shipped spec (passes)", "spec", lambda lake: secret_scans(n * 16, False), n * 16),
        ("secret check: a spec holding a key (refused)", "spec", lambda lake: secret_scans(n * 16, True), n * 16),
    ]
    print(f"{'case':52} {'unit':>7} {'units':>6} {'commits':>8} {'total s':>8} {'ms/unit':>8}")
    for label, unit, fn, units in cases:
        folder = Path(tempfile.mkdtemp(prefix="bench_rel_"))
        try:
            lake = LakeStore(root=str(folder / "lake"))
            t0 = time.perf_counter()
            commits = fn(lake)
            wall = time.perf_counter() - t0
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"{label:52} {unit:>7} {units:>6} {commits:>8} {wall:>8.2f} {1000 * wall / units:>8.3f}")


if __name__ == "__main__":
    main()
