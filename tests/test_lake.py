"""The Delta lake store on a real folder: A/B/A, idempotence, schema contracts, SQL."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from resources.lake.commit import LakeError
from resources.lake.tables import predicate_for
from resources.lake.resource import LakeStore
from resources.sql import SQLRefusedError, query

FP_A = "a" * 64
FP_B = "b" * 64


def score_row(model: str, fingerprint: str, sample_id: str, metric: str = "bleu", value: float = 1.0) -> dict:
    return {
        "model": model, "fingerprint": fingerprint, "dataset": "d", "sample_id": sample_id, "metric": metric,
        "value": value, "direction": "maximize", "dimension": "baseline_grounding", "locality": "local",
        "status": "scored", "detail": "{}", "signature": "bleu|v:1", "run_id": "r",
        "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    }


def partition(model, fp, n, value=1.0):
    return [score_row(model, fp, str(i), value=value + i) for i in range(n)]


def test_write_a_then_b_then_a_keeps_b_row_for_row(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    lake.replace("scores", partition("m1", FP_A, 3), {"model": "m1", "fingerprint": FP_A})
    lake.replace("scores", partition("m2", FP_B, 4), {"model": "m2", "fingerprint": FP_B})
    b_before = lake.read("scores", where={"model": "m2", "fingerprint": FP_B}).sort("sample_id")
    lake.replace("scores", partition("m1", FP_A, 2, value=10.0), {"model": "m1", "fingerprint": FP_A})
    b_after = lake.read("scores", where={"model": "m2", "fingerprint": FP_B}).sort("sample_id")
    assert b_after.equals(b_before)
    a_after = lake.read("scores", where={"model": "m1", "fingerprint": FP_A}).sort("sample_id")
    assert a_after["value"].to_list() == [10.0, 11.0]  # A replaced, not appended


def test_same_model_other_fingerprint_is_another_partition(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    lake.replace("scores", partition("m1", FP_A, 2), {"model": "m1", "fingerprint": FP_A})
    lake.replace("scores", partition("m1", FP_B, 3), {"model": "m1", "fingerprint": FP_B})
    lake.replace("scores", partition("m1", FP_A, 1), {"model": "m1", "fingerprint": FP_A})
    assert lake.read("scores", where={"fingerprint": FP_B}).height == 3


def test_rewriting_a_partition_is_idempotent(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    rows = partition("m1", FP_A, 5)
    for _ in range(3):
        lake.replace("scores", rows, {"model": "m1", "fingerprint": FP_A})
    frame = lake.read("scores")
    assert frame.height == 5 and frame["sample_id"].n_unique() == 5


def test_metric_level_replace_leaves_other_metrics_untouched(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    rows = partition("m1", FP_A, 3) + [score_row("m1", FP_A, str(i), metric="rouge_l_f", value=0.5) for i in range(3)]
    lake.replace("scores", rows, {"model": "m1", "fingerprint": FP_A})
    lake.replace("scores", [score_row("m1", FP_A, "0", metric="rouge_l_f", value=0.9)],
                 {"model": "m1", "fingerprint": FP_A, "metric": ["rouge_l_f"]})
    frame = lake.read("scores")
    assert frame.filter(pl.col("metric") == "bleu").height == 3
    assert frame.filter(pl.col("metric") == "rouge_l_f")["value"].to_list() == [0.9]


def test_rows_outside_the_partition_are_refused(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    with pytest.raises(LakeError, match="outside the partition"):
        lake.replace("scores", partition("m2", FP_A, 1), {"model": "m1", "fingerprint": FP_A})


@pytest.mark.parametrize("value", ["it's", "a'; DROP", "x$y", ""])
def test_unsafe_partition_values_never_reach_a_predicate(value):
    with pytest.raises(LakeError):
        predicate_for({"model": value})


def test_empty_predicate_is_refused():
    with pytest.raises(LakeError, match="whole table"):
        predicate_for({})


def test_schema_contract_is_enforced(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    bad = partition("m1", FP_A, 1)
    bad[0]["unexpected"] = 1
    with pytest.raises(LakeError, match="unexpected"):
        lake.replace("scores", bad, {"model": "m1", "fingerprint": FP_A})


def test_missing_table_reads_empty_with_schema(tmp_path):
    frame = LakeStore(root=str(tmp_path / "nothing")).read("scores")
    assert frame.height == 0 and "signature" in frame.columns


def test_sql_views_and_read_only(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    lake.replace("scores", partition("m1", FP_A, 3), {"model": "m1", "fingerprint": FP_A})
    result = query(lake, "select model, count(*) as n, sum(value) as s from scores group by 1")
    assert result.to_dicts() == [{"model": "m1", "n": 3, "s": 6.0}]
    for statement in ["delete from scores", "insert into scores select * from scores", "create table t as select 1",
                      "copy scores to 'x.csv'", "install delta", "select 1; drop view scores", "attach 'x.db'"]:
        with pytest.raises(SQLRefusedError):
            query(lake, statement)
    with pytest.raises(Exception, match="disabled"):
        query(lake, "select * from read_csv('/etc/hostname')")


def test_sql_interval_results_and_pivot(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    lake.replace("scores", partition("m1", FP_A, 3), {"model": "m1", "fingerprint": FP_A})
    frame = query(lake, "select interval 3 day + interval 90 minute as d, interval 14 month + interval 2 day as m, "
                        "cast(null as interval) as n, interval (-1) month as neg, [interval 3 day] as l, "
                        "{'a': interval 3 day} as s, interval 1 day as \"q\"\"x\", 7 as z")
    # every INTERVAL, also nested, is DuckDB's own text; other columns keep names and types
    assert frame.row(0) == ("3 days 01:30:00", "1 year 2 months 2 days", None, "-1 month", "[3 days]",
                            "{'a': 3 days}", "1 day", 7)
    assert frame.columns[:7] == ["d", "m", "n", "neg", "l", "s", 'q"x'] and frame.schema["n"] == pl.String
    # the text writes to CSV (a duration or Arrow interval column would not)
    assert frame.select("d", "neg").write_csv() == "d,neg\n3 days 01:30:00,-1 month\n"
    # a PIVOT without an IN list is DuckDB's MULTI statement: a read, so allowed
    pivot = query(lake, "pivot (select model, sample_id, value from scores) on sample_id using sum(value) group by model")
    assert pivot.height == 1 and pivot.width == 4
    with pytest.raises(SQLRefusedError, match="refused this INSERT statement"):
        query(lake, "insert into scores select * from scores")
    # named by the user's own keyword, not DuckDB's statement type (LOAD, TRANSACTION)
    for statement, keyword in [("install httpfs", "INSTALL"), ("-- x\n load httpfs", "LOAD"), ("begin", "BEGIN"),
                               ("with x as (select 1) insert into scores select * from x", "INSERT")]:
        with pytest.raises(SQLRefusedError, match=f"refused this {keyword} statement"):
            query(lake, statement)


def test_sql_reads_local_tables_through_the_native_filesystem(tmp_path):
    """Local datasets use pyarrow's native filesystem (not deltalake's Python one, whose
    callbacks from Arrow's IO threads crash the CLI at exit), with partition folders whose
    names Delta percent-encodes, and keep filter pushdown."""
    import pyarrow.fs as pa_fs

    from resources.sql.query import _dataset

    lake = LakeStore(root=str(tmp_path / "lake"))
    odd = "org/model:v1 +x@y"
    lake.replace("scores", partition(odd, FP_A, 3), {"model": odd, "fingerprint": FP_A})
    lake.replace("scores", partition("m2", FP_B, 2), {"model": "m2", "fingerprint": FP_B})
    dataset = _dataset(lake, "scores")
    assert isinstance(dataset.filesystem, pa_fs.SubTreeFileSystem)
    assert isinstance(dataset.filesystem.base_fs, pa_fs.LocalFileSystem)
    result = query(lake, "select model, count(*) as n, sum(value) as s from scores group by 1 order by 1")
    assert result.to_dicts() == [{"model": "m2", "n": 2, "s": 3.0}, {"model": odd, "n": 3, "s": 6.0}]
    plan = query(lake, "explain select sample_id from scores where model = 'm2'")["explain_value"][0]
    assert "Filters:" in plan and "Projections: sample_id" in plan  # pushed into the Arrow scan
