"""Dagster's PostgreSQL storage, safe when many processes meet an empty database at once.

Every process of the shared-infrastructure profile (``deploy/dagster.yaml``: the daemon,
each Celery worker, the webserver, every ``facetlake`` command and every run worker) opens
the Dagster instance, and the stock :class:`dagster_postgres.DagsterPostgresStorage`
creates its schema on first use: it lists the tables, and where the main table of a
storage is missing it creates that storage's tables and types, stamps Alembic's revision
and runs the data migrations. The engine is in autocommit mode, so each ``CREATE`` is
visible on its own, and two processes that start together on an empty database (the
normal first start of a deployment) each see a part of the other's schema. The stock
code retries only a duplicate *table* inside the creation of the main tables; a process
that sees ``runs`` but not yet ``instance_info`` creates that table unguarded, and a
duplicate *type* (``snapshots``) is not retried at all, so one of the processes fails:

    ProgrammingError: (psycopg2.errors.DuplicateTable) relation "instance_info" already exists
    ProgrammingError: (psycopg2.errors.DuplicateObject) type "snapshots" already exists

(seen in CI: ``facetlake run --submit`` failed while the daemon and two workers started.)

:class:`SchemaLockedPostgresStorage` is the stock storage with its construction, which is
where all of that happens, serialised across processes by a PostgreSQL transaction-level
advisory lock (``pg_advisory_xact_lock``) on the instance's own database: the first
process creates the whole schema while the others wait, and they then find it complete.
The lock is released when the construction ends, on any error, and by the server when a
process dies holding it; it needs no table of its own and works behind a transaction-mode
connection pooler. Everything else (tables, queries, the UI) is the stock storage's.
A storage configured with ``should_autocreate_tables: false`` creates nothing and takes
no lock.

Use it in ``dagster.yaml``::

    storage:
      custom:
        module: pipelines.runs.pg_storage
        class: SchemaLockedPostgresStorage
        config:
          postgres_url: {env: FACETLAKE_PG_URL}

It accepts the same configuration as ``storage: postgres`` (``postgres_url`` or
``postgres_db``, ``should_autocreate_tables``, ``auth_provider``).
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Iterator

import sqlalchemy
from dagster._serdes import ConfigurableClassData
from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import (
    create_pg_engine,
    get_token_provider_from_config,
    pg_url_from_config,
    retry_pg_connection_fn,
)
from sqlalchemy.pool import NullPool

if TYPE_CHECKING:
    from dagster_postgres.auth import PgTokenProvider

# the advisory-lock key (a signed 64-bit integer) every facetlake process takes while it
# opens the storage; advisory locks are scoped to one database, so deployments sharing a
# PostgreSQL server do not wait on each other
SCHEMA_LOCK_KEY = int.from_bytes(hashlib.sha256(b"facetlake/dagster-schema").digest()[:8], "big", signed=True)


@contextlib.contextmanager
def schema_lock(postgres_url: str, token_provider: "PgTokenProvider | None" = None) -> Iterator[None]:
    """Hold the database's schema lock (:data:`SCHEMA_LOCK_KEY`) for the ``with`` block.

    Opens one connection of its own (connection failures retried as dagster-postgres
    retries them), starts a transaction and waits in ``pg_advisory_xact_lock`` until no
    other process holds the lock; the lock ends with the transaction when the block exits,
    whether it returns or raises, or with the session if the process dies.

    Raises:
        sqlalchemy.exc.OperationalError: the database cannot be reached after the retries.
    """
    engine = create_pg_engine(postgres_url, token_provider, poolclass=NullPool)
    try:
        conn = retry_pg_connection_fn(engine.connect)
        try:
            with conn.begin():
                conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                yield
        finally:
            conn.close()
    finally:
        engine.dispose()


class SchemaLockedPostgresStorage(DagsterPostgresStorage):
    """:class:`dagster_postgres.DagsterPostgresStorage` whose schema creation is serialised
    across processes (module docstring): configured as ``storage: custom`` in
    ``dagster.yaml`` with the configuration of ``storage: postgres``.

    Raises what the stock storage raises (an unreachable database after its retries, a
    schema of a newer Dagster), never a duplicate table or type of a concurrent start.
    """

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: ConfigurableClassData | None = None,
        token_provider: "PgTokenProvider | None" = None,
    ):
        lock = schema_lock(postgres_url, token_provider) if should_autocreate_tables else contextlib.nullcontext()
        with lock:
            super().__init__(postgres_url, should_autocreate_tables, inst_data=inst_data, token_provider=token_provider)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "SchemaLockedPostgresStorage":  # noqa: D102 - the stock storage's
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )
