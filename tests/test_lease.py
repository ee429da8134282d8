"""The generation lease per (fingerprint, model) (issue 16, item 12), on a local lake and on
an S3-compatible one (moto's server on 127.0.0.1): racing takers, dead and expired holders."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time

import pytest

from resources.lake.resource import LakeStore
from resources.lake.tables import to_arrow
from resources.lake.lease import LEASES, Lease

FP = "a" * 64


def _race_worker(root: str, options: dict, barrier, results) -> None:
    lease = Lease(LakeStore(root=root, storage_options=options), FP, "m", run_id="r")
    barrier.wait()
    results.put(lease.try_acquire())


def _race(root: str, options: dict, n: int = 3) -> int:
    from resources.lake.schemas import SCHEMAS
    from resources.lake.commit import ensure_table

    lake = LakeStore(root=root, storage_options=options)
    ensure_table(lake.uri(LEASES), SCHEMAS[LEASES], None, lake._options())
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(root, options, barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * n
    return sum(results.get() for _ in range(n))


@pytest.mark.slow
def test_racing_takers_exactly_one_wins_local(tmp_path):
    assert [_race(str(tmp_path / f"lake{i}"), {}) for i in range(3)] == [1, 1, 1]


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("moto")
    import boto3

    from support.services import free_port

    port = free_port()
    # moto one request at a time: its conditional put (If-None-Match: *) checks for the key, then
    # writes it, with no lock between; `moto_server` serves requests on threads, so two racing
    # PUTs of one Delta log entry could both pass the check (seen: [2, 1, 1] winners in CI), which
    # S3 itself never allows. Serialised, moto's put-if-absent is atomic as S3's is.
    serve = ("import sys; from werkzeug.serving import run_simple; "
             "from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app; "
             "from moto.server import MotoRequestHandler; "
             "run_simple('127.0.0.1', int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False, "
             "request_handler=MotoRequestHandler)")
    proc = subprocess.Popen([sys.executable, "-c", serve, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "lease-test", "AWS_SECRET_ACCESS_KEY": "lease-test-secret"}
    deadline = time.time() + 60
    while True:
        try:
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="lease-test",
                         aws_secret_access_key="lease-test-secret").create_bucket(Bucket="lease-lake")
            break
        except Exception:  # noqa: BLE001 - not listening yet
            assert time.time() < deadline, "moto_server did not start"
            time.sleep(0.3)
    yield options
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.slow
def test_racing_takers_exactly_one_wins_on_s3(s3):
    assert [_race(f"s3://lease-lake/lake{i}", s3) for i in range(3)] == [1, 1, 1]


def _put(lake: LakeStore, holder: str, pid: int, host: str, expires_in_s: float) -> None:
    from deltalake import write_deltalake

    from resources.lake.schemas import SCHEMAS
    from resources.lake.commit import ensure_table

    ensure_table(lake.uri(LEASES), SCHEMAS[LEASES], None, lake._options())
    now = dt.datetime.now(dt.timezone.utc)
    write_deltalake(lake.uri(LEASES), to_arrow(LEASES, [{"fingerprint": FP, "model": "m", "holder": holder, "host": host, "pid": pid,
                                                         "run_id": "other", "acquired_at": now,
                                                         "expires_at": now + dt.timedelta(seconds=expires_in_s)}]),
                    mode="overwrite", predicate=f"fingerprint = '{FP}' AND model = 'm'", storage_options=lake._options())


def test_live_holder_blocks_dead_or_expired_holder_is_taken_over(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    # a live holder (this test process) on this host: not free, and a bounded wait says so in one line
    _put(lake, "other", os.getpid(), socket.gethostname(), 60)
    lease = Lease(lake, FP, "m")
    assert not lease.try_acquire()
    from resources.lake.lease import LeaseTimeout

    with pytest.raises(LeaseTimeout, match="held by another live writer"):
        lease.acquire(wait_s=0.3, poll_s=0.1)
    # its process is gone (kill -9): taken over at once
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _put(lake, "other", dead.pid, socket.gethostname(), 60)
    assert lease.try_acquire() and lease.takeovers == 1
    # a holder on another host is trusted until its lease expires
    other = Lease(lake, FP, "m")
    _put(lake, "far", 1, "another-host", 60)
    assert not other.try_acquire()
    _put(lake, "far", 1, "another-host", -1)
    assert other.try_acquire()
    other.acquire(wait_s=1)
    other.release()
    rows = lake.read(LEASES)
    assert rows.height == 0  # released: the row is gone


def test_waiting_writer_gets_the_lease_when_the_holder_releases(tmp_path):
    import threading

    lake = LakeStore(root=str(tmp_path / "lake"))
    first = Lease(lake, FP, "m", run_id="first").acquire(wait_s=5)
    got = []

    def second() -> None:
        lease = Lease(lake, FP, "m", run_id="second").acquire(wait_s=30, poll_s=0.1)
        got.append(lease.waited_s)
        lease.release()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.8)
    assert not got  # still waiting while the first holds it
    first.release()
    thread.join(timeout=30)
    assert got and got[0] >= 0.7
