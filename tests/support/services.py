"""Shared infrastructure for the deploy-profile tests: a PostgreSQL database of its own, a
RabbitMQ virtual host of its own, moto's S3 server on 127.0.0.1, two Celery workers and a
Dagster daemon, all real processes. Skips (with the reason) where a service or package is
absent.

PostgreSQL (127.0.0.1:5432, trust auth) and RabbitMQ (127.0.0.1:5672, guest/guest) are
started by the machine before each session; moto's server, the workers and the daemon are
started here and stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG = ("127.0.0.1", 5432)
AMQP = ("127.0.0.1", 5672)


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_services() -> None:
    """Skip the calling test with a clear reason unless every service and package is here."""
    missing = []
    if not _port_open(*PG):
        missing.append("PostgreSQL on 127.0.0.1:5432")
    if not _port_open(*AMQP):
        missing.append("RabbitMQ on 127.0.0.1:5672")
    for module in ("dagster_postgres", "dagster_celery", "moto", "boto3", "psycopg2"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"python package {module} (pip install -e '.[test]')")
    if not shutil.which("rabbitmqctl"):
        missing.append("rabbitmqctl (to make a RabbitMQ virtual host for the test)")
    if missing:
        pytest.skip("deploy-profile test needs " + "; ".join(missing))


@dataclass
class Infra:
    """Environment and processes of one shared-infrastructure deployment."""

    env: dict[str, str]
    home: Path
    bucket: str
    lake_uri: str
    s3_endpoint: str
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: Path | None = None

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        return proc

    def start_worker(self, name: str) -> subprocess.Popen:
        return self.start(name, [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                                 "-y", str(PROJECT_ROOT / "deploy" / "celery.yaml"), "--name", name])

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.processes.pop(name, None)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def log_tail(self, name: str, n: int = 3000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def cli(self, *args: str, timeout: int = 900, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``facetlake ARGS`` as a user would, in this deployment's environment."""
        return subprocess.run([str(BIN / "facetlake"), *args], cwd=PROJECT_ROOT, env={**self.env, **(extra_env or {})},
                              capture_output=True, text=True, timeout=timeout)


def pg_connect(dbname: str = "postgres"):
    """An autocommit psycopg2 connection to ``dbname`` on the test PostgreSQL, as ``postgres``."""
    import psycopg2

    conn = psycopg2.connect(host=PG[0], port=PG[1], user="postgres", dbname=dbname)
    conn.autocommit = True
    return conn


@contextlib.contextmanager
def pg_database(prefix: str = "facetlake") -> Iterator[str]:
    """A new, empty PostgreSQL database named ``PREFIX_<random>`` (dropped, with its
    connections, at the end); yields its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = pg_connect()
    try:
        admin.cursor().execute(f"CREATE DATABASE {name}")
        yield name
    finally:
        with contextlib.suppress(Exception):
            admin.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


@contextlib.contextmanager
def deployment(tmp: Path, workers: int = 2, daemon: bool = True, extra_env: dict[str, str] | None = None) -> Iterator[Infra]:
    """PostgreSQL database + RabbitMQ vhost + moto S3 + ``workers`` Celery workers + a daemon;
    ``extra_env`` is set for every process (e.g. an API key the workers need)."""
    import boto3

    require_services()
    tag = uuid.uuid4().hex[:10]
    vhost, bucket = f"facetlake-{tag}", f"lake-{tag}"
    cleanup = contextlib.ExitStack()
    database = cleanup.enter_context(pg_database())
    subprocess.run(["rabbitmqctl", "add_vhost", vhost], check=True, capture_output=True)
    subprocess.run(["rabbitmqctl", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"], check=True, capture_output=True)
    home = tmp / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    logs = tmp / "logs"
    logs.mkdir()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "FACETLAKE_PG_URL": f"postgresql+psycopg2://postgres@{PG[0]}:{PG[1]}/{database}",
        "FACETLAKE_EXECUTOR": "celery",
        "FACETLAKE_CELERY_BROKER": f"pyamqp://guest:guest@{AMQP[0]}:{AMQP[1]}/{vhost}",
        "FACETLAKE_CELERY_BACKEND": "rpc://",
        "FACETLAKE_LAKE": f"s3://{bucket}/lake",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "facetlake-test",
        "AWS_SECRET_ACCESS_KEY": "facetlake-test-secret",
        "FACETLAKE_INBOX": str(tmp / "inbox"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **(extra_env or {}),
    }
    infra = Infra(env=env, home=home, bucket=bucket, lake_uri=env["FACETLAKE_LAKE"], s3_endpoint=endpoint, logs=logs)
    try:
        infra.start("moto", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)])
        deadline = time.time() + 60
        while not _port_open("127.0.0.1", port):
            if time.time() > deadline:
                raise RuntimeError("moto_server did not start: " + infra.log_tail("moto"))
            time.sleep(0.3)
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="facetlake-test",
                     aws_secret_access_key="facetlake-test-secret").create_bucket(Bucket=bucket)
        for i in range(workers):
            infra.start_worker(f"worker-{i + 1}")
        if daemon:
            infra.start("daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(PROJECT_ROOT / "workspace.yaml")])
        yield infra
    finally:
        for name in list(infra.processes):
            infra.stop(name)
        subprocess.run(["rabbitmqctl", "delete_vhost", vhost], capture_output=True)
        cleanup.close()


def lake_env(infra: Infra) -> dict[str, str]:
    """The storage variables a LakeStore in this (test) process needs to read the S3 lake."""
    return {k: infra.env[k] for k in ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
