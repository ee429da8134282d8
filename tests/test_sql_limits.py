"""Hostile SQL against `facetlake sql` (issue 16, items 13-15): writes disguised as EXPLAIN /
PIVOT / CTEs and statement types this duckdb's enum does not know are refused before
anything runs; local files (also DuckDB's own temp folder) are unreadable and the
configuration cannot be changed back; memory, threads and run time are bounded and
configurable by flag and environment."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from resources.lake.resource import LakeStore
from resources.sql import Connection, SQLLimitError, SQLLimits, SQLRefusedError, check_read_only, main_verb, query

runner = CliRunner()
FP = "c" * 64


def _score_rows(n: int) -> list[dict]:
    return [{"model": "m", "fingerprint": FP, "dataset": "d", "sample_id": str(i), "metric": "bleu", "value": float(i),
             "direction": "maximize", "dimension": "baseline_grounding", "locality": "local", "status": "scored",
             "detail": "{}", "signature": "bleu|v:1", "run_id": "r", "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)}
            for i in range(n)]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> LakeStore:
    store = LakeStore(root=str(tmp_path_factory.mktemp("sqlhard") / "lake"))
    store.replace("scores", _score_rows(300), {"model": "m", "fingerprint": FP})
    return store


WRITES = [
    # EXPLAIN ANALYZE executes the statement it explains
    "EXPLAIN ANALYZE DROP VIEW scores",
    "explain analyze create table t as select 1",
    "EXPLAIN (FORMAT json) CREATE TABLE t AS SELECT * FROM scores",
    "/* c */ EXPLAIN ANALYZE -- x\n INSERT INTO scores SELECT * FROM scores",
    "EXPLAIN ANALYZE CREATE TABLE x AS PIVOT (SELECT 1 AS a) ON a",
    # statement types the Python enum does not know (DuckDB adds them): "29 is not a valid StatementType"
    "UPDATE EXTENSIONS",
    "update extensions (httpfs)",
    # a PIVOT without IN list is a MULTI statement: its main verb decides
    "CREATE TABLE x AS PIVOT (SELECT 1 AS a) ON a",
    "INSERT INTO x PIVOT (SELECT 1 AS a) ON a",
    "WITH t AS (SELECT 1 AS a) INSERT INTO x PIVOT t ON a",
    "COPY (PIVOT (SELECT 1 AS a) ON a) TO 'out.csv'",
    "MERGE INTO t USING s ON (t.a = s.a) WHEN MATCHED THEN DELETE",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "PRAGMA enable_external_access",
    "CHECKPOINT",
    "DETACH memory",
]


@pytest.mark.parametrize("statement", WRITES)
def test_disguised_writes_are_refused_before_anything_runs(lake, statement):
    with Connection(lake, SQLLimits.resolve("256MB", 1, 30)) as connection:
        con = connection.con
        with pytest.raises(SQLRefusedError, match="refused this .* statement: `facetlake sql` is read-only"):
            check_read_only(con, statement)
        # nothing ran: the view is still there, no table was made
        assert con.execute("select count(*) from scores").fetchone() == (300,)
        assert con.execute("select count(*) from duckdb_tables()").fetchone() == (0,)
    with pytest.raises(SQLRefusedError):
        query(lake, statement)


def test_unknown_statement_type_is_refused_not_an_internal_error(lake):
    class Future:  # a statement whose type this duckdb's Python enum cannot name
        query = "FROBNICATE everything"

        @property
        def type(self):
            raise ValueError("31 is not a valid StatementType")

    class FakeConnection:
        def extract_statements(self, sql):
            return [Future()]

    with pytest.raises(SQLRefusedError, match="refused this FROBNICATE EVERYTHING statement"):
        check_read_only(FakeConnection(), "FROBNICATE everything")
    result = runner.invoke(app, ["sql", "--lake", lake.root, "UPDATE EXTENSIONS"])
    assert result.exit_code == 1
    assert "refused this UPDATE EXTENSIONS statement" in result.stderr and "ValueError" not in result.output


@pytest.mark.parametrize("statement,rows", [
    ("EXPLAIN SELECT count(*) FROM scores", None),
    ("EXPLAIN ANALYZE SELECT count(*) FROM scores", None),
    ("EXPLAIN PIVOT (SELECT model, sample_id, value FROM scores WHERE sample_id < '2') ON sample_id USING sum(value)", None),
    ("PIVOT (SELECT model, sample_id, value FROM scores WHERE sample_id IN ('1', '2')) ON sample_id USING sum(value)", 1),
    ("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT * FROM t", 5),
    ("(SELECT 1 AS a) UNION ALL (SELECT 2)", 2),
    ("FROM scores LIMIT 3", 3),
    ("SUMMARIZE scores", None),
    ("DESCRIBE scores", None),
])
def test_reads_still_run(lake, statement, rows):
    frame = query(lake, statement, SQLLimits.resolve("256MB", 1, 60))
    assert frame.height >= 1 and (rows is None or frame.height == rows)


def test_main_verb_sees_through_ctes_comments_and_quotes():
    assert main_verb("with \"a)b\" as materialized (select ')' as x), c as (select 1) pivot c on x") == "PIVOT"
    assert main_verb("-- x\n/* y */ WITH t(a) AS NOT MATERIALIZED (SELECT 1) INSERT INTO z SELECT * FROM t") == "INSERT"
    assert main_verb("((select 1))") == "SELECT"
    assert main_verb("with broken as select") == ""


def test_local_files_are_unreadable_and_the_lock_holds(lake, tmp_path, monkeypatch):
    # a file in DuckDB's default temp folder (<cwd>/.tmp) and one anywhere else
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.csv").write_text("k,v\napi,sk-SENTINEL\n")
    for statement in ["select * from read_csv('.tmp/secret.csv')", "select * from read_text('.tmp/secret.csv')",
                      f"select * from read_csv('{tmp_path}/.tmp/secret.csv')", "select * from glob('.tmp/*')",
                      "select * from read_parquet('/etc/hostname')", "select * from 'secret.csv'"]:
        with pytest.raises(Exception) as exc:
            query(lake, statement)
        assert "sk-SENTINEL" not in str(exc.value)
    with Connection(lake, SQLLimits.resolve("256MB", 1, 30)) as connection:
        con = connection.con
        for statement in ["SET enable_external_access = true", "RESET enable_external_access", "SET lock_configuration = false",
                          "SET memory_limit = '100GB'", "SET threads = 64", "SET temp_directory = '.tmp'"]:
            with pytest.raises(Exception, match="locked"):
                con.execute(statement)  # even past check_read_only, the locked configuration refuses
        spill = con.execute("select current_setting('temp_directory')").fetchone()[0]
        assert not Path(spill).resolve().is_relative_to(tmp_path) and Path(spill).is_dir()
    assert not Path(spill).exists()  # the private spill folder is removed on close


def test_limits_resolve_from_flags_then_environment_then_defaults(monkeypatch):
    for name in ("FACETLAKE_SQL_MEMORY_LIMIT", "FACETLAKE_SQL_THREADS", "FACETLAKE_SQL_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    default = SQLLimits.resolve()
    cores = len(os.sched_getaffinity(0))
    assert 1 <= default.threads <= max(1, cores // 2)
    assert 256 * 2**20 <= default.memory_bytes <= 4 * 2**30 and default.timeout_s == 120
    monkeypatch.setenv("FACETLAKE_SQL_MEMORY_LIMIT", "300MB")
    monkeypatch.setenv("FACETLAKE_SQL_THREADS", "1")
    monkeypatch.setenv("FACETLAKE_SQL_TIMEOUT_S", "7.5")
    assert SQLLimits.resolve() == SQLLimits("300MB", 1, 7.5)
    assert SQLLimits.resolve("1GiB", 2, 0) == SQLLimits("1GiB", 2, 0.0)
    for bad, match in [(("lots",), "not a size"), (("1MB",), "below 16MiB"), ((None, 0), "at least 1"), ((None, None, -1), "0 \\(none\\)")]:
        with pytest.raises(ValueError, match=match):
            SQLLimits.resolve(*bad)


def test_settings_reach_duckdb(lake):
    frame = query(lake, "select current_setting('memory_limit') as m, current_setting('threads') as t, "
                        "current_setting('enable_external_access') as e, current_setting('lock_configuration') as l",
                  SQLLimits.resolve("300MiB", 1, 30))
    row = frame.row(0, named=True)
    assert row["m"].startswith("300") and row["t"] == 1 and row["e"] is False and row["l"] is True


def test_time_limit_interrupts_a_runaway_join(lake):
    with pytest.raises(SQLLimitError, match=r"stopped at the time limit \(1 s\).*--timeout"):
        query(lake, "select count(distinct a.value * 1000003 + b.value * 1009 + c.value) from scores a, scores b, scores c",
              SQLLimits.resolve("512MB", 1, 1))


def test_memory_limit_bounds_duckdb_and_the_result(lake):
    limits = SQLLimits.resolve("64MB", 1, 60)
    with pytest.raises(SQLLimitError, match=r"needs more than the memory limit \(64MB\)"):
        query(lake, "select list(range) from range(50000000)", limits)
    with pytest.raises(SQLLimitError, match=r"result passed the memory limit \(64MB\)"):
        query(lake, "select a.*, b.sample_id as s2 from scores a, scores b, range(100)", limits)
    assert query(lake, "select count(*) as n from scores a, scores b", limits).item() == 90000


def test_cli_flags_and_environment(lake, monkeypatch):
    result = runner.invoke(app, ["sql", "--lake", lake.root, "--threads", "1", "--memory-limit", "200MB", "-f", "csv",
                                 "select current_setting('threads') as t, current_setting('memory_limit') as m"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("1,19")  # 200MB is shown as 190.7 MiB
    monkeypatch.setenv("FACETLAKE_SQL_TIMEOUT_S", "1")
    result = runner.invoke(app, ["sql", "--lake", lake.root,
                                 "select count(distinct a.value * 1000003 + b.value * 1009 + c.value) from scores a, scores b, scores c"])
    assert result.exit_code == 1 and "time limit (1 s)" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3  # one message, wrapped at most; no traceback
    result = runner.invoke(app, ["sql", "--lake", lake.root, "--memory-limit", "plenty", "select 1"])
    assert result.exit_code == 1 and "not a size" in result.stderr
