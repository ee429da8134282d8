"""Concurrent writers on one lake (issue 16, items 8-12) and types at the boundary (issue 15, kind 7)."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing as mp
import sys

import polars as pl
import pytest

from resources.lake.commit import LakeError
from resources.lake.tables import to_arrow
from resources.lake.resource import LakeStore
from resources.lake.commit import LakeConflictError, with_retries

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


def _run_row(run_id: str, model: str | None = "m") -> dict:
    return {"run_id": run_id, "asset": "scores", "model": model, "fingerprint": "f" * 64, "dataset": "d", "table_name": "scores",
            "table_version": 1, "rows": 3, "started_at": NOW, "finished_at": NOW, "mode": "online", "provenance": "{}"}


def _score(sample_id: str | None, value: float = 0.5) -> dict:
    return {"model": "m", "fingerprint": "f" * 64, "dataset": "d", "sample_id": sample_id, "metric": "bleu", "value": value,
            "direction": "maximize", "dimension": "factual", "locality": "local", "status": "scored", "detail": "{}",
            "signature": "bleu|v1", "run_id": "r", "created_at": NOW}


# ------------------------------------------------------------------ keyed appends (item 11)
def test_appends_are_idempotent_by_key_with_null_keys(tmp_path):
    lake = LakeStore(root=str(tmp_path / "lake"))
    lake.append("runs", [_run_row("r1"), _run_row("r1", model=None)])
    lake.append("runs", [_run_row("r1"), _run_row("r1"), _run_row("r1", model=None), _run_row("r2")])
    assert sorted(map(str, lake.read("runs")["model"].to_list())) == ["None", "m", "m"]
    assert lake.read("runs")["run_id"].to_list().count("r1") == 2
    # scores of a corpus metric have no sample_id: the null key still matches itself
    lake.append("scores", [_score(None), _score("s1")])
    lake.append("scores", [_score(None, 0.9), _score("s1")])
    assert lake.read("scores").height == 2
    lake.append("evidence_exports", [{"exported_at": NOW, "fingerprint": "f", "evaluation": "e", "manifest_sha256": "a" * 64,
                                      "public_key_sha256": None, "signed": False, "table_format": "json", "n_files": 3, "folder": "x"}] * 2)
    assert lake.read("evidence_exports").height == 1


def test_every_table_has_a_key_of_its_own_columns():
    from resources.lake.schemas import SCHEMAS
    from resources.lake.commit import KEYS

    assert set(SCHEMAS) == set(KEYS)
    for table, keys in KEYS.items():
        assert set(keys) <= set(SCHEMAS[table].names), table


# ------------------------------------------------------------------ multi-process writers (items 8, 10, 11)
def _create_worker(root: str, barrier, worker: int) -> None:
    lake = LakeStore(root=root)
    barrier.wait()
    lake.replace("samples_raw", [{"fingerprint": "f" * 64, "dataset": "d", "dataset_hash": "h", "position": i, "sample_id": f"s{i}",
                                  "input": f"in {worker}", "references": [], "context": [], "metadata": "{}", "ratings": "{}"}
                                 for i in range(6)], {"fingerprint": "f" * 64})


def _append_worker(root: str, barrier, worker: int) -> None:
    lake = LakeStore(root=root)
    barrier.wait()
    for i in range(10):
        lake.append("runs", [_run_row(f"w{worker}-{i}")])


def _spawn(target, root: str, n: int) -> None:
    ctx = mp.get_context("spawn")  # deltalake's runtime does not survive fork
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=target, args=(root, barrier, w)) for w in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * n


@pytest.mark.slow
def test_two_writers_creating_a_missing_table_leave_one_copy(tmp_path):
    for trial in range(4):
        root = str(tmp_path / f"lake{trial}")
        _spawn(_create_worker, root, 2)
        frame = LakeStore(root=root).read("samples_raw")
        assert frame.height == 6 and frame["sample_id"].n_unique() == 6 and frame["input"].n_unique() == 1


@pytest.mark.slow
def test_concurrent_appends_all_land_once(tmp_path):
    root = str(tmp_path / "lake")
    _spawn(_append_worker, root, 4)
    runs = LakeStore(root=root).read("runs")
    assert runs.height == 40 and runs["run_id"].n_unique() == 40


def test_an_unresolvable_conflict_is_one_line(monkeypatch):
    from deltalake.exceptions import CommitFailedError

    monkeypatch.setenv("FACETLAKE_COMMIT_ATTEMPTS", "3")
    calls = []

    def always() -> None:
        calls.append(1)
        raise CommitFailedError("a concurrent transaction deleted the same data")

    with pytest.raises(LakeConflictError) as info:
        with_retries(always, table="scores", what="partition replace")
    assert len(calls) == 3
    message = str(info.value)
    assert "\n" not in message and "'scores'" in message and "3 attempts" in message and "re-run" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_cli_prints_a_conflict_in_one_line(lake_copy, monkeypatch, capsys):
    """A conflict that outlasts the retries reaches `facetlake score` as one line, exit 1."""
    from pipelines.cli import main

    def conflicted(*args, **kwargs):
        raise LakeConflictError("partition replace on table 'scores' still conflicted with concurrent writers after 12 attempts")

    monkeypatch.setattr("pipelines.runs.runner.rescore", conflicted)
    monkeypatch.setattr(sys, "argv", ["facetlake", "score", "--metric", "bleu", "--lake", lake_copy[0].root, "--force"])
    monkeypatch.delenv("FACETLAKE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "LakeConflictError: partition replace on table 'scores' still conflicted" in err
    assert len([line for line in err.splitlines() if line.strip()]) <= 3


# ------------------------------------------------------------------ orphan scores (item 7)
def test_scores_without_a_runs_record_are_redone_not_skipped(lake_copy, instance):
    from pipelines.runs.runner import committed_scores, rescore, summary_table

    lake, resolved = lake_copy
    fp = resolved.fingerprint
    assert committed_scores(lake).filter(pl.col("signature").str.starts_with("token_f1|")).height == 1
    # a run killed just after its scores commit: the rows stand, their runs record does not
    lake.replace("runs", [], {"asset": "scores"})
    lake.replace("summary", [], {"fingerprint": fp})
    assert committed_scores(lake).height == 0
    [done] = rescore(["token_f1"], lake, instance, fingerprint=fp)
    assert done["scored"] == ["token_f1"] and done["skipped"] == []
    assert committed_scores(lake).filter(pl.col("signature").str.starts_with("token_f1|")).height == 1
    summary = summary_table(lake, [fp])
    assert summary.filter(pl.col("metric") == "token_f1")["n_total"].to_list() == [40]
    again = rescore(["token_f1"], lake, instance, fingerprint=fp)
    assert again[0]["skipped"] == ["token_f1"]


# ------------------------------------------------------------------ types at the boundary (issue 15 kind 7)
def test_lake_refuses_mistyped_values_naming_column_and_row():
    with pytest.raises(LakeError, match=r"column 'value', row 2: '0\.5' \(str\) is not a number"):
        to_arrow("scores", [_score("s1"), _score("s2", "0.5")])
    with pytest.raises(LakeError, match=r"column 'value', row 1: True \(bool\)"):
        to_arrow("scores", [_score("s1", True)])
    frame = pl.DataFrame([_score("s1")]).with_columns(pl.lit("0.5").alias("value"))
    with pytest.raises(LakeError, match=r"column 'value', row 1: '0\.5'"):
        to_arrow("scores", frame)
    row = {"fingerprint": "f", "dataset": "d", "dataset_hash": "h", "position": 0, "sample_id": "s1", "input": "q",
           "references": [{"text": "x"}], "context": [], "metadata": "{}", "ratings": "{}"}
    with pytest.raises(LakeError, match=r"column 'references', row 1: \[\{'text': 'x'\}\].*pick the text field"):
        to_arrow("samples", [row])
    ok = to_arrow("scores", pl.DataFrame([_score("s1", 1)]).with_columns(pl.col("value").cast(pl.Int64)))
    assert ok.column("value").to_pylist() == [1.0]  # an integer into a float column loses nothing


def test_dataset_refuses_object_references_and_out_of_scale_ratings(tmp_path):
    from resources.datasets import DatasetError, make_dataset

    jsonl = tmp_path / "refs.jsonl"
    jsonl.write_text(json.dumps({"id": "a", "input": "q", "ref": "fine"}) + "\n"
                     + json.dumps({"id": "b", "input": "q", "ref": {"text": "x"}}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"refs\.jsonl:2: row 2: column 'ref' holds an object \{'text': 'x'\}, not text"):
        make_dataset({"kind": "file", "path": str(jsonl), "mapping": {"sample_id": "id", "references": "ref"}}).load()
    csv = tmp_path / "ratings.csv"
    for bad, shown in (("-3", "-3"), ("1e9", "1e\\+09")):
        csv.write_text(f"id,input,r\ns1,q,4\ns2,q,{bad}\n", encoding="utf-8")
        with pytest.raises(DatasetError, match=rf"ratings\.csv:3: row 2: rating column 'r' holds {shown}, outside the declared rating scale \[1, 5\]"):
            make_dataset({"kind": "file", "path": str(csv), "mapping": {"ratings": ["r"]}, "rating_scale": [1, 5]}).load()
    csv.write_text("id,input,r\ns1,q,4.5\ns2,q,\ns3,q,high\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"row 3: rating column 'r' holds 'high', not a number"):
        make_dataset({"kind": "file", "path": str(csv), "mapping": {"ratings": ["r"]}, "rating_scale": [1, 5]}).load()
    csv.write_text("id,input,r\ns1,q,4.5\ns2,q,\n", encoding="utf-8")
    loaded = make_dataset({"kind": "file", "path": str(csv), "mapping": {"ratings": ["r"]}, "rating_scale": [1, 5]}).load()
    assert loaded[0].ratings == {"r": 4.5} and loaded[1].ratings["r"] != loaded[1].ratings["r"]  # empty cell: NaN
    with pytest.raises(DatasetError, match=r"rating_scale must be \[low, high\]"):
        make_dataset({"kind": "file", "path": str(csv), "mapping": {"ratings": ["r"]}, "rating_scale": [5, 1]}).load()
