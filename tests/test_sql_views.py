"""`facetlake sql` over local tables read by DuckDB's Parquet reader (resources/sql/views.py),
and filtered reads of tables whose files mix Arrow ``string`` and ``string_view`` text
(files written before and after the columnar writes): both used to fail with "no kernel
matching input types (string, string_view)"."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from resources.lake.schemas import SCHEMAS
from resources.lake.resource import LakeStore
from resources.sql import connect, query

FP = "f" * 64


def _score(sample_id: str, metric: str, status: str, run: str) -> dict:
    return {"model": "org/m:1 b", "fingerprint": FP, "dataset": "d", "sample_id": sample_id, "metric": metric,
            "value": None if status != "scored" else 0.5, "direction": "maximize", "dimension": "baseline_grounding",
            "locality": "local", "status": status, "detail": json.dumps({"error": "boom"} if status == "error" else {}),
            "signature": f"{metric}|v:1", "run_id": run, "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)}


@pytest.fixture
def mixed_lake(tmp_path) -> LakeStore:
    """A scores table with one file written as an older facetlake did (pyarrow rows: ``string``,
    no ``params`` column) and one appended by this version (polars frames: ``string_view``)."""
    lake = LakeStore(root=str(tmp_path / "lake"))
    old_schema = pa.schema([f for f in SCHEMAS["scores"] if f.name != "params"])
    old = pa.Table.from_pylist([_score("1", "bleu", "scored", "old"), _score("2", "bleu", "error", "old")], schema=old_schema)
    write_deltalake(lake.uri("scores"), old, partition_by=["fingerprint", "model"])
    lake.append("scores", [_score("1", "chrf", "error", "new"), _score("2", "chrf", "scored", "new")])
    kinds = {str(f.physical_schema.field("status").type) for f in lake.arrow_dataset("scores").get_fragments()}
    assert kinds == {"string", "string_view"}  # the mix this test is about
    return lake


def test_a_filter_on_a_text_column_of_a_mixed_table(mixed_lake):
    errors = mixed_lake.read("scores", where={"status": "error"}, columns=["metric", "sample_id"]).sort("metric")
    assert errors.rows() == [("bleu", "2"), ("chrf", "1")]
    assert mixed_lake.read("scores", where={"model": "org/m:1 b", "metric": ["chrf"]}).height == 2


def test_sql_filters_a_mixed_table_and_shows_columns_in_schema_order(mixed_lake):
    out = query(mixed_lake, "select metric, sample_id, params is null as no_params from scores where status = 'error' order by 1")
    assert out.rows() == [("bleu", "2", True), ("chrf", "1", False)]  # params: null in the older file
    described = query(mixed_lake, "describe scores")["column_name"].to_list()
    assert described == pa.schema(mixed_lake.delta("scores").schema().to_arrow()).names  # the table's order (params added last)
    assert sorted(described) == sorted(SCHEMAS["scores"].names)
    assert query(mixed_lake, "select distinct model from scores")["model"].to_list() == ["org/m:1 b"]  # Hive path decoded


def test_native_views_have_the_arrow_datasets_types_and_rows(mixed_lake, tmp_path):
    """Every table the product writes, read both ways: same column types, same rows."""
    lake = mixed_lake
    lake.append("runs", [{name: None for name in SCHEMAS["runs"].names} | {"run_id": "r", "asset": "scores"}])
    con = connect(lake)
    for table in lake.tables():
        native = con.sql(f"select * from {table}")
        con.register(f"arrow_{table}", lake.arrow_dataset(table))
        arrow = con.sql(f"select * from arrow_{table}")
        assert native.columns == arrow.columns, table
        assert [str(t) for t in native.types] == [str(t) for t in arrow.types], table
        key = ", ".join(f'"{c}"' for c in native.columns if not str(native.types[native.columns.index(c)]).endswith("[]"))
        assert sorted(map(str, con.sql(f"select {key} from {table}").fetchall())) == \
            sorted(map(str, con.sql(f"select {key} from arrow_{table}").fetchall())), table


def test_sql_reads_only_the_tables_current_files(mixed_lake):
    """Views read their files, and no other file under the lake becomes readable."""
    con = connect(mixed_lake)
    log = next(Path(mixed_lake.uri("scores"), "_delta_log").glob("*.json"))
    with pytest.raises(Exception, match="(?i)permission|disabled|access"):
        con.sql(f"select * from read_text('{log}')").fetchall()


@pytest.mark.slow
def test_native_views_equal_arrow_datasets_on_an_evaluated_lake(evaluated_lake):
    """Every table of a real evaluation (samples with list columns, runs, catalog, scores...)."""
    lake, _ = evaluated_lake
    con = connect(lake)
    checked = 0
    for table in lake.tables():
        native = con.sql(f"select * from {table}")
        con.register(f"arrow_{table}", lake.arrow_dataset(table))
        arrow = con.sql(f"select * from arrow_{table}")
        assert native.columns == arrow.columns and [str(t) for t in native.types] == [str(t) for t in arrow.types], table
        assert sorted(map(str, native.fetchall())) == sorted(map(str, arrow.fetchall())), table
        checked += 1
    assert checked >= 8
