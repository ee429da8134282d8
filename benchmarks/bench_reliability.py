"""What the crash and concurrency guarantees cost (issue 16).

Prints a table of the cost per call / per commit on a local lake:

- outbound ledger: the old buffered ledger (one plain append per 32 calls, rows lost on a
  crash) against durable intents (one group commit before each call is sent, completions
  merged per 32), called from 1 thread and from 8 threads (a concurrent API backend);
- appends: a plain Delta append against the keyed MERGE every append now is;
- the generation lease: take + release;
- the secret check every stored spec passes (issue 26): the detector over a shipped spec,
  and a spec refused for a key under an innocuous name (its cost is paid once per
  registration, beside a Delta commit);
- the input bounds (issue 26, fault 4): the regular-file check every input passes, a read of
  a 1 MiB JSON Lines file through the bounded reader, and the refusals of a FIFO, a symlink to
  ``/dev/zero`` and a YAML alias bomb (each refused at once, nothing read);
- anonymisation (issue 26, fault 3): the ``ner`` strategy (the strongest installed) over a
  text with people, places and organisations, some repeated, per text.

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


def input_checks(calls: int, case: str) -> int:
    """The input bounds ``calls`` times: ``regular`` (the check), ``read`` (a 1 MiB JSON Lines
    file read through the bounded reader), ``fifo`` / ``dev_zero`` (refused) or
    ``yaml_bomb`` (an alias bomb under ``runtime:``, refused)."""
    import os

    from resources.datasets.files import DatasetError, check_input_file, load_yaml, read_input_bytes

    folder = Path(tempfile.mkdtemp(prefix="bench_inputs_"))
    try:
        data = folder / "data.jsonl"
        data.write_text("".join(f'{{"id": "{i}", "input": "{"x" * 100}"}}\n' for i in range(9000)), encoding="utf-8")
        fifo, zero = folder / "fifo.jsonl", folder / "zero.jsonl"
        os.mkfifo(fifo)
        zero.symlink_to("/dev/zero")
        bomb = "runtime:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"  {chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
        for _ in range(calls):
            if case == "regular":
                check_input_file(data)
            elif case == "read":
                assert len(read_input_bytes(data)) > 2**20
            else:
                target = {"fifo": fifo, "dev_zero": zero}.get(case)
                try:
                    check_input_file(target) if target else load_yaml(bomb, "bomb.yaml")
                except DatasetError:
                    continue
                raise AssertionError(f"{case} was not refused")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


PII_TEXT = ("Dr. Ingrid Halvorsen met Tomasz Wierzbicki at the Kestrelmoor Cooperative Bank in Ostrava. "
            "Halvorsen later wrote to Wierzbicki from 14 Rue des Tanneurs, Valbonne-sur-Lys; Amara Okonkwo-Diallo "
            "of Brightwater Analytics GmbH joined them, and Ingrid Halvorsen said Kestrelmoor Cooperative Bank would pay.")


def anonymisations(calls: int) -> int:
    """The strongest installed strategy (``ner`` with the ``privacy`` extra) over :data:`PII_TEXT` ``calls`` times."""
    from resources.privacy.anonymise import build_anonymiser, strongest_strategy

    strategy, _ = strongest_strategy()
    anonymiser = build_anonymiser([strategy])
    anonymiser.anonymise(PII_TEXT)  # the model loads once, outside the timing of a text
    for _ in range(calls):
        out = anonymiser.anonymise(PII_TEXT)
        assert "Halvorsen" not in out.text, out.text
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
        ("input: regular-file check (passes)", "file", lambda lake: input_checks(n * 16, "regular"), n * 16),
        ("input: 1 MiB JSON Lines read, bounded", "file", lambda lake: input_checks(n, "read"), n),
        ("input: a FIFO (refused, nothing read)", "file", lambda lake: input_checks(n * 16, "fifo"), n * 16),
        ("input: a symlink to /dev/zero (refused)", "file", lambda lake: input_checks(n * 16, "dev_zero"), n * 16),
        ("input: a YAML alias bomb under runtime: (refused)", "spec", lambda lake: input_checks(n, "yaml_bomb"), n),
        ("anonymise: strongest strategy, one planted text", "text", lambda lake: anonymisations(n), n),
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
