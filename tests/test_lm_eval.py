"""lm-evaluation-harness through the lake (issue 18), with lm-eval itself on the tiny local LM.

- the two shipped tasks through ``facetlake lm-eval`` end to end (samples, generations,
  lm_eval_responses, scores, summary, lm_eval_summary), checked against the files lm-eval wrote;
- an output folder written by lm-eval's own command line in the same test, imported with
  ``facetlake import lm-eval``: per-sample values equal samples_*.jsonl, aggregates equal
  results_*.json to 1e-12, and the fingerprint equals facetlake's own run of the same task;
- rescoring a generate-until task with bleu leaves ``generations`` at the same Delta version;
- an ``lm_eval:`` section in an evaluation spec (two models, one fingerprint);
- API models: lm-eval's chat-completions client against a real HTTP server on 127.0.0.1,
  every request in the outbound ledger; offline mode and anonymisation refuse before any
  request;
- the reader on format variants, and clear errors.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from resources.lake.resource import LakeStore

pytest.importorskip("lm_eval")

ROOT = Path(__file__).resolve().parents[1]
TASKS_DIR = ROOT / "resources" / "lm_eval" / "tasks"
QA, MC = "facetlake_selfaware_qa", "facetlake_bfcl_function_choice"
TOL = 1e-12
runner = CliRunner()
# pytest-xdist: one worker runs this module (the lm-eval lakes and folders are module-scoped; README "Tests")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("lm_eval")]


@pytest.fixture(scope="module", autouse=True)
def hub_offline():
    """No Hugging Face hub access in these tests (the shipped tasks need none)."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def tiny() -> str:
    from support.tiny_lm import build_tiny_lm

    return build_tiny_lm()


def _invoke(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output + (repr(result.exception) if result.exception else "")
    return result


def _sql(lake: LakeStore, statement: str) -> pl.DataFrame:
    from resources.sql import query

    return query(lake, statement)


def _records(samples_file: Path) -> list[dict]:
    return [json.loads(line) for line in samples_file.read_text(encoding="utf-8").splitlines() if line.strip()]


def _metric_name(metric: str, filt: str) -> str:
    return f"lm_eval:{metric}" if filt == "none" else f"lm_eval:{metric},{filt}"


def _assert_scores_equal_samples_file(lake: LakeStore, fingerprint: str, model: str, samples_file: Path) -> int:
    """Every per-sample metric value lm-eval logged equals the lake's score (same doc, filter,
    metric): numbers exactly (they are the same float64), corpus items as unscored rows
    carrying the item. Returns the number of values compared."""
    scores = LakeStore(root=lake.root).read("scores", where={"fingerprint": fingerprint, "model": model})
    by_key = {(r["sample_id"], r["metric"]): r for r in scores.iter_rows(named=True)}
    compared = 0
    for rec in _records(samples_file):
        for metric in rec["metrics"]:
            row = by_key[(str(rec["doc_id"]), _metric_name(metric, rec["filter"]))]
            value = rec[metric]
            if isinstance(value, (int, float)):
                assert row["status"] == "scored" and row["value"] == float(value), (rec["doc_id"], metric, row)
            else:
                assert row["status"] == "unscored" and row["value"] is None
                assert json.loads(row["detail"])["item"] == value
            compared += 1
    n_metric_rows = scores.filter(pl.col("metric").str.starts_with("lm_eval:")).height
    assert compared == n_metric_rows  # nothing in the lake that lm-eval did not log
    return compared


def _assert_aggregates_equal_results(lake: LakeStore, fingerprint: str, model: str, task: str, results_file: Path) -> int:
    """lm-eval's aggregates (results_*.json) equal facetlake's numbers to 1e-12: recomputed
    here from the lake's per-sample scores (mean and sd/sqrt(n) for mean aggregations), and
    as stored in lm_eval_summary (which also recomputes corpus aggregations with lm-eval's
    own function). Returns the number of aggregates compared."""
    results = json.loads(results_file.read_text(encoding="utf-8"))["results"][task]
    scores = lake.read("scores", where={"fingerprint": fingerprint, "model": model})
    summary = lake.read("lm_eval_summary", where={"fingerprint": fingerprint, "model": model})
    compared = 0
    for key, value in results.items():
        if "," not in key or "_stderr," in key:
            continue
        metric, filt = key.split(",", 1)
        row = summary.filter(pl.col("lm_eval_metric") == key).row(0, named=True)
        assert abs(row["lm_eval_value"] - value) == 0.0
        assert abs(row["facetlake_value"] - value) <= TOL, (key, row)
        assert row["agrees"] is True
        values = scores.filter((pl.col("metric") == _metric_name(metric, filt)) & (pl.col("status") == "scored"))["value"].to_numpy()
        if row["aggregation"] == "mean":
            assert abs(float(np.mean(values)) - value) <= TOL
            stderr = results[f"{metric}_stderr,{filt}"]  # lm-eval's closed-form mean_stderr
            assert isinstance(stderr, float), stderr
            assert abs(float(np.std(values, ddof=1) / math.sqrt(values.size)) - stderr) <= TOL
            assert abs(row["facetlake_stderr"] - stderr) <= TOL
            assert row["ci_low"] <= row["facetlake_value"] <= row["ci_high"]
        compared += 1
    return compared


# --------------------------------------------------------------------------- shipped tasks, end to end
@pytest.fixture(scope="module")
def cli_lake(tmp_path_factory, tiny, instance):
    """Both shipped tasks through ``facetlake lm-eval`` on the tiny LM (6 docs, 1-shot)."""
    root = tmp_path_factory.mktemp("lm_eval_cli") / "lake"
    result = _invoke(["lm-eval", f"{QA},{MC}", "--model", f"hf:{tiny}", "--model-name", "tiny", "--limit", "6",
                      "--num-fewshot", "1", "--device", "cpu", "--lake", str(root)])
    return LakeStore(root=str(root)), result.output


def test_shipped_tasks_run_end_to_end_into_the_lake(cli_lake):
    lake, output = cli_lake
    assert "yes" in output and "NO" not in output  # every aggregate agrees (printed table)
    evaluations = lake.read("evaluations").sort("name")
    assert evaluations["name"].to_list() == [f"lm-eval-{MC}", f"lm-eval-{QA}"]
    outputs = Path(lake.root) / "_lm_eval_outputs"
    results_file = next(outputs.rglob("results_*.json"))
    results = json.loads(results_file.read_text())
    assert results["n-shot"] == {MC: 1, QA: 1}
    for row in evaluations.iter_rows(named=True):
        task = row["dataset"]
        fp = row["fingerprint"]
        samples_file = next(outputs.rglob(f"samples_{task}_*.jsonl"))
        records = _records(samples_file)
        filters = sorted({r["filter"] for r in records})
        inputs = json.loads(row["fingerprint_inputs"])
        assert inputs["adapter"]["task"] == task and inputs["adapter"]["fewshot"]["num_fewshot"] == 1
        from resources.lm_eval.common import config_hash

        assert inputs["adapter"]["task_config_sha256"] == config_hash(results["configs"][task])
        # samples: one per doc, the rendered prompt (with its 1-shot example) as input
        samples = lake.read("samples", where={"fingerprint": fp}).sort("position")
        assert samples.height == 6
        first = records[0]
        assert samples["input"][0] == first["arguments"]["gen_args_0"]["arg_0"] and samples["input"][0].count("\n\n") >= 1
        # generations and lm_eval_responses: one row per doc, one per doc x filter
        gens = lake.read("generations", where={"fingerprint": fp, "model": "tiny"})
        responses = lake.read("lm_eval_responses", where={"fingerprint": fp, "model": "tiny"})
        assert gens.height == 6 and set(gens["status"]) == {"ok"} and set(gens["backend"]) == {"lm_eval"}
        assert responses.height == len(records) == 6 * len(filters)
        for rec in records:
            resp = responses.filter((pl.col("sample_id") == str(rec["doc_id"])) & (pl.col("filter") == rec["filter"])).row(0, named=True)
            assert json.loads(resp["resps"]) == rec["resps"] and json.loads(resp["filtered_resps"]) == rec["filtered_resps"]
        # per-sample values and aggregates
        assert _assert_scores_equal_samples_file(lake, fp, "tiny", samples_file) == 6 * sum(len(r["metrics"]) for r in records[:1]) * len(filters)
        assert _assert_aggregates_equal_results(lake, fp, "tiny", task, results_file) >= 1
        summary = lake.read("summary", where={"fingerprint": fp})
        assert set(summary["metric"]) == {_metric_name(m, f) for m in records[0]["metrics"] for f in filters}
    # multiple choice: the stored output is the choice lm-eval's acc grades (highest log-likelihood)
    mc_fp = evaluations.filter(pl.col("dataset") == MC)["fingerprint"][0]
    joined = _sql(lake, f"""
        select g.sample_id, g.output, s."references"[1] as gold, r.loglikelihoods, sc.value as acc
        from generations g join samples s using (fingerprint, sample_id)
        join lm_eval_responses r using (fingerprint, model, sample_id)
        join scores sc using (fingerprint, model, sample_id)
        where g.fingerprint = '{mc_fp}' and sc.metric = 'lm_eval:acc'""")
    assert joined.height == 6
    for row in joined.iter_rows(named=True):
        assert row["acc"] == float(row["output"] == row["gold"])
        assert len(row["loglikelihoods"]) >= 2 and all(v < 0 for v in row["loglikelihoods"])
    scores = lake.read("scores").filter(pl.col("metric") == "lm_eval:acc").row(0, named=True)
    signature = dict(part.split(":", 1) for part in scores["signature"].split("|")[1:])
    assert signature["task"] == MC and signature["task_version"] == "1.0" and signature["lm_eval"] == results["lm_eval_version"]
    assert signature["config_sha256"] == config_hash(results["configs"][MC]) and scores["direction"] == "maximize"


def test_rescore_generate_until_with_bleu_leaves_generations_unchanged(cli_lake, tmp_path):
    import sacrebleu

    lake, _ = cli_lake
    root = tmp_path / "lake"
    shutil.copytree(lake.root, root)
    lake = LakeStore(root=str(root))
    qa_fp = lake.read("evaluations").filter(pl.col("dataset") == QA)["fingerprint"][0]
    before = lake.version("generations")
    lm_before = lake.read("scores").filter(pl.col("metric").str.starts_with("lm_eval:")).sort(["fingerprint", "metric", "sample_id"])
    _invoke(["score", "--metric", "bleu", "--fingerprint", qa_fp[:12], "--lake", str(root)])
    assert lake.version("generations") == before
    bleu = lake.read("scores", where={"fingerprint": qa_fp, "model": "tiny"}).filter(pl.col("metric") == "bleu")
    assert bleu.height == 6 and set(bleu["status"]) == {"scored"}
    # facetlake's BLEU of the lm-eval output against the references, as sacrebleu computes it
    gens = lake.read("generations", where={"fingerprint": qa_fp}).join(lake.read("samples", where={"fingerprint": qa_fp}), on="sample_id")
    for row in gens.iter_rows(named=True):
        refs = list(row["references"])
        expected = sacrebleu.sentence_bleu(row["output"], refs).score
        assert bleu.filter(pl.col("sample_id") == row["sample_id"])["value"][0] == pytest.approx(expected, abs=1e-9)
    lm_after = lake.read("scores").filter(pl.col("metric").str.starts_with("lm_eval:")).sort(["fingerprint", "metric", "sample_id"])
    assert lm_after.select("sample_id", "metric", "value", "signature").equals(lm_before.select("sample_id", "metric", "value", "signature"))
    from assets.freshness import stale_verdicts  # the new scores' verdicts, lm-eval's summary included (issue 26)

    assert stale_verdicts(lake, qa_fp) == [] and "bleu" in set(lake.read("summary", where={"fingerprint": qa_fp})["metric"])


# --------------------------------------------------------------------------- a folder written by lm-eval's CLI
@pytest.fixture(scope="module")
def lm_eval_cli_folder(tmp_path_factory, tiny):
    """An output folder written by lm-eval's own command line (``lm_eval run ... --log_samples``):
    the shipped multiple-choice task and a variant of the QA task with one target and lm-eval's
    corpus BLEU (a non-mean aggregation)."""
    tasks = tmp_path_factory.mktemp("tasks")
    for f in TASKS_DIR.iterdir():
        if f.suffix in (".yaml", ".py"):
            shutil.copy(f, tasks / f.name)
    (tasks / "qa_first.yaml").write_text(
        "include: facetlake_selfaware_qa.yaml\ntask: facetlake_selfaware_qa_first\ntag: []\n"
        'doc_to_target: "{{answer[0]}}"\nmetric_list:\n'
        "  - {metric: exact_match, aggregation: mean, higher_is_better: true}\n"
        "  - {metric: bleu, aggregation: bleu, higher_is_better: true}\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("lm_eval_cli_out")
    env = {**os.environ, "FACETLAKE_DATA": str(ROOT / "data"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    cmd = [str(Path(sys.executable).parent / "lm_eval"), "run", "--model", "hf", "--model_args", f"pretrained={tiny}",
           "--tasks", f"{MC},facetlake_selfaware_qa_first", "--include_path", str(tasks), "--limit", "6", "--num_fewshot", "1",
           "--device", "cpu", "--output_path", str(out), "--log_samples"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_import_folder_written_by_lm_eval_matches_its_files(lm_eval_cli_folder, cli_lake, tmp_path):
    source_lake, _ = cli_lake
    root = tmp_path / "lake"
    shutil.copytree(source_lake.root, root)
    lake = LakeStore(root=str(root))
    result = _invoke(["import", "lm-eval", str(lm_eval_cli_folder), "--model-name", "tiny-cli", "--lake", str(root)])
    assert "NO" not in result.output
    results_file = next(lm_eval_cli_folder.rglob("results_*.json"))
    for task in (MC, "facetlake_selfaware_qa_first"):
        row = lake.read("evaluations").filter(pl.col("dataset") == task).row(0, named=True)
        fp = row["fingerprint"]
        samples_file = next(lm_eval_cli_folder.rglob(f"samples_{task}_*.jsonl"))
        assert _assert_scores_equal_samples_file(lake, fp, "tiny-cli", samples_file) > 0
        assert _assert_aggregates_equal_results(lake, fp, "tiny-cli", task, results_file) >= 2
    # the same task, settings and docs: the folder lm-eval's CLI wrote and facetlake's own run
    # share one fingerprint, so the two runs sit side by side under one evaluation
    mc = lake.read("evaluations").filter(pl.col("dataset") == MC)
    assert mc.height == 1
    fp = mc["fingerprint"][0]
    assert set(lake.read("generations", where={"fingerprint": fp})["model"]) == {"tiny", "tiny-cli"}
    both = lake.read("scores", where={"fingerprint": fp}).filter(pl.col("metric") == "lm_eval:acc_norm")
    pivot = both.pivot(on="model", index="sample_id", values="value")
    assert pivot.height == 6 and (pivot["tiny"] == pivot["tiny-cli"]).all()  # same model, same greedy numbers
    # corpus BLEU: per-sample items kept (unscored), the aggregate recomputed with lm-eval's own bleu
    qa_fp = lake.read("evaluations").filter(pl.col("dataset") == "facetlake_selfaware_qa_first")["fingerprint"][0]
    bleu = lake.read("lm_eval_summary", where={"fingerprint": qa_fp}).filter(pl.col("aggregation") == "bleu")
    assert bleu.height == 2 and bleu["agrees"].all() and "recomputed" in bleu["detail"][0]
    comparisons = lake.read("comparisons", where={"fingerprint": fp})
    assert {"tiny", "tiny-cli"} <= set(comparisons["model"].drop_nulls())


def test_import_folder_written_by_another_lm_eval_version(cli_lake, tmp_path):
    """tests/data/lm_eval_0_4_11: the shipped tasks, 6 docs, 1-shot, written by lm-eval 0.4.11's
    own command line (its README says how). Per-sample values and aggregates match its files,
    the signatures name 0.4.11, and it joins the evaluations of facetlake's own 0.4.13 run
    (same task configs, few-shot settings and docs: same fingerprints). The fixture's task
    configs hold the source of resources/lm_eval/tasks/utils.py's loaders: change a loader
    and regenerate the fixture."""
    folder = ROOT / "tests" / "data" / "lm_eval_0_4_11"
    source_lake, _ = cli_lake
    root = tmp_path / "lake"
    shutil.copytree(source_lake.root, root)
    lake = LakeStore(root=str(root))
    before = {r["dataset"]: r["fingerprint"] for r in lake.read("evaluations").iter_rows(named=True)}
    _invoke(["import", "lm-eval", str(folder), "--model-name", "tiny-0411", "--lake", str(root)])
    after = {r["dataset"]: r["fingerprint"] for r in lake.read("evaluations").iter_rows(named=True)}
    assert after == before  # no new evaluation: the 0.4.11 output joined the existing two
    results_file = next(folder.rglob("results_*.json"))
    for task in (QA, MC):
        fp = after[task]
        samples_file = next(folder.rglob(f"samples_{task}_*.jsonl"))
        assert _assert_scores_equal_samples_file(lake, fp, "tiny-0411", samples_file) > 0
        assert _assert_aggregates_equal_results(lake, fp, "tiny-0411", task, results_file) >= 2
        signatures = set(lake.read("scores", where={"fingerprint": fp, "model": "tiny-0411"})["signature"])
        assert all("|lm_eval:0.4.11|" in sig for sig in signatures)
        assert set(lake.read("generations", where={"fingerprint": fp})["model"]) == {"tiny", "tiny-0411"}


# --------------------------------------------------------------------------- an lm_eval: section in a spec
def test_spec_with_lm_eval_section_runs_every_model_under_one_fingerprint(tmp_path, tiny, instance):
    import yaml

    spec = {"name": "bfcl-choice", "lm_eval": {"task": MC, "limit": 4, "num_fewshot": 0, "device": "cpu", "bootstrap_iters": 0},
            "models": {"tiny-a": f"hf:{tiny}", "tiny-b": f"hf:{tiny}"}, "metrics": ["exact_match"]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    root = tmp_path / "lake"
    _invoke(["run", str(path), "--lake", str(root)])
    lake = LakeStore(root=str(root))
    row = lake.read("evaluations").row(0, named=True)
    assert row["name"] == "bfcl-choice" and lake.read("evaluations").height == 1
    stored = json.loads(row["spec"])
    assert set(stored["lm_eval"]["runs"]) == {"tiny-a", "tiny-b"} and stored["lm_eval"]["task"] == MC
    scores = lake.read("scores", where={"fingerprint": row["fingerprint"]})
    assert set(scores["model"]) == {"tiny-a", "tiny-b"}
    # facetlake's exact_match of the chosen choice equals lm-eval's acc, sample by sample
    wide = scores.filter(pl.col("metric").is_in(["exact_match", "lm_eval:acc"])).pivot(on="metric", index=["model", "sample_id"], values="value")
    assert wide.height == 8 and (wide["exact_match"] == wide["lm_eval:acc"]).all()
    summary = lake.read("lm_eval_summary", where={"fingerprint": row["fingerprint"]})
    assert summary.height == 4 and summary["agrees"].all()
    from assets.freshness import freshness  # every verdict, lm-eval's summary too, read the scores stored now (issue 26)

    state = freshness(lake, [row["fingerprint"]])[row["fingerprint"]]
    assert "lm_eval_summary" in state.assets and state.stale == []
    # lm_eval_summary's partition set holds lm-eval evaluations only (issue 26, fault 12)
    assert row["partition_key"] in instance.get_dynamic_partitions("lm_eval_evaluation")
    assert row["partition_key"] not in instance.get_dynamic_partitions("agent_evaluation")


# --------------------------------------------------------------------------- API models and the outbound path
KEY = "sk-lm-eval-SENTINEL-31c0"


@pytest.fixture(scope="module")
def server(tiny):
    from support.openai_server import TinyOpenAIServer

    srv = TinyOpenAIServer(tiny, model_name="tiny", api_key=KEY).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("mode", ["completions", "chat"])
def test_api_model_through_lm_eval_is_ledgered(mode, server, tmp_path, monkeypatch, instance):
    """lm-eval's local-completions (prompts as text: no tokenizer) and local-chat-completions
    clients against a real HTTP server; every request is in the outbound ledger."""
    monkeypatch.setenv("LM_EVAL_TEST_KEY", KEY)
    server.reset()
    root = tmp_path / "lake"
    extra = ["--model-args", "tokenizer_backend=none"] if mode == "completions" else []
    _invoke(["lm-eval", QA, "--model", f"api:tiny@{server.base_url}", "--api-mode", mode, "--api-key-env", "LM_EVAL_TEST_KEY",
             "--limit", "3", *extra, "--bootstrap-iters", "0", "--lake", str(root)])
    lake = LakeStore(root=str(root))
    ledger = lake.read("outbound_ledger")
    assert server.calls == 3 and ledger.height == 3  # one ledger row per request that reached the server
    assert set(ledger["purpose"]) == {"lm_eval:generate_until"} and set(ledger["api_model"]) == {"tiny"}
    assert set(ledger["host"]) == {"127.0.0.1"} and not ledger["anonymised"].any()
    assert set(ledger["status"]) == {"completed"} and ledger["completed_at"].null_count() == 0  # no intent left open
    from resources.privacy.outbound import text_sha256

    sent = [json.dumps(body["messages"], ensure_ascii=False, sort_keys=True) if mode == "chat" else body["prompt"]
            for body in server.received]
    assert all(isinstance(text, str) and "Question:" in text for text in sent)
    assert sorted(ledger["text_sha256"]) == sorted(text_sha256([text]) for text in sent)
    gens = lake.read("generations")
    assert gens.height == 3 and set(gens["status"]) == {"ok"}
    for path in Path(root).rglob("*"):  # the key is never written anywhere in the lake or lm-eval's output
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_offline_mode_refuses_api_models_before_any_request(server, tmp_path, monkeypatch):
    server.reset()
    monkeypatch.setenv("FACETLAKE_OFFLINE", "1")
    result = runner.invoke(app, ["lm-eval", QA, "--model", f"api:tiny@{server.base_url}", "--limit", "2", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 1 and "offline mode" in result.output
    assert server.received == [] and not (tmp_path / "lake").exists()


def test_anonymisation_refuses_lm_eval_api_models(server, tmp_path, monkeypatch):
    server.reset()
    result = runner.invoke(app, ["lm-eval", QA, "--model", f"api:tiny@{server.base_url}", "--anonymise", "rule_based",
                                 "--limit", "2", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 1 and "cannot anonymise" in " ".join(result.output.split()) and server.received == []
    monkeypatch.setenv("FACETLAKE_ANONYMISE_FORCE", "rule_based")  # the administrator's policy applies as well
    # the policy's warning (the CLI's main() prints it as one line; CliRunner calls the app directly)
    with pytest.warns(UserWarning, match="forced by the administrator"):
        result = runner.invoke(app, ["lm-eval", QA, "--model", f"api:tiny@{server.base_url}", "--limit", "2", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 1 and "forced by the administrator" in " ".join(result.output.split()) and server.received == []


# --------------------------------------------------------------------------- the reader and its errors
def test_shipped_task_data_is_built_from_the_shipped_files():
    sys.path.insert(0, str(TASKS_DIR))
    try:
        import utils as task_utils
    finally:
        sys.path.remove(str(TASKS_DIR))
    qa = task_utils.selfaware_qa()
    raw = json.loads((ROOT / "data" / "selfaware" / "SelfAware.json").read_text())["example"]
    answerable = [r for r in raw if r["answerable"] and r["answer"]]
    assert len(qa["train"]) == task_utils.QA_FEWSHOT_POOL and len(qa["train"]) + len(qa["test"]) == len(answerable)
    assert qa["test"][0]["answer"] == [str(a) for a in answerable[task_utils.QA_FEWSHOT_POOL]["answer"]]
    mc = task_utils.bfcl_function_choice()
    truth = {json.loads(l)["id"]: json.loads(l)["ground_truth"] for l in (ROOT / "data/bfcl/possible_answer/BFCL_v4_multiple.json").read_text().splitlines() if l.strip()}
    rows = list(mc["train"]) + list(mc["test"])
    assert len(rows) > 150
    for row in rows:
        assert row["functions"][row["gold"]] == next(iter(truth[row["id"]][0]))
        assert 2 <= len(row["functions"]) == len(row["descriptions"])


def test_reader_accepts_older_sample_layouts(lm_eval_cli_folder, tmp_path):
    """lm-eval versions differ in how a samples line is laid out: arguments as nested lists
    (the in-memory form) instead of gen_args_i/arg_j, raw numbers instead of strings in resps,
    no ``metrics`` list, no lm_eval_version in the results. The reader maps them the same."""
    from resources.lm_eval.results import find_task_runs

    src = next(lm_eval_cli_folder.rglob("results_*.json")).parent
    dst = tmp_path / "old" / src.name
    dst.mkdir(parents=True)
    results = json.loads(next(src.glob("results_*.json")).read_text())
    results.pop("lm_eval_version")
    date = next(src.glob("results_*.json")).stem[len("results_"):]
    (dst / f"results_{date}.json").write_text(json.dumps(results))
    for f in src.glob(f"samples_{MC}_*.jsonl"):
        lines = []
        for rec in _records(f):
            rec["arguments"] = [[a["arg_0"], a["arg_1"]] for a in rec["arguments"].values()]
            rec["resps"] = [[[float(r[0][0]), r[0][1] == "True"]] for r in rec["resps"]]
            rec.pop("metrics")
            lines.append(json.dumps(rec))
        (dst / f.name).write_text("\n".join(lines) + "\n")
    old = find_task_runs(dst.parent, [MC])[0]
    new = next(r for r in find_task_runs(src) if r.task == MC)
    assert [s.input for s in old.samples()] == [s.input for s in new.samples()]
    assert [s.references for s in old.samples()] == [s.references for s in new.samples()]
    keep = ("sample_id", "filter", "loglikelihoods", "is_greedy", "metrics", "config_sha256")
    assert [{k: r[k] for k in keep} for r in old.response_rows()] == [{k: r[k] for k in keep} for r in new.response_rows()]
    assert old.lm_eval_version == "unknown" and old.output(old.docs[0]) == new.output(new.docs[0])


def test_clear_errors(tmp_path, tiny, lm_eval_cli_folder):
    from resources.catalog.spec import EvaluationSpec, SpecError
    from resources.lm_eval.common import LmEvalError
    from resources.lm_eval.results import find_task_runs
    from resources.lm_eval.models import lm_eval_model

    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["import", "lm-eval", str(empty), "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 1 and "no results_*.json" in result.output
    no_samples = tmp_path / "nosamples" / "m"
    no_samples.mkdir(parents=True)
    shutil.copy(next(lm_eval_cli_folder.rglob("results_*.json")), no_samples)
    with pytest.raises(LmEvalError, match="--log_samples"):
        find_task_runs(no_samples)
    with pytest.raises(LmEvalError, match="not found"):
        find_task_runs(lm_eval_cli_folder, ["arc_easy"])
    with pytest.raises(LmEvalError, match="precomputed"):
        lm_eval_model("precomputed:out.jsonl")
    result = runner.invoke(app, ["lm-eval", "facetlake_selfaware_qaa", "--model", f"hf:{tiny}", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 1 and "did you mean" in result.output and QA in result.output
    with pytest.raises(SpecError, match="one lm-eval task"):
        EvaluationSpec.from_mapping({"name": "x", "lm_eval": {"task": "a,b"}, "models": {"m": "hf:/x"}})
    with pytest.raises(SpecError, match="unknown keys"):
        EvaluationSpec.from_mapping({"name": "x", "lm_eval": {"task": "a", "shots": 3}, "models": {"m": "hf:/x"}})


def test_a_retried_lm_eval_request_leaves_its_failed_attempt_in_the_ledger(server, tmp_path, monkeypatch, instance):
    """The server answers the first request with 500; lm-eval retries it. Every attempt that
    reached the server is a ledger row: the refused one ``failed``, the others ``completed``
    (none left as an open ``intent``)."""
    monkeypatch.setenv("LM_EVAL_TEST_KEY", KEY)
    server.reset()
    server.fail_next([500])
    root = tmp_path / "lake"
    _invoke(["lm-eval", QA, "--model", f"api:tiny@{server.base_url}", "--api-mode", "chat", "--api-key-env", "LM_EVAL_TEST_KEY",
             "--limit", "2", "--bootstrap-iters", "0", "--lake", str(root)])
    ledger = LakeStore(root=str(root)).read("outbound_ledger")
    assert len(server.received) == 3 and server.calls == 2 and ledger.height == 3  # 3 requests reached it, 2 were answered
    assert sorted(ledger["status"]) == ["completed", "completed", "failed"]
    assert ledger["completed_at"].null_count() == 0
