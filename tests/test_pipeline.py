"""End to end on a temporary lake: materialise, rescore without regenerating, idempotence."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from metric_ops import Direction, Metric, Score
from pipelines.runs.runner import materialize_model, rescore, run_evaluation
from pipelines.runs.register import register
from resources.sql import query
from tests.conftest import small_spec


def test_evaluation_writes_every_table_with_the_contract_columns(evaluated_lake):
    lake, resolved = evaluated_lake
    assert {"samples", "generations", "scores", "runs", "summary", "evaluations", "evaluation_models", "pairs"} <= set(lake.tables())
    scores = lake.read("scores")
    assert {"model", "fingerprint", "dataset", "sample_id", "metric", "value", "direction", "dimension",
            "status", "detail", "signature"} <= set(scores.columns)
    assert set(scores["fingerprint"].unique()) == {resolved.fingerprint}
    assert scores.filter(pl.col("metric") == "bleu").height == 40
    # human ratings are scores too
    assert scores.filter(pl.col("metric") == "human:naturalness").height == 40
    generations = lake.read("generations")
    assert generations.height == 40 and set(generations["status"]) == {"ok"}
    # the precomputed backend stored the real SF-RES system output
    first = generations.filter(pl.col("sample_id") == "0")["output"].item()
    assert first == "Do you not to restaurant restaurants that are ?"


def test_scores_equal_direct_metric_computation(evaluated_lake):
    import sacrebleu

    lake, resolved = evaluated_lake
    scores = lake.read("scores", where={"metric": "bleu"})
    by_id = {r["sample_id"]: r["value"] for r in scores.iter_rows(named=True)}
    for sample in resolved.samples[:10]:
        expected = sacrebleu.sentence_bleu(sample.metadata["system_output"], list(sample.references)).score
        assert abs(by_id[sample.sample_id] - expected) <= 1e-9


def test_runs_table_records_provenance_of_each_asset(evaluated_lake):
    lake, resolved = evaluated_lake
    runs = lake.read("runs")
    assert set(runs["asset"]) >= {"samples", "generations", "scores", "summary"}
    gen = runs.filter(pl.col("asset") == "generations").row(0, named=True)
    provenance = json.loads(gen["provenance"])
    assert provenance["model_identity"] == {"backend": "precomputed", "column": "system_output"}
    assert gen["table_version"] is not None and gen["mode"] in ("online", "offline")
    samples_run = json.loads(runs.filter(pl.col("asset") == "samples").row(0, named=True)["provenance"])
    assert samples_run["dataset_hash"] == resolved.dataset_hash


def test_summary_means_equal_sql_over_scores(evaluated_lake):
    lake, _ = evaluated_lake
    summary = lake.read("summary").filter(pl.col("metric") == "token_f1").row(0, named=True)
    direct = query(lake, "select avg(value) m, count(*) n from scores where metric = 'token_f1' and status = 'scored'").row(0, named=True)
    assert abs(summary["mean"] - direct["m"]) < 1e-12 and summary["n_scored"] == direct["n"] == 40


def test_rescoring_adds_one_metric_without_regenerating(lake_copy, instance):
    lake, resolved = lake_copy
    gen_version = lake.version("generations")
    before = lake.read("scores")
    done = rescore(["quasi_exact_match" if "quasi_exact_match" in __import__("metric_ops").REGISTRY else "token_f1"],
                   lake, instance, force=True)
    assert done and done[0]["scored"]
    assert lake.version("generations") == gen_version  # generations never touched
    after = lake.read("scores")
    # the other metrics' rows are the very same rows (same run id, same values)
    keep = ["sample_id", "metric", "value", "run_id"]
    others = [m for m in before["metric"].unique() if m not in done[0]["scored"]]
    assert before.filter(pl.col("metric").is_in(others)).select(keep).sort(keep).equals(
        after.filter(pl.col("metric").is_in(others)).select(keep).sort(keep)
    )


def test_rescoring_a_new_metric_then_skipping_it(lake_copy, instance):
    lake, resolved = lake_copy
    gen_version = lake.version("generations")
    n_before = lake.read("scores").height
    # chrF is not in the evaluation's metric list: rescoring adds it
    new_metric = "chrf" if "chrf" in __import__("metric_ops").REGISTRY else "test_len_metric"
    done = rescore([new_metric], lake, instance)
    assert done[0]["scored"] == [new_metric]
    scores = lake.read("scores")
    added = scores.height - n_before
    assert added == 40 * len(__import__("metric_ops").REGISTRY.get_class(new_metric).emitted())
    assert lake.version("generations") == gen_version
    # a second call finds the same signature already stored and skips it
    again = rescore([new_metric], lake, instance)
    assert again[0]["scored"] == [] and again[0]["skipped"] == [new_metric]
    assert lake.read("scores").height == scores.height


def test_rematerialising_a_partition_is_idempotent(lake_copy, instance):
    lake, resolved = lake_copy
    before = lake.read("scores").select("sample_id", "metric", "value").sort(["sample_id", "metric"])
    materialize_model("sfres-system", resolved.fingerprint, lake, instance)
    after = lake.read("scores").select("sample_id", "metric", "value").sort(["sample_id", "metric"])
    assert after.equals(before)
    assert lake.read("generations").height == 40


def test_a_sample_that_breaks_a_metric_is_an_error_row_in_the_asset(tmp_path, instance):
    class ExplodesOnQuestionMark(Metric):
        """Raises on outputs ending with '?' (test metric for error isolation)."""

        name = "test_explodes_on_question"
        direction = Direction.MAXIMIZE
        dimension = "baseline_grounding"
        value_range = (0.0, float("inf"))  # a word count

        def score_batch(self, samples, outputs):
            out = []
            for o in outputs:
                if o.strip().endswith("?"):
                    raise RuntimeError("question outputs are not supported")
                out.append({self.name: Score(float(len(o.split())))})
            return out

    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(small_spec(name="err", limit=30, metrics=["test_explodes_on_question", "bleu"]), lake, instance)
    scores = lake.read("scores", where={"metric": "test_explodes_on_question"})
    errors = scores.filter(pl.col("status") == "error")
    scored = scores.filter(pl.col("status") == "scored")
    gens = lake.read("generations")
    n_questions = sum(o.strip().endswith("?") for o in gens["output"])
    assert errors.height == n_questions > 0 and scored.height == 30 - n_questions
    assert "question outputs are not supported" in json.loads(errors["detail"][0])["error"]
    assert lake.read("scores", where={"metric": "bleu"}).filter(pl.col("status") == "scored").height == 30


def test_missing_precomputed_outputs_are_error_generations_not_a_crash(tmp_path, instance):
    from resources.lake.resource import LakeStore

    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("\n".join(json.dumps({"sample_id": str(i), "output": "a restaurant"}) for i in range(5)))
    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = small_spec(name="partial", limit=8)
    spec.models = {"partial-model": f"precomputed:{outputs}"}
    from resources.backends import OutputIdsWarning

    with pytest.warns(OutputIdsWarning, match="3 samples have no output"):
        run_evaluation(spec, lake, instance)
    gens = lake.read("generations")
    assert gens.filter(pl.col("status") == "error").height == 3
    bleu = lake.read("scores", where={"metric": "bleu"})
    assert bleu.filter(pl.col("status") == "unscored").height == 3  # no output -> nothing to measure


def test_duplicate_sample_ids_are_refused_and_the_check_lists_the_offending_rows(tmp_path, instance):
    from assets.samples import validate_samples
    from resources.datasets import DatasetError
    from resources.lake.resource import LakeStore

    data = tmp_path / "dup.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"id": "1", "input": "a", "gold": "x"}, {"id": "2", "input": "b", "gold": "y"}, {"id": "1", "input": "c", "gold": "z"},
        {"id": "3", "input": "  ", "gold": "w"},
    ]))
    spec = small_spec(name="dups")
    spec.dataset = {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "input", "references": "gold"}}
    lake = LakeStore(root=str(tmp_path / "lake"))
    # outputs and scores are keyed by sample id: a run over duplicates is refused up front
    with pytest.raises(DatasetError, match=r"duplicate sample id\(s\): \['1'\]"):
        register(spec, lake, instance)
    assert not lake.exists("evaluations")
    # the Great Expectations checks name the offending rows
    checks = {c.check_name: c for c in validate_samples(spec.make_dataset().load(), "file")}
    unique = checks["check_samples_unique_ids"]
    assert unique.passed is False
    assert unique.metadata["duplicate_ids"].value == ["1"]
    assert unique.metadata["offending_rows"].value == [1, 3]
    required = checks["check_samples_required_fields"]
    assert required.passed is False and required.metadata["offending_rows"].value == {"input": ["3"]}


def test_definitions_list_every_asset_check_sensor_and_schedule():
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    assets = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"samples", "generations", "scores", "summary"} <= assets
    checks = {k.name for k in graph.asset_check_keys}
    assert {"check_samples_required_fields", "check_samples_unique_ids", "check_samples_ratings_in_range"} <= checks
    assert {s.name for s in defs.sensors} >= {"inbox_sensor", "evaluation_scheduler", "analysis_sensor"}
    assert {"evaluation_job", "samples_job", "analysis_job"} <= {j.name for j in defs.resolve_all_job_defs()}
    deps = {k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys} for k in graph.get_all_asset_keys()}
    assert deps["generations"] == {"samples", "evaluation_models"} and deps["scores"] == {"generations", "annotations", "episodes"} and deps["annotations"] == {"generations"} and "scores" in deps["summary"]


@pytest.mark.slow  # spawns the facetlake command / a Dagster run in a subprocess (> 10 s)
def test_workspace_yaml_loads_the_code_location():
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT

    out = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(PROJECT_ROOT / "workspace.yaml")],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow  # spawns the facetlake command / a Dagster run in a subprocess (> 10 s)
def test_a_run_killed_midway_does_not_block_the_next_one(tmp_path, dagster_home):
    """A CLI run killed with SIGKILL must not leave a concurrency-pool claim that blocks later runs."""
    import os
    import signal
    import subprocess
    import sys
    import time

    lake = tmp_path / "lake"
    cmd = [sys.executable, "-m", "pipelines.cli", "demo", "--lake", str(lake), "--limit", "30"]
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (lake / "samples" / "_delta_log").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "qags-system" in rerun.stdout
