"""The lake store: Delta tables under one root, written partition by partition.

Why not dagster-deltalake's IO manager: with a model x fingerprint multi-partition whose
dimensions are dynamic it fails inside its table-slice code ("The instance is not
available to load partitions", ../shared/PITFALLS.md), and when building a predicate
fails it overwrites the whole table. This store writes with deltalake's predicate
overwrite (``mode="overwrite", predicate="model = '…' AND fingerprint = '…'"``), which
replaces exactly one partition, and validates every partition value first so a predicate
can never be malformed.

Every table has an Arrow schema contract (:data:`SCHEMAS`); a write whose columns differ
is refused (change a schema by explicit migration, never by silent merge).
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl
import pyarrow as pa

from resources.lake.schemas import ADDED_COLUMNS, PARTITION_COLUMNS, SCHEMAS
from resources.lake.wal import WAL_TABLES, settle

_SAFE_VALUE = re.compile(r"^[A-Za-z0-9._:\-@/+, ]{1,200}$")  # "," for lm-eval metric names (exact_match,strict-match)


from resources.lake.commit import LakeError


def predicate_for(where: Mapping[str, str | Sequence[str]]) -> str:
    """A delta-rs predicate ``col = 'v' AND col2 IN ('a', 'b')`` for ``where``.

    Values must be slugs, hex or metric names (``[A-Za-z0-9._:-@/+ ]``); anything else
    raises :class:`LakeError`, so a predicate can never be silently malformed (a
    malformed one would make an overwrite replace the whole table).
    """
    if not where:
        raise LakeError("refusing a predicate overwrite with no partition values (it would replace the whole table)")
    clauses = []
    for column, value in where.items():
        if not re.fullmatch(r"[a-z_]+", column):
            raise LakeError(f"bad column name in predicate: {column!r}")
        values = [value] if isinstance(value, str) else list(value)
        if not values:
            raise LakeError(f"empty value list for {column!r} in predicate")
        for v in values:
            if not isinstance(v, str) or not _SAFE_VALUE.match(v) or "'" in v:
                raise LakeError(
                    f"partition value {v!r} for {column!r} is not a slug/hex/metric name; "
                    "use letters, digits and . _ - : only"
                )
        if len(values) == 1:
            clauses.append(f"{column} = '{values[0]}'")
        else:
            clauses.append(f"{column} IN ({', '.join(repr(v) for v in values)})")
    return " AND ".join(clauses)


_POLARS_SCHEMAS: dict[str, Any] = {}
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


class PerCommitCache:
    """What was loaded from a table at one commit, keyed by :meth:`LakeTables.commit_stamp`
    (any hashable key works), at most ``size`` entries, the least recently used dropped
    first; safe to share between threads (a load runs outside the lock, so two threads may
    load the same key once each)."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._items: "OrderedDict[Any, Any]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_load(self, key: Any, load: Any) -> Any:
        """The value kept for ``key``, or ``load()`` kept and returned."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = load()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


_READ_CACHE = PerCommitCache(64)  # DeltaTable objects for reading, per table commit


def _local_root(delta: Any) -> tuple[str, str]:
    """(the table folder as deltalake writes it in file URIs, the folder on disk) of a local
    table: deltalake percent-encodes the folder's own name (``my lake`` -> ``my%20lake``)."""
    from urllib.parse import unquote

    uri = str(delta.table_uri)
    encoded = uri[len("file://"):] if uri.startswith("file://") else uri
    return encoded, unquote(encoded)


def local_table_files(delta: Any) -> list[str]:
    """Paths on disk of the current data files of a local ``deltalake.DeltaTable``.

    ``file_uris()`` percent-encodes the whole path, while on disk only the partition
    folders' names are encoded (Hive's escaping: ``model=a%3Ab``): so only the table
    folder's part is decoded. A lake under ``/tmp/my lake`` was unreadable without this."""
    encoded, real = _local_root(delta)
    files = []
    for uri in delta.file_uris():
        path = uri[len("file://"):] if uri.startswith("file://") else uri
        files.append(real + path[len(encoded):] if encoded != real and path.startswith(encoded) else path)
    return files


def _latest_commit(log: Path) -> tuple[int, int, int] | None:
    """(version, inode, mtime_ns) of the newest commit file (``NNN...N.json``, 20 digits) in a
    local ``_delta_log``; None when there is none (no table). Delta's own rule for the
    current version of a table on a file system: its newest commit in the log listing."""
    try:
        names = os.listdir(log)
    except (FileNotFoundError, NotADirectoryError):
        return None
    versions = [int(m.group(1)) for m in map(_COMMIT_FILE.match, names) if m]
    if not versions:
        return None
    newest = max(versions)
    try:
        st = os.stat(log / f"{newest:020d}.json")
    except FileNotFoundError:  # removed meanwhile (the table was deleted): look again
        return _latest_commit(log)
    return newest, st.st_ino, st.st_mtime_ns


def rows_to_arrow(table_name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Checked rows (dicts with every column of the table) as an Arrow table of the table's
    schema, converted by polars: ``pa.Table.from_pylist`` (any pyarrow conversion of Python
    values) imports pandas, 0.13 s of a CLI start (issue 14). Equal to ``from_pylist``'s
    table (tests/test_lake.py)."""
    schema = SCHEMAS[table_name]
    if table_name not in _POLARS_SCHEMAS:
        _POLARS_SCHEMAS[table_name] = pl.from_arrow(pa.Table.from_batches([], schema=schema)).schema  # type: ignore[union-attr]
    try:
        frame = pl.DataFrame(list(rows), schema=_POLARS_SCHEMAS[table_name])
    except Exception:  # values polars will not take as given (e.g. [1, 2.5] in a list<double>): pyarrow's own conversion
        return pa.Table.from_pylist(list(rows), schema=schema)
    return frame.to_arrow().select(schema.names).cast(schema)


def to_arrow(table_name: str, rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows cast to the table's schema contract; raises :class:`LakeError` on a column
    mismatch or a value whose type does not fit its column (resources/lake/types.py).
    Score rows without ``params`` get it from their signature (resources/lake/score_params.py)."""
    from resources.lake.types import check_rows, check_table
    from resources.lake.score_params import fill_params_arrow, fill_params_rows

    schema = SCHEMAS[table_name]
    if isinstance(rows, pl.DataFrame):
        data = rows.to_arrow()
    elif isinstance(rows, pa.Table):
        data = rows
    else:
        rows = fill_params_rows(list(rows)) if table_name == "scores" else list(rows)
        missing = [f.name for f in schema if rows and f.name not in rows[0]]
        extra = [k for k in (rows[0] if rows else {}) if k not in schema.names]
        if missing or extra:
            raise LakeError(f"rows for {table_name!r} do not match its schema: missing {missing}, unexpected {extra}")
        check_rows(table_name, schema, rows)
        return rows_to_arrow(table_name, rows)
    if table_name == "scores":
        data = fill_params_arrow(data)
    if set(data.column_names) != set(schema.names):
        raise LakeError(
            f"columns for {table_name!r} do not match its schema: got {sorted(data.column_names)}, "
            f"expected {sorted(schema.names)}"
        )
    check_table(table_name, schema, data)
    return data.select(schema.names).cast(schema)


class LakeTables:
    """Delta tables under ``root`` (a local folder by default; ``s3://``/``gs://``/``az://``
    with ``storage_options`` past one machine).

    ``root`` defaults to ``$FACETLAKE_LAKE`` or ``./lake``. Plain Python (no Dagster): the
    Dagster resource :class:`resources.lake.resource.LakeStore` adds the resource config on top of these methods.
    """

    root: str
    storage_options: dict[str, str]

    def __init__(self, root: str | None = None, storage_options: Mapping[str, str] | None = None) -> None:
        self.root = root or os.environ.get("FACETLAKE_LAKE", "lake")
        self.storage_options = dict(storage_options or {})

    # ----------------------------------------------------------------- paths
    def uri(self, table: str) -> str:
        """Location of ``table`` under the root."""
        if "://" in self.root:
            return f"{self.root.rstrip('/')}/{table}"
        return str(Path(self.root).expanduser().resolve() / table)

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def _local_log(self, table: str) -> Path | None:
        """The ``_delta_log`` folder of a table of a local lake (None for remote lakes)."""
        if "://" in self.root and not self.root.startswith("file://"):
            return None
        uri = self.uri(table)
        return Path(uri[len("file://"):] if uri.startswith("file://") else uri) / "_delta_log"

    def commit_stamp(self, table: str) -> tuple[str, int, int, int] | None:
        """An identity of ``table``'s current commit in a local lake: (uri, version, inode,
        mtime_ns) of its newest commit file, which changes with every commit and when the
        table is deleted and made again; None for a remote lake or a missing table. For
        caching what was read from the table (one ``listdir`` and one ``stat``)."""
        log = self._local_log(table)
        latest = _latest_commit(log) if log is not None else None
        return (self.uri(table), *latest) if latest is not None else None

    def exists(self, table: str) -> bool:
        """Whether ``table`` is a Delta table (it has a committed version)."""
        from deltalake import DeltaTable

        log = self._local_log(table)
        if log is not None:
            return _latest_commit(log) is not None
        return DeltaTable.is_deltatable(self.uri(table), storage_options=self._options())

    def tables(self) -> list[str]:
        """Names of the Delta tables present under the root (local roots are listed;
        remote roots are probed for the known table names)."""
        if "://" not in self.root:
            root = Path(self.root).expanduser()
            if not root.exists():
                return []
            return sorted(p.name for p in root.iterdir() if (p / "_delta_log").is_dir())
        return [t for t in SCHEMAS if self.exists(t)]

    def delta(self, table: str, version: int | None = None):
        """The ``deltalake.DeltaTable`` for ``table``; raises :class:`LakeError` if absent."""
        from deltalake import DeltaTable

        if not self.exists(table):
            raise LakeError(f"table {table!r} does not exist under {self.root}; run `facetlake demo` or `facetlake run CONFIG` first")
        return DeltaTable(self.uri(table), version=version, storage_options=self._options())

    def version(self, table: str) -> int | None:
        """Current Delta version of ``table`` (None when it does not exist). A local table's
        is the newest commit file in its log, without loading the table."""
        log = self._local_log(table)
        if log is not None:
            latest = _latest_commit(log)
            return latest[0] if latest is not None else None
        return self.delta(table).version() if self.exists(table) else None

    def _read_delta(self, table: str, version: int | None = None):
        """The ``DeltaTable`` of ``table`` for reading only (never write or merge through it):
        for a local table at its current version, one object per (table, commit) in this
        process, loaded once (tables are read many times between commits, ~1.3 ms a load)."""
        _settle(self, table, version)
        stamp = self.commit_stamp(table) if version is None else None  # a table deleted and made again is another one
        if stamp is None:
            return self.delta(table, version)
        from deltalake import DeltaTable

        return _READ_CACHE.get_or_load(stamp, lambda: DeltaTable(self.uri(table), version=stamp[1], storage_options=self._options()))

    # ----------------------------------------------------------------- writes
    def replace(
        self,
        table: str,
        rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]],
        where: Mapping[str, str | Sequence[str]],
    ) -> int:
        """Replace the rows matching ``where`` with ``rows`` in one Delta commit.

        Other partitions are untouched (A/B/A-safe); re-running with the same rows is
        idempotent. Every written row must satisfy ``where``. Returns the new version.
        """
        import pyarrow.compute as pc

        from resources.lake.commit import ensure_table, overwrite

        data = to_arrow(table, rows)
        predicate = predicate_for(where)
        for column, value in where.items():
            allowed = {value} if isinstance(value, str) else set(value)
            bad = set(pc.unique(data.column(column)).to_pylist()) - allowed  # distinct values, not one per row
            if bad:
                raise LakeError(f"rows for {table!r} fall outside the partition being written: {column} in {sorted(bad)[:5]}")
        ensure_table(self.uri(table), SCHEMAS[table], PARTITION_COLUMNS.get(table), self._options(),  # never a racing first append
                     added=ADDED_COLUMNS.get(table, ()))
        overwrite(self.uri(table), table, data, predicate, self._options())  # conflicts retried (resources/lake/commit.py)
        return self.version(table)  # type: ignore[return-value]

    def append(self, table: str, rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]], fresh_keys: bool = False) -> int:
        """Append the ``rows`` whose key (resources/lake/commit.py ``KEYS``; ``fresh_keys``: just
        generated) is not stored yet, retrying conflicts in a bound; returns the new version."""
        from resources.lake.commit import ensure_table, keyed_append, partition_filter

        data = to_arrow(table, rows)
        ensure_table(self.uri(table), SCHEMAS[table], PARTITION_COLUMNS.get(table), self._options(),
                     added=ADDED_COLUMNS.get(table, ()))
        keyed_append(self.uri(table), table, data, self._options(), fresh_keys=fresh_keys,
                     partition_filter=partition_filter(data, PARTITION_COLUMNS.get(table)))
        return self.version(table)  # type: ignore[return-value]

    # ----------------------------------------------------------------- reads
    def arrow_dataset(self, table: str, version: int | None = None) -> Any:
        """A ``pyarrow.dataset.Dataset`` over ``table`` (current or given ``version``).

        A local table is read through pyarrow's native filesystem, not deltalake's
        Python-implemented one: Arrow IO threads still pre-buffering row groups that a
        filter skipped would otherwise call into Python while the interpreter exits, and
        the process aborts (SIGABRT) or hangs after printing its result (issue 16)."""
        import pyarrow.fs as pa_fs

        _settle(self, table, version)
        delta = self.delta(table, version)
        uri = self.uri(table)
        if "://" not in uri or uri.startswith("file://"):
            filesystem, path = (pa_fs.LocalFileSystem(), uri) if "://" not in uri else pa_fs.FileSystem.from_uri(uri)
            # deltalake names each data file relative to the table root, percent-decoded
            return delta.to_pyarrow_dataset(filesystem=pa_fs.SubTreeFileSystem(path, filesystem))
        return delta.to_pyarrow_dataset()

    def native_scan(self, table: str, version: int | None = None, delta: Any = None) -> pl.LazyFrame | None:
        """A polars scan of ``table``'s Parquet files at its current (or given) version when
        polars can read it natively: a local table whose protocol needs no reader feature
        (reader version 1; deletion vectors and column mapping need more). None for remote
        lakes and such tables (read them through :meth:`arrow_dataset`).

        Why: polars plans with the files' statistics, reads Arrow ``string`` and
        ``string_view`` files alike, and needs neither ``pyarrow.dataset`` nor the pandas
        it imports (0.25 s of every CLI start, issue 14). ``delta``: the ``DeltaTable`` already
        loaded, to read exactly its version."""
        uri = self.uri(table)
        if "://" in uri and not uri.startswith("file://"):
            return None
        delta = delta if delta is not None else self._read_delta(table, version)
        if int(delta.protocol().min_reader_version) > 1:
            return None
        root = _local_root(delta)
        if root[0] != root[1]:  # a folder name deltalake percent-encodes (a space, é, #): polars would not find the files
            return None
        return pl.scan_delta(delta)

    def read(
        self,
        table: str,
        where: Mapping[str, str | Sequence[str]] | None = None,
        columns: Iterable[str] | None = None,
        version: int | None = None,
    ) -> pl.DataFrame:
        """Rows of ``table`` matching ``where`` (equality / membership), as polars.

        A missing table reads as an empty frame with the table's schema. ``scores`` reads
        with ``params`` filled from the signature where a row (or an older table) has
        none (resources/lake/score_params.py). Local tables are read by polars
        (:meth:`native_scan`), others through the Arrow dataset; both give the same frame.
        """
        _settle(self, table, version)
        if not self.exists(table):
            # (from_batches: Schema.empty_table() imports pandas)
            frame = pl.from_arrow(pa.Table.from_batches([], schema=SCHEMAS[table] if table in SCHEMAS else pa.schema([])))
            return frame.select(list(columns)) if columns else frame  # type: ignore[union-attr]
        wanted = list(columns) if columns else None
        fill = table == "scores" and (wanted is None or "params" in wanted)
        scan = self.native_scan(table, version)
        if scan is not None:
            stored = set(scan.collect_schema().names())
            for column, value in (where or {}).items():
                scan = scan.filter(pl.col(column).is_in([value] if isinstance(value, str) else list(value)))
            if fill and wanted is not None:  # params needs the signature; an older table has no params column
                frame = scan.select([c for c in dict.fromkeys([*wanted, "signature"]) if c in stored]).collect()
            else:
                frame = (scan.select(wanted) if wanted is not None else scan).collect()
            return self._filled(table, frame, wanted) if fill else frame
        return self._read_arrow(table, where, wanted, version, fill)

    @staticmethod
    def _filled(table: str, frame: pl.DataFrame, wanted: list[str] | None) -> pl.DataFrame:
        from resources.lake.score_params import fill_params

        frame = fill_params(frame)  # type: ignore[arg-type]
        return frame.select(wanted) if wanted is not None else frame.select([c for c in SCHEMAS[table].names if c in frame.columns])

    def _read_arrow(
        self, table: str, where: Mapping[str, str | Sequence[str]] | None, wanted: list[str] | None, version: int | None, fill: bool,
    ) -> pl.DataFrame:
        """:meth:`read` through the Arrow dataset (remote lakes, tables with reader features)."""
        import pyarrow.dataset as ds

        dataset = self.arrow_dataset(table, version)
        expr = None
        partitioned = set(PARTITION_COLUMNS.get(table) or ())
        for column, value in (where or {}).items():
            values = [value] if isinstance(value, str) else list(value)
            field = ds.field(column)
            if column not in partitioned and column in dataset.schema.names:
                # files of older versions store text as string, newer ones as string_view: a filter
                # on the raw column fails on such a mix ("no kernel matching (string, string_view)")
                field = field.cast(dataset.schema.field(column).type)
            term = field.isin(values)
            expr = term if expr is None else expr & term
        stored = set(dataset.schema.names)
        if fill and wanted is not None:  # params needs the signature; an older table has no params column
            read = [c for c in dict.fromkeys([*wanted, "signature"]) if c in stored]
            result = dataset.to_table(filter=expr, columns=read)
        else:
            result = dataset.to_table(filter=expr, columns=wanted)
        frame = pl.from_arrow(result)
        return self._filled(table, frame, wanted) if fill else frame  # type: ignore[arg-type]


def _settle(lake: Any, table: str, version: int | None) -> None:
    """Before the current version of ``table`` is read: rows still in write-ahead files (this
    process's live writers, dead writers' files) are folded in first (resources/lake/wal.py;
    the outbound ledger's intents); any other table costs one set lookup."""
    if version is None and table in WAL_TABLES:
        settle(lake, table)
