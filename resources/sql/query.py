"""Read-only SQL over the lake with DuckDB, in process, with bounded cost.

Every Delta table under the lake root is registered as a view of the same name, without
DuckDB's ``delta`` extension (downloaded at first use): a local table as a view over the
Parquet files of its current version read by DuckDB itself (:mod:`resources.sql.views`;
only those files become readable), a remote one from an Arrow dataset over the table
(:meth:`resources.lake.tables.LakeTables.arrow_dataset`; projections and filters push down). Raw-text tables (:data:`RAW_TABLES`, e.g. ``samples_raw``,
kept only when an evaluation's spec asks for it) are registered only on request.

The connection is hardened after registration (../shared/PITFALLS.md, "DuckDB as a query
service"):

- extension auto-install/auto-load off, ``enable_external_access = false`` (no
  ``read_csv``/``read_text``/``COPY`` on local files, no network), then
  ``lock_configuration = true`` so no statement can turn any of it back on;
- ``memory_limit``, ``threads`` and a private ``temp_directory`` for spilling (never the
  working directory's ``.tmp``); a time limit enforced by ``connection.interrupt()`` from a
  timer; the result handed back to Python is bounded by the same memory limit
  (:class:`SQLLimits`, from flags or ``FACETLAKE_SQL_*`` variables);
- only statements known to be read-only run (:func:`check_read_only`): ``SELECT`` (also
  ``FROM``-first, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``PIVOT``/``UNPIVOT``), and
  ``EXPLAIN`` of one of those. ``EXPLAIN ANALYZE`` executes its statement, so the
  explained statement is checked too; any statement type DuckDB adds later is refused.
"""

import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from metric_ops.errors import FacetlakeError
from resources.lake.tables import LakeTables
from resources.sql.results import batches_of, intervals_as_text
from resources.sql.views import create_view, native_delta

# tables holding raw (not anonymised) sample text: registered only with include_raw
RAW_TABLES = frozenset({"samples_raw"})
# statement types that only read; MULTI is DuckDB's expansion of a PIVOT without an IN
# list (a query over the distinct values, then the pivot), checked by its leading verb
_READ_ONLY_TYPES = {"SELECT"}
# keywords a read-only statement may start with (after comments and parentheses)
_READ_ONLY_VERBS = {"SELECT", "FROM", "PIVOT", "UNPIVOT", "VALUES", "TABLE", "DESCRIBE", "SHOW", "SUMMARIZE"}
# leading whitespace and SQL comments, then the statement's first keyword
_FIRST_KEYWORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*([A-Za-z]+)", re.S)
_EXPLAIN_PREFIX = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*EXPLAIN\b(\s+ANALY[SZ]E\b)?", re.S | re.I)

MEMORY_ENV = "FACETLAKE_SQL_MEMORY_LIMIT"
THREADS_ENV = "FACETLAKE_SQL_THREADS"
TIMEOUT_ENV = "FACETLAKE_SQL_TIMEOUT_S"


class SQLRefusedError(FacetlakeError, ValueError):
    """The statement would write or is not a query."""


class SQLLimitError(FacetlakeError, RuntimeError):
    """A query ran past its time limit or memory limit; the message names the setting to raise."""


def _total_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _default_memory_limit() -> str:
    """A quarter of physical memory, at most 4 GiB (DuckDB's own default is 80%)."""
    total = _total_memory_bytes()
    if not total:
        return "2GB"
    mib = max(256, min(4096, total // 4 // (1 << 20)))
    return f"{mib}MiB"


def _default_threads() -> int:
    """Half the CPU cores this process may use, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 2
    return max(1, cores // 2)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB|GB|GIB|TB|TIB)?\s*$", re.I)
_UNITS = {"B": 1, "KB": 10**3, "KIB": 2**10, "MB": 10**6, "MIB": 2**20, "GB": 10**9, "GIB": 2**30, "TB": 10**12, "TIB": 2**40}


def parse_size(text: str, where: str = "memory limit") -> int:
    """Bytes in a size such as ``2GB``, ``512MiB`` or ``1000000`` (bytes); raises
    :class:`ValueError` naming ``where`` for anything else."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{where}: {text!r} is not a size; write e.g. 2GB, 512MiB or 4GiB")
    value = float(match.group(1)) * _UNITS[(match.group(2) or "B").upper()]
    if value < 16 * 2**20:
        raise ValueError(f"{where}: {text!r} is below 16MiB; DuckDB needs more to run a query")
    return int(value)


@dataclass(frozen=True)
class SQLLimits:
    """Resource bounds of one ``facetlake sql`` connection.

    ``memory_limit``: DuckDB size text (``2GB``, ``512MiB``), for DuckDB's buffer manager
    and, separately, the result brought back to Python; default a quarter of physical
    memory, at most 4 GiB. ``threads``: DuckDB worker threads (default half the cores).
    ``timeout_s``: seconds before the query is interrupted (default 120; 0 = none).
    """

    memory_limit: str
    threads: int
    timeout_s: float

    @classmethod
    def resolve(cls, memory_limit: str | None = None, threads: int | None = None, timeout_s: float | None = None) -> "SQLLimits":
        """Explicit values first, then ``FACETLAKE_SQL_MEMORY_LIMIT`` / ``FACETLAKE_SQL_THREADS`` /
        ``FACETLAKE_SQL_TIMEOUT_S``, then the defaults. Raises :class:`ValueError` for a bad value."""
        memory = memory_limit or os.environ.get(MEMORY_ENV) or _default_memory_limit()
        parse_size(memory, "--memory-limit" if memory_limit else (MEMORY_ENV if os.environ.get(MEMORY_ENV) else "memory limit"))
        raw_threads = threads if threads is not None else os.environ.get(THREADS_ENV)
        try:
            n_threads = int(raw_threads) if raw_threads not in (None, "") else _default_threads()
        except ValueError:
            raise ValueError(f"{THREADS_ENV}: {raw_threads!r} is not a whole number of threads") from None
        if n_threads < 1:
            raise ValueError(f"threads must be at least 1, got {n_threads}")
        raw_timeout = timeout_s if timeout_s is not None else os.environ.get(TIMEOUT_ENV)
        try:
            seconds = float(raw_timeout) if raw_timeout not in (None, "") else 120.0
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV}: {raw_timeout!r} is not a number of seconds") from None
        if seconds < 0:
            raise ValueError(f"the time limit must be 0 (none) or more seconds, got {seconds}")
        return cls(memory, n_threads, seconds)

    @property
    def memory_bytes(self) -> int:
        """``memory_limit`` in bytes."""
        return parse_size(self.memory_limit)


def _dataset(lake: LakeTables, table: str, version: int | None = None) -> Any:
    """Arrow dataset over the current (or given) version of ``table`` (native filesystem when local)."""
    return lake.arrow_dataset(table, version)


class Connection:
    """A hardened in-memory DuckDB connection over the lake (see the module docstring).

    Use as a context manager; ``.con`` is the ``duckdb.DuckDBPyConnection``. Closing it
    removes the private spill folder.
    """

    def __init__(self, lake: LakeTables, limits: SQLLimits | None = None, include_raw: bool = False, as_of: Any = None) -> None:
        self.limits = limits or SQLLimits.resolve()
        self.temp_dir = tempfile.mkdtemp(prefix="facetlake-sql-")
        self.con = duckdb.connect(":memory:", config={
            "autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "memory_limit": self.limits.memory_limit,
            "threads": self.limits.threads, "temp_directory": self.temp_dir,
        })
        try:
            self.con.execute("SET enable_progress_bar = false")
            self.tables = [t for t in lake.tables() if include_raw or t not in RAW_TABLES]
            if as_of is not None:  # time travel (resources/sql/timetravel.py): tables made later are left out
                self.tables = [t for t in self.tables if t in as_of.versions]
            files: list[str] = []
            for table in self.tables:
                version = as_of.versions[table] if as_of is not None else None
                delta = native_delta(lake, table, version)
                if delta is not None:  # local: DuckDB's Parquet reader (resources/sql/views.py)
                    files += create_view(self.con, delta, table)
                else:
                    self.con.register(table, _dataset(lake, table, version))
            if files:  # exactly the files the views read: nothing else on disk becomes readable
                self.con.execute("SET allowed_paths = ?", [files])
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection and remove the spill folder."""
        try:
            self.con.close()
        finally:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(lake: LakeTables, limits: SQLLimits | None = None, include_raw: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per Delta table under ``lake``
    (raw-text tables only with ``include_raw``), external access off, configuration locked.

    Datasets are frozen at the version current now: open a new connection after writes.
    The caller closes it (its spill folder lives in the system temp folder). Raises
    ``deltalake`` errors for a table that cannot be read.
    """
    return Connection(lake, limits, include_raw).con


def _first_keyword(text: str) -> str:
    match = _FIRST_KEYWORD.match(text or "")
    return match.group(1).upper() if match else ""


def _skip_noise(text: str, i: int) -> int:
    """Index of the next character of ``text`` from ``i`` that is not whitespace or a comment."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    return i


def _skip_group(text: str, i: int) -> int:
    """Index just past the parenthesised group that opens at ``text[i]`` (strings,
    quoted identifiers and comments inside are skipped); ``len(text)`` if unbalanced."""
    depth, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            end = i + 1
            while end < n:
                if text[end] == ch:
                    if end + 1 < n and text[end + 1] == ch:  # doubled quote inside
                        end += 2
                        continue
                    break
                end += 1
            i = end + 1
            continue
        if text.startswith("--", i) or text.startswith("/*", i):
            i = _skip_noise(text, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


_WORD = re.compile(r'[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")*"')


def main_verb(text: str) -> str:
    """The statement's main keyword: its first keyword, or for ``WITH`` (CTEs) and a
    leading parenthesis the keyword of the statement they introduce (``WITH x AS (...)
    INSERT`` -> ``INSERT``). Empty when it cannot be told."""
    i = _skip_noise(text, 0)
    while i < len(text) and text[i] == "(":  # (SELECT ...) UNION (SELECT ...)
        i = _skip_noise(text, i + 1)
    word = _WORD.match(text, i)
    if not word:
        return ""
    verb = word.group().upper()
    if verb != "WITH":
        return verb
    i = _skip_noise(text, word.end())
    if text[i : i + 9].upper().startswith("RECURSIVE"):
        i = _skip_noise(text, i + 9)
    while True:  # name [(columns)] AS [NOT] [MATERIALIZED] (body) [, ...]
        name = _WORD.match(text, i)
        if not name:
            return ""
        i = _skip_noise(text, name.end())
        if text[i : i + 1] == "(":
            i = _skip_noise(text, _skip_group(text, i))
        for keyword in ("AS", "NOT", "MATERIALIZED", "USING"):
            w = _WORD.match(text, i)
            if w and w.group().upper() == keyword:
                i = _skip_noise(text, w.end())
                if keyword == "USING":  # USING KEY (cols) of a recursive CTE
                    w = _WORD.match(text, i)
                    i = _skip_noise(text, w.end()) if w else i
                    if text[i : i + 1] == "(":
                        i = _skip_noise(text, _skip_group(text, i))
                    w = _WORD.match(text, i)
                    if w and w.group().upper() == "AS":
                        i = _skip_noise(text, w.end())
        if text[i : i + 1] != "(":
            return ""
        i = _skip_noise(text, _skip_group(text, i))
        if text[i : i + 1] == ",":
            i = _skip_noise(text, i + 1)
            continue
        word = _WORD.match(text, i)
        return word.group().upper() if word else ""


def _explained(text: str) -> tuple[str, str] | None:
    """(``EXPLAIN`` or ``EXPLAIN ANALYZE``, the statement it explains) for an ``EXPLAIN
    [ANALYZE] [(options)] statement``; None if ``text`` is not one."""
    match = _EXPLAIN_PREFIX.match(text)
    if not match:
        return None
    i = _skip_noise(text, match.end())
    if text[i : i + 1] == "(":  # EXPLAIN (FORMAT json) ...
        i = _skip_group(text, i)
    return ("EXPLAIN ANALYZE" if match.group(1) else "EXPLAIN"), text[i:]


def _refusal(label: str) -> SQLRefusedError:
    return SQLRefusedError(
        f"refused this {label} statement: `facetlake sql` is read-only "
        "(SELECT / WITH / FROM / DESCRIBE / SUMMARIZE / PIVOT, and EXPLAIN of those); tables change only through "
        "the pipeline (`facetlake run`, `facetlake score`)"
    )


def _check_statement(con: duckdb.DuckDBPyConnection, text: str, kind: str | None, depth: int = 0) -> None:
    if kind == "MULTI" and main_verb(text) == "EXPLAIN":  # EXPLAIN of a PIVOT without IN list
        kind = "EXPLAIN"
    label = _statement_label(text, kind or "")
    if kind == "EXPLAIN":
        explained = _explained(text)
        if explained is None or depth > 3:
            raise _refusal(label)
        prefix, inner = explained
        try:
            statements = con.extract_statements(inner)
        except duckdb.Error as exc:
            raise SQLRefusedError(f"could not parse the statement after EXPLAIN: {exc}") from None
        if len(statements) != 1:
            raise _refusal(label)
        inner_kind = _statement_kind(statements[0])
        try:
            _check_statement(con, statements[0].query, inner_kind, depth + 1)
        except SQLRefusedError:
            inner_label = _statement_label(statements[0].query, inner_kind or "")
            raise _refusal(f"{prefix} {inner_label}") from None
        return
    if kind == "MULTI":
        # a PIVOT without IN list expands into several statements: the user's main verb
        # decides (CREATE TABLE ... AS PIVOT, INSERT ... PIVOT, COPY (PIVOT ...) are writes)
        verb = main_verb(text)
        if verb not in _READ_ONLY_VERBS:
            raise _refusal(verb or label)
        return
    if kind not in _READ_ONLY_TYPES:
        raise _refusal(label)


def _statement_kind(stmt: Any) -> str | None:
    """DuckDB's statement type name, or None for a type this duckdb's Python enum does not
    know (``UPDATE EXTENSIONS`` raises "29 is not a valid StatementType")."""
    try:
        return stmt.type.name
    except (ValueError, AttributeError):
        return None


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`SQLRefusedError` unless every statement in ``sql`` is known to be
    read-only (or when ``sql`` does not parse or is empty)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SQLRefusedError(f"could not parse SQL: {exc}") from None
    if not statements:
        raise SQLRefusedError("no SQL statement given")
    for stmt in statements:
        _check_statement(con, stmt.query, _statement_kind(stmt))


def _statement_label(text: str, kind: str) -> str:
    """The statement's own first keyword (INSTALL, BEGIN, USE), or DuckDB's statement
    type where that says more (a WITH ... INSERT is an INSERT); two words for a type
    unknown to this duckdb (UPDATE EXTENSIONS)."""
    if not kind:
        words = re.findall(r"[A-Za-z]+", _FIRST_KEYWORD.sub(lambda m: m.group(1), text or "", count=1))[:2]
        return " ".join(w.upper() for w in words) or "unknown"
    word = _first_keyword(text)
    if kind == "MULTI":
        return main_verb(text) or word or kind
    return kind if word in ("", "WITH", kind) else word


def _fetch_bounded(rel: duckdb.DuckDBPyRelation, limits: SQLLimits, deadline: float | None = None,
                   max_rows: int | None = None) -> Any:
    """The result as one Arrow table, read batch by batch; raises :class:`SQLLimitError`
    once it holds more bytes than the memory limit (a cross join's result is outside
    DuckDB's own buffer manager) or past ``deadline`` (``time.monotonic()``: reading a large
    result is bounded like running the query, issue 26 fault 5); stops after ``max_rows``."""
    import pyarrow as pa

    reader = rel.fetch_record_batch(65536)
    batches, held, cap, rows = [], 0, limits.memory_bytes, 0
    for batch in batches_of(reader):
        if deadline is not None and time.monotonic() > deadline:
            reader.close()
            raise duckdb.InterruptException("time limit")
        held += batch.nbytes
        rows += batch.num_rows
        if max_rows is not None and rows >= max_rows:
            batches.append(batch.slice(0, batch.num_rows - (rows - max_rows)))
            reader.close()
            break
        if held > cap:
            reader.close()
            raise SQLLimitError(
                f"the query's result passed the memory limit ({limits.memory_limit}); add a LIMIT or aggregate, "
                f"or raise it with --memory-limit or {MEMORY_ENV}"
            )
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def query(lake: LakeTables, sql: str, limits: SQLLimits | None = None, include_raw: bool = False,
          max_rows: int | None = None, as_of: Any = None) -> pl.DataFrame:
    """Run a read-only query over the lake and return the result as polars.

    ``limits``: memory, threads and time limit (default :meth:`SQLLimits.resolve`; the time
    limit covers running the query and reading its result); ``include_raw``: also expose
    the raw-text tables (:data:`RAW_TABLES`); ``max_rows``: read at most this many rows;
    ``as_of``: an :class:`resources.sql.timetravel.AsOf` (earlier table versions; None = now).
    Raises :class:`SQLRefusedError` for anything not known to be read-only,
    :class:`SQLLimitError` past the time or memory limit, ``duckdb.Error`` for a query
    DuckDB rejects. INTERVAL values (also inside lists and structs) come back as DuckDB's
    text, e.g. "3 days", "-1 month"."""
    limits = limits or SQLLimits.resolve()
    with Connection(lake, limits, include_raw, as_of) as connection:
        con = connection.con
        check_read_only(con, sql)
        timer = threading.Timer(limits.timeout_s, con.interrupt) if limits.timeout_s else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        deadline = time.monotonic() + limits.timeout_s if limits.timeout_s else None
        try:
            rel = con.sql(sql)
            if rel is None:  # defensive: every read-only statement type yields a relation
                return pl.DataFrame()
            return pl.from_arrow(_fetch_bounded(intervals_as_text(rel), limits, deadline, max_rows))
        except duckdb.InterruptException:
            raise SQLLimitError(
                f"the query was stopped at the time limit ({limits.timeout_s:g} s); narrow it, or raise the limit "
                f"with --timeout or {TIMEOUT_ENV} (0 = none)"
            ) from None
        except duckdb.OutOfMemoryException:
            raise SQLLimitError(
                f"the query needs more than the memory limit ({limits.memory_limit}); narrow it, or raise the limit "
                f"with --memory-limit or {MEMORY_ENV}"
            ) from None
        finally:
            if timer is not None:
                timer.cancel()
