"""The deploy profile's Dagster storage on a real, empty PostgreSQL database: processes that
open the instance together never fail on each other's half-made schema
(pipelines/runs/pg_storage.py; CI failed with 'relation "instance_info" already exists' when
`facetlake run --submit`, the daemon and two Celery workers started together).

The race is made certain rather than left to timing: this test holds the schema lock, so
every process must stop at it before touching the database (none may create anything
while it is held), and all of them are released at once. Without the lock the processes
create the schema unguarded and never wait, which fails the first assertion.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from tests.support.services import PG, PROJECT_ROOT, _port_open, pg_connect, pg_database

pytestmark = pytest.mark.xdist_group("services")
PROCESSES = 6
OPEN_INSTANCE = (
    "import sys, dagster as dg\n"
    "instance = dg.DagsterInstance.from_config(sys.argv[1])\n"
    "instance.get_runs(limit=1)\n"
    "print(instance.get_ref().storage_data.class_name, type(instance.run_storage).__name__)\n"
)


@pytest.fixture
def empty_database(tmp_path):
    """A new PostgreSQL database and a Dagster home holding deploy/dagster.yaml for it."""
    if not _port_open(*PG):
        pytest.skip("needs PostgreSQL on 127.0.0.1:5432")
    pytest.importorskip("psycopg2")
    pytest.importorskip("dagster_postgres", reason="pip install -e '.[deploy]'")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    with pg_database("facetlake_schema") as name:
        yield name, f"postgresql+psycopg2://postgres@{PG[0]}:{PG[1]}/{name}", home


def _tables(conn) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("select tablename from pg_tables where schemaname = 'public'")
        return {row[0] for row in cur.fetchall()}


def _waiting_on_schema_lock(conn) -> int:
    from pipelines.runs.pg_storage import SCHEMA_LOCK_KEY

    key = SCHEMA_LOCK_KEY & 0xFFFFFFFFFFFFFFFF
    with conn.cursor() as cur:
        # a bigint advisory key is stored as classid (high 32 bits) and objid (low 32 bits)
        cur.execute("select count(*) from pg_locks where locktype = 'advisory' and not granted"
                    " and database = (select oid from pg_database where datname = current_database())"
                    " and classid::bigint = %s and objid::bigint = %s",
                    (key >> 32, key & 0xFFFFFFFF))
        return cur.fetchone()[0]


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_processes_opening_an_empty_database_together_all_succeed_and_build_one_schema(empty_database):
    from pipelines.runs.pg_storage import SCHEMA_LOCK_KEY

    name, url, home = empty_database
    env = {**os.environ, "DAGSTER_HOME": str(home), "FACETLAKE_PG_URL": url}
    holder, observer = pg_connect(name), pg_connect(name)
    with holder.cursor() as cur:
        cur.execute("select pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_INSTANCE, str(home)], cwd=PROJECT_ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    try:
        deadline = time.monotonic() + 240
        while (waiting := _waiting_on_schema_lock(observer)) < PROCESSES:
            finished = [p for p in procs if p.poll() is not None]
            assert not finished and time.monotonic() < deadline, (
                f"{waiting} of {PROCESSES} processes waited on the schema lock; "
                f"{len(finished)} went on without it, tables made meanwhile: {sorted(_tables(observer))}")
            time.sleep(0.2)
        assert _tables(observer) == set(), "a process created tables while another held the schema lock"
    finally:
        with holder.cursor() as cur:  # all of them go at once
            cur.execute("select pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
        holder.close()
    results = [p.communicate(timeout=300) for p in procs]
    failures = [err[-2000:] for p, (_, err) in zip(procs, results) if p.returncode]
    assert not failures, failures
    assert {out.strip() for out, _ in results} == {"SchemaLockedPostgresStorage PostgresRunStorage"}
    tables = _tables(observer)
    # one complete schema: each of the three storages' main tables, and Alembic's stamp
    assert {"runs", "instance_info", "event_logs", "asset_keys", "jobs", "alembic_version"} <= tables
    with observer.cursor() as cur:
        cur.execute("select count(*) from alembic_version")
        assert cur.fetchone()[0] == 1
    observer.close()


def test_the_lock_is_taken_only_to_create_and_freed_on_error(empty_database):
    """`should_autocreate_tables: false` opens without waiting for a holder of the lock; a
    construction that raises releases the lock (the next one gets it at once)."""
    from pipelines.runs.pg_storage import SCHEMA_LOCK_KEY, SchemaLockedPostgresStorage, schema_lock

    name, url, _ = empty_database
    SchemaLockedPostgresStorage(url)  # the schema, made once (NullPool: no connection kept)
    holder = pg_connect(name)
    with holder.cursor() as cur:
        cur.execute("select pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
    opened = threading.Event()
    thread = threading.Thread(target=lambda: (SchemaLockedPostgresStorage(url, should_autocreate_tables=False),
                                              opened.set()), daemon=True)
    thread.start()
    assert opened.wait(60), "a storage that creates nothing waited on the schema lock"
    holder.close()  # the lock ends with the holder's session

    with pytest.raises(RuntimeError, match="boom"), schema_lock(url):
        raise RuntimeError("boom")
    probe = pg_connect(name)
    with probe.cursor() as cur:
        cur.execute("select pg_try_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        assert cur.fetchone()[0] is True, "the lock was still held after the block raised"
    probe.close()
