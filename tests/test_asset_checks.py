"""Asset declarations (issue 27): true column types from the lake's contracts, the checks on
``generations`` (error rate, every sample present) and ``scores`` (declared ranges, status
counts), and ``token_logprobs`` / ``lm_eval_responses`` as outputs of the generations step."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from assets.declare import column_type, table_metadata, table_schema
from assets.generations import CHECK_COMPLETE, CHECK_ERROR_RATE, generation_checks
from assets.scores import CHECK_RANGE, CHECK_STATUS, score_checks
from metric_ops.identity import metric_identity
from metric_ops.registry import get_metric
from pipelines.runs.runner import run_evaluation
from resources.catalog import evaluation_row
from resources.lake.schemas import SCHEMAS
from tests.test_recurring import N, fresh_instance, lake, spec_for, write_dataset, write_outputs  # noqa: F401 - fixtures


# ----------------------------------------------------------------------------- column types
def test_column_schema_has_the_contract_types():
    scores = {c.name: c.type for c in table_schema("scores").columns}
    assert list(scores) == SCHEMAS["scores"].names  # every column, in the contract's order
    assert scores["value"] == "float64" and scores["metric"] == "string" and scores["created_at"] == "timestamp[us, UTC]"
    samples = {c.name: c.type for c in table_schema("samples").columns}
    assert samples["references"] == "list<string>" and samples["position"] == "int64"
    generations = {c.name: c.type for c in table_schema("generations").columns}
    assert generations["tokens_out"] == "int64" and generations["latency_s"] == "float64"
    assert column_type(SCHEMAS["evaluations"].field("archived").type) == "bool"


def test_a_stale_column_description_or_an_unknown_table_is_refused():
    with pytest.raises(ValueError, match="contract lacks: \\['no_such_column'\\]"):
        table_schema("scores", {"no_such_column": "gone"})
    with pytest.raises(ValueError, match="no contract in resources/lake/schemas.py"):
        table_schema("nowhere")


def test_every_delta_asset_declares_its_true_schema_table_and_pool():
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        table = node.metadata.get("delta_table")
        assert table == key.to_user_string(), f"{key} declares no Delta table"
        schema = node.metadata["dagster/column_schema"]
        assert [c.name for c in schema.columns] == SCHEMAS[table].names, table
        assert "delta" in node.kinds
    assert graph.get(dg.AssetKey("summary")).kinds == {"delta", "polars"}  # computed with polars, not DuckDB
    assert set(defs.resources) == {"lake", "backends", "inbox"}  # every resource is used by an asset or a sensor


# ----------------------------------------------------------------------------- the checks, on frames
def test_generation_checks_count_errors_and_missing_samples():
    stored = pl.DataFrame({"sample_id": ["a", "b", "c", "c"], "status": ["ok", "error", "error", "ok"],
                           "error": [None, "timeout", "first try", None]})
    rate, complete = generation_checks(stored, ["a", "b", "c", "d"], max_error_rate=0.0)
    assert rate.check_name == CHECK_ERROR_RATE and not rate.passed
    assert rate.metadata["error_rate"].value == pytest.approx(1 / 3)  # c's last row is ok: one error of three samples
    assert rate.metadata["first_errors"].value == ["b: timeout"]
    assert complete.check_name == CHECK_COMPLETE and not complete.passed
    assert complete.metadata["missing"].value == ["d"] and complete.severity == dg.AssetCheckSeverity.ERROR
    rate, complete = generation_checks(stored, ["a", "b", "c"], max_error_rate=0.5)
    assert rate.passed and complete.passed


def test_score_checks_use_each_metric_s_declared_range():
    f1 = json.dumps(metric_identity(get_metric("token_f1")))
    stored = pl.DataFrame({
        "metric": ["token_f1", "token_f1", "human:overall", "exact_match"],
        "status": ["scored", "scored", "scored", "error"],
        "value": [0.5, 1.5, 4.0, None],  # 1.5 is outside [0, 1]; a 1-5 rating has no metric range
        "params": [f1, f1, json.dumps({"metric": "human:overall", "version": None, "params": {}}), None],
    })
    in_range, status = score_checks(stored)
    assert in_range.check_name == CHECK_RANGE and not in_range.passed
    assert in_range.metadata["outside"].value == {"token_f1": 1} and in_range.metadata["n_checked"].value == 3
    assert status.check_name == CHECK_STATUS and not status.passed
    assert (status.metadata["n_scored"].value, status.metadata["n_error"].value) == (3, 1)
    ok = stored.filter(pl.col("value") != 1.5).with_columns(status=pl.lit("scored"))
    assert [c.passed for c in score_checks(ok.filter(pl.col("value").is_not_null()))] == [True, True]


def test_table_metadata_records_rows_version_and_where(lake):  # noqa: F811
    lake.append("pairs", [{"evaluation": "e", "fingerprint": "f", "model": "m", "partition_key": "k", "status": "active",
                           "registered_at": None}])
    meta = table_metadata(lake, "pairs", 1)
    assert meta["dagster/row_count"] == 1 and meta["delta_version"] == lake.version("pairs")
    assert table_metadata(lake, "pairs", 1, version=7)["delta_version"] == 7  # the version the asset wrote, when given
    assert meta["dagster/table_name"] == "pairs" and meta["dagster/uri"].path == lake.uri("pairs")


# ----------------------------------------------------------------------------- end to end
def _latest_check(instance: dg.DagsterInstance, asset: str, name: str):
    key = dg.AssetCheckKey(dg.AssetKey(asset), name)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    return record.event.dagster_event.event_specific_data


def test_a_run_records_the_checks_and_the_side_tables(lake, fresh_instance, tmp_path):  # noqa: F811
    """Two of N samples have no output in the file: two error rows, so the error-rate check
    fails (WARN) while every sample is still present; the scores are in range."""
    outputs = write_outputs(tmp_path, "m.jsonl", correct=3, n=N - 2)
    with pytest.warns(UserWarning, match="no output"):
        run_evaluation(spec_for("checked", write_dataset(tmp_path), {"m": f"precomputed:{outputs}"}), lake, fresh_instance)
    rate = _latest_check(fresh_instance, "generations", CHECK_ERROR_RATE)
    assert not rate.passed and rate.metadata["n_error"].value == 2 and rate.metadata["n_rows"].value == N
    assert _latest_check(fresh_instance, "generations", CHECK_COMPLETE).passed
    assert _latest_check(fresh_instance, "scores", CHECK_RANGE).passed
    status = _latest_check(fresh_instance, "scores", CHECK_STATUS)
    assert status.metadata["n_scored"].value + status.metadata["n_unscored"].value + status.metadata["n_error"].value == N
    key = f"checked@{evaluation_row(lake, 'checked')['fingerprint'][:12]}:m"
    for side in ("token_logprobs", "lm_eval_responses"):  # outputs of the same step, same partition
        assert fresh_instance.get_materialized_partitions(dg.AssetKey(side)) == {key}
    event = fresh_instance.get_latest_materialization_event(dg.AssetKey("generations")).asset_materialization
    assert event.metadata["dagster/row_count"].value == N and event.metadata["dagster/uri"].path == lake.uri("generations")
