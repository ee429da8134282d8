"""Live generation: the hf backend on a tiny local causal LM, the API backend over real HTTP
(tests/support/openai_server.py on 127.0.0.1), end to end through the CLI and Dagster,
resume after a kill, reuse across an annotator change, and vLLM where installed."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from resources.backends import BackendError, GenerationRequest, ModelBackends
from resources.datasets import make_dataset
from resources.lake.resource import LakeStore
from support.openai_server import TinyOpenAIServer
from support.tiny_lm import build_tiny_lm

# pytest-xdist: one worker runs this module (the tiny model's HTTP server is module-scoped; README "Tests")
pytestmark = pytest.mark.xdist_group("live_generation")

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-SENTINEL-7f3a9c1e55"
KEY_ENV = "FACETLAKE_TEST_API_KEY"
SETTINGS = {"temperature": 0.0, "max_tokens": 10, "seed": 0, "logprobs": True, "top_logprobs": 2}


@pytest.fixture(scope="session")
def tiny_lm() -> str:
    return build_tiny_lm()


@pytest.fixture(scope="module")
def server(tiny_lm):
    srv = TinyOpenAIServer(tiny_lm, model_name="tiny", api_key=KEY).start()
    yield srv
    srv.stop()


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def sfres(n: int):
    return make_dataset({"kind": "sfres", "limit": n}).load()


def chat_requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(sample=s, prompt=s.input, messages=[{"role": "user", "content": s.input}]) for s in sfres(n)]


def _assert_offsets(result):
    records = result.extra["token_logprobs"]
    assert len(records) == result.tokens_out
    assert "".join(result.output[r["char_start"]:r["char_end"]] for r in records) == result.output
    for r in records:
        assert r["logprob"] <= 0.0
        assert len(r["top_logprobs"]) == 2 and r["top_logprobs"][0]["logprob"] >= r["logprob"] - 1e-5


# ----------------------------------------------------------------------------- hf backend
def test_hf_batched_equals_one_by_one_with_token_offsets(tiny_lm):
    requests = [GenerationRequest(sample=s, prompt=s.input) for s in sfres(5)]
    batched = list(ModelBackends().backend_for(f"hf:{tiny_lm}", {"batch_size": 4}).generate(requests, SETTINGS))
    single = list(ModelBackends().backend_for(f"hf:{tiny_lm}", {"batch_size": 1}).generate(requests, SETTINGS))
    assert [r.sample_id for r in batched] == [s.sample.sample_id for s in requests]
    assert [r.output for r in batched] == [r.output for r in single]
    for a, b in zip(batched, single):
        assert a.status == "ok" and a.tokens_out == 10 and a.tokens_in > 0
        assert [t["logprob"] for t in a.extra["token_logprobs"]] == pytest.approx([t["logprob"] for t in b.extra["token_logprobs"]], abs=1e-4)
        _assert_offsets(a)


def test_hf_sampling_is_seeded(tiny_lm):
    backend = ModelBackends().backend_for(f"hf:{tiny_lm}", {"batch_size": 2})
    requests = [GenerationRequest(sample=s, prompt=s.input) for s in sfres(2)]
    sampled = {**SETTINGS, "temperature": 1.5, "logprobs": False}
    first = [r.output for r in backend.generate(requests, {**sampled, "seed": 1})]
    again = [r.output for r in backend.generate(requests, {**sampled, "seed": 1})]
    greedy = [r.output for r in backend.generate(requests, SETTINGS)]
    assert first == again and first != greedy


def test_hf_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(BackendError, match="does not exist"):
        ModelBackends().backend_for(f"hf:{tmp_path}/nothing-here")


# ----------------------------------------------------------------------------- API backend over HTTP
def test_api_matches_hf_over_real_http(tiny_lm, server, keyed):
    requests = chat_requests(3)
    hf = list(ModelBackends().backend_for(f"hf:{tiny_lm}").generate(requests, SETTINGS))
    api_backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"api_key_env": KEY_ENV, "concurrency": 3})
    api = list(api_backend.generate(requests, SETTINGS))
    assert [r.status for r in api] == ["ok"] * 3
    assert [r.output for r in api] == [r.output for r in hf]
    for a, h in zip(api, hf):
        assert a.tokens_out == h.tokens_out and a.tokens_in == h.tokens_in
        assert [t["logprob"] for t in a.extra["token_logprobs"]] == pytest.approx([t["logprob"] for t in h.extra["token_logprobs"]], abs=1e-4)
        _assert_offsets(a)
    sent = server.received[-1]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2 and sent["max_tokens"] == 10


def test_api_retries_429_and_5xx_with_the_client_backoff(server, keyed):
    backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"api_key_env": KEY_ENV, "concurrency": 1, "max_retries": 4})
    calls, received = server.calls, len(server.received)
    server.fail_next([429, 500, 503])
    [result] = backend.generate(chat_requests(1), SETTINGS)
    assert result.status == "ok" and result.output
    assert server.calls - calls == 1 and len(server.received) - received == 4


def test_api_exhausted_retries_fail_one_sample_and_the_run_goes_on(server, keyed):
    backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"api_key_env": KEY_ENV, "concurrency": 1, "max_retries": 1})
    server.fail_next([500, 500])
    first, second = backend.generate(chat_requests(2), SETTINGS)
    assert first.status == "error" and "InternalServerError" in first.error and first.output is None
    assert second.status == "ok" and second.output


def test_api_401_and_404_stop_with_what_to_fix(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0123456789")
    backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"api_key_env": KEY_ENV, "max_retries": 0})
    with pytest.raises(BackendError, match="401") as info:
        list(backend.generate(chat_requests(1), SETTINGS))
    assert "sk-wrong-key-0123456789" not in str(info.value) and KEY_ENV in str(info.value)
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = ModelBackends().backend_for(f"api:gpt-nope@{server.base_url}", {"api_key_env": KEY_ENV, "max_retries": 0})
    with pytest.raises(BackendError, match="404.*gpt-nope"):
        list(backend.generate(chat_requests(1), SETTINGS))


def test_api_remote_host_without_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("FACETLAKE_NO_SUCH_KEY", raising=False)
    backend = ModelBackends().backend_for("api:gpt-4o-mini@https://api.example.invalid/v1", {"api_key_env": "FACETLAKE_NO_SUCH_KEY"})
    with pytest.raises(BackendError, match=r"no API key for api\.example\.invalid: set \$FACETLAKE_NO_SUCH_KEY"):
        list(backend.generate(chat_requests(1), SETTINGS))


def test_multiple_choice_loglikelihood_same_over_hf_and_http(tiny_lm, server, keyed):
    from resources.prompting.adapters import make_adapter

    samples = [s for s in sfres(3)]
    samples = [type(s)(s.sample_id, s.input, s.references, metadata={"choices": [s.references[0], "no idea", "inform"]}) for s in samples]
    adapter = make_adapter({"kind": "multiple_choice", "mode": "loglikelihood"})
    requests = [adapter.request(s) for s in samples]
    hf = [adapter.finalize(q, r) for q, r in zip(requests, ModelBackends().backend_for(f"hf:{tiny_lm}").loglikelihood(requests, {}))]
    api_backend = ModelBackends().backend_for(f"api:tiny@{server.base_url}", {"api_key_env": KEY_ENV})
    api = [adapter.finalize(q, r) for q, r in zip(requests, api_backend.loglikelihood(requests, {}))]
    for h, a in zip(hf, api):
        hv = [c["logprob"] for c in h.extra["choice_logprobs"]]
        assert [c["logprob"] for c in a.extra["choice_logprobs"]] == pytest.approx(hv, abs=1e-4)
        assert h.output == a.output == "ABC"[max(range(3), key=hv.__getitem__)]


# ----------------------------------------------------------------------------- end to end
def _write_spec(path: Path, model: str, annotators: list, runtime: dict, n: int = 6, **extra) -> Path:
    spec = {
        "name": "live-tiny",
        "dataset": {"kind": "sfres", "limit": n},
        "adapter": {"kind": "chat", "system": "Describe the restaurant.", "template": "{input}"},
        "generation": {"temperature": 0.0, "max_tokens": 8, "seed": 0, "logprobs": True, "top_logprobs": 3},
        "annotators": annotators,
        "runtime": runtime,
        "models": {"tiny": model},
        "metrics": ["token_f1", "perplexity", "mean_token_logprob", "low_confidence_share", "confidence_tiers"],
        **extra,
    }
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_cli_run_hf_end_to_end_generate_score_sql(tiny_lm, tmp_path, dagster_home):
    """`facetlake run` with models: {tiny: "hf:PATH"}: generations, token log-probs, annotations,
    epistemic scores, cost/performance in runs, all queryable with `facetlake sql`."""
    from typer.testing import CliRunner

    from pipelines.cli import app
    from resources.sql import query

    lake_dir = tmp_path / "lake"
    annotators = [{"name": "first-word", "kind": "regex", "pattern": r"([A-Za-z]+)", "on_no_match": "none"}]
    cfg = _write_spec(tmp_path / "live.yaml", f"hf:{tiny_lm}", annotators,
                      {"batch_size": 4, "write_batch_size": 4, "prices": {"input_per_1m": 1.0, "output_per_1m": 2.0}},
                      metric_params={"token_f1": {"use_annotation": "first-word"}})
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(cfg), "--lake", str(lake_dir)])
    assert result.exit_code == 0, result.output
    lake = LakeStore(root=str(lake_dir))
    gens = query(lake, "select sample_id, output, status, backend, tokens_in, tokens_out from generations order by sample_id")
    assert gens.height == 6 and set(gens["status"]) == {"ok"} and set(gens["backend"]) == {"hf"}
    per_sample = query(lake, """
        select g.sample_id, g.tokens_out, count(t.position) n, exp(-avg(t.logprob)) ppl,
               string_agg(substr(g.output, t.char_start + 1, t.char_end - t.char_start), '' order by t.position) rebuilt, g.output
        from generations g join token_logprobs t using (model, fingerprint, sample_id)
        group by g.sample_id, g.tokens_out, g.output order by g.sample_id""")
    assert per_sample.height == 6
    assert per_sample["n"].to_list() == per_sample["tokens_out"].to_list()
    assert per_sample["rebuilt"].to_list() == per_sample["output"].to_list()
    top = query(lake, "select top_logprobs from token_logprobs limit 1").item()
    assert len(json.loads(top)) == 3
    scores = query(lake, "select sample_id, value, status, dimension, direction from scores where metric = 'perplexity' order by sample_id")
    assert scores["status"].to_list() == ["scored"] * 6 and set(scores["dimension"]) == {"epistemic"} and set(scores["direction"]) == {"minimize"}
    assert scores["value"].to_list() == pytest.approx(per_sample["ppl"].to_list(), rel=1e-9)
    ann = query(lake, "select sample_id, value, matched, span_start, span_end from annotations order by sample_id")
    assert ann.height == 6
    out_by_id = dict(zip(gens["sample_id"], gens["output"]))
    for row in ann.iter_rows(named=True):
        import re

        m = re.search(r"([A-Za-z]+)", out_by_id[row["sample_id"]])
        assert row["value"] == (m.group(1) if m else None) and row["matched"] == bool(m)
    f1 = query(lake, "select status, signature from scores where metric = 'token_f1'")
    assert all(sig.endswith("|annotation:first-word") for sig in f1["signature"])
    assert (f1["status"] == "scored").sum() == ann["matched"].sum()
    perf = json.loads(query(lake, "select json_extract(provenance, '$.performance') p from runs where asset = 'generations'").item())
    assert perf["tokens_out"] == int(gens["tokens_out"].sum()) and perf["tokens_in"] == int(gens["tokens_in"].sum())
    assert perf["model_parameters"] > 0 and perf["wall_s"] > 0 and perf["tokens_per_s"] > 0
    assert perf["cost"]["total"] == pytest.approx(perf["tokens_in"] / 1e6 * 1.0 + perf["tokens_out"] / 1e6 * 2.0)
    sql = runner.invoke(app, ["sql", "select count(*) as n from token_logprobs", "--lake", str(lake_dir), "-f", "json"])
    assert sql.exit_code == 0 and json.loads(sql.output)[0]["n"] == int(gens["tokens_out"].sum())
    # a second run generates nothing: every sample is stored
    result = runner.invoke(app, ["run", str(cfg), "--lake", str(lake_dir)])
    assert result.exit_code == 0, result.output
    resume = query(lake, "select json_extract(provenance, '$.resume') r from runs where asset = 'generations' order by finished_at")
    assert json.loads(resume["r"][-1]) == {"kept": 6, "reused": 0, "reused_from": {}, "generated": 0, "stale_model_spec": False}
    assert query(lake, "select count(*) from generations").item() == 6


def _rows(lake: LakeStore) -> int:
    return lake.read("generations").height if lake.exists("generations") else 0


@pytest.mark.slow  # spawns the facetlake command / a Dagster run in a subprocess (> 10 s)
def test_resume_after_kill_then_annotator_change_reuses(tiny_lm, server, tmp_path, keyed, instance):
    """Kill a CLI run mid-generation; re-running calls the model only for unfinished samples;
    changing an annotator (new fingerprint) re-annotates and rescores with no model call."""
    from pipelines.runs.runner import materialize_model, materialize_samples
    from pipelines.runs.register import register
    from resources.catalog.spec import EvaluationSpec

    n = 10
    runtime = {"api_key_env": KEY_ENV, "concurrency": 1, "write_batch_size": 2, "max_retries": 0}
    cfg = _write_spec(tmp_path / "api.yaml", f"api:tiny@{server.base_url}", [{"name": "visible", "kind": "strip_reasoning"}], runtime, n=n)
    lake_dir = tmp_path / "lake"
    lake = LakeStore(root=str(lake_dir))
    server.reset()
    server.hold_after(5)  # calls 1-5 answer, call 6 blocks: batches [1,2] and [3,4] are stored, 5 is lost with its batch
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster"), KEY_ENV: KEY, "PYTHONPATH": str(ROOT)}
    (tmp_path / "dagster").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", str(cfg), "--lake", str(lake_dir)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 240
        while not (server.calls >= 6 and _rows(lake) >= 4):
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.time() < deadline, f"run did not reach the 6th call (calls={server.calls}, rows={_rows(lake)})"
            time.sleep(0.2)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        server.release()
    stored = lake.read("generations")
    assert stored.height == 4 and set(stored["status"]) == {"ok"}
    killed_ids = set(stored["sample_id"])

    server.reset()
    spec = EvaluationSpec.from_yaml(cfg)
    resolved = register(spec, lake, instance)
    materialize_samples(resolved.fingerprint, lake, instance)
    materialize_model("tiny", resolved.fingerprint, lake, instance)
    assert server.calls == n - 4
    final = lake.read("generations", where={"fingerprint": resolved.fingerprint})
    assert final.height == n and final["sample_id"].n_unique() == n and set(final["status"]) == {"ok"}
    assert set(final.filter(pl.col("sample_id").is_in(sorted(killed_ids)))["run_id"]).isdisjoint(
        set(final.filter(~pl.col("sample_id").is_in(sorted(killed_ids)))["run_id"]))
    tokens = lake.read("token_logprobs", where={"fingerprint": resolved.fingerprint})
    assert tokens.height == int(final["tokens_out"].sum())

    # change only the annotator: a new fingerprint, generations copied, no model call
    server.reset()
    changed = EvaluationSpec.from_mapping({**spec.to_mapping(), "annotators": [{"name": "word", "kind": "regex", "pattern": r"(\w+)"}],
                                           "metric_params": {"token_f1": {"use_annotation": "word"}}})
    resolved2 = register(changed, lake, instance)
    assert resolved2.fingerprint != resolved.fingerprint
    materialize_samples(resolved2.fingerprint, lake, instance)
    materialize_model("tiny", resolved2.fingerprint, lake, instance)
    assert server.calls == 0
    copied = lake.read("generations", where={"fingerprint": resolved2.fingerprint}).sort("sample_id")
    assert copied["output"].to_list() == final.sort("sample_id")["output"].to_list()
    assert lake.read("token_logprobs", where={"fingerprint": resolved2.fingerprint}).height == tokens.height
    ann = lake.read("annotations", where={"fingerprint": resolved2.fingerprint})
    assert set(ann["annotator"]) == {"word"} and ann.height == n
    f1 = lake.read("scores", where={"fingerprint": resolved2.fingerprint, "metric": "token_f1"})
    assert f1.height == n and all(s.endswith("|annotation:word") for s in f1["signature"])
    ppl = lake.read("scores", where={"fingerprint": resolved2.fingerprint, "metric": "perplexity"})
    assert set(ppl["status"]) == {"scored"}
    runs = lake.read("runs", where={"asset": "generations", "fingerprint": resolved2.fingerprint})
    resume = json.loads(runs["provenance"][0])["resume"]
    assert resume["reused"] == n and resume["generated"] == 0 and resume["reused_from"] == {resolved.fingerprint: n}
    # the key never reaches the lake
    for path in lake_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


# ----------------------------------------------------------------------------- vLLM
@pytest.mark.vllm
def test_vllm_backend_generates_with_logprobs(tiny_lm):
    from resources.backends.vllm import vllm_available

    if not vllm_available():
        pytest.skip("vLLM is not installed (optional extra `facetlake[vllm]`, needs a CUDA GPU); the CUDA paths of the hf backend and BERTScore are checked by benchmarks/bench_gpu_paths.py")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("vLLM is installed but no CUDA GPU is visible")
    backend = ModelBackends().backend_for(f"vllm:{tiny_lm}", {"gpu_memory_utilization": 0.2})
    requests = [GenerationRequest(sample=s, prompt=s.input) for s in sfres(3)]
    results = list(backend.generate(requests, SETTINGS))
    hf = list(ModelBackends().backend_for(f"hf:{tiny_lm}").generate(requests, SETTINGS))
    assert [r.status for r in results] == ["ok"] * 3
    assert [r.output for r in results] == [r.output for r in hf]
    for r in results:
        _assert_offsets(r)


def test_vllm_missing_gives_the_install_line(tiny_lm):
    from resources.backends.vllm import vllm_available

    if vllm_available():
        pytest.skip("vLLM is installed here")
    backend = ModelBackends().backend_for(f"vllm:{tiny_lm}")
    with pytest.raises(BackendError, match=r"pip install 'facetlake\[vllm\]'"):
        list(backend.generate([GenerationRequest(sample=s, prompt=s.input) for s in sfres(1)], SETTINGS))
    assert backend.engine_options()["tensor_parallel_size"] == 1


def test_model_annotator_extracts_with_another_model(tiny_lm):
    from resources.prompting.annotators import make_annotators, run_annotators

    config = {"name": "extracted", "kind": "model", "model": f"hf:{tiny_lm}", "prompt": "Answer in {output}:", "max_tokens": 4}
    samples = sfres(2)
    outputs = ["the answer is inform", None]
    [annotator] = make_annotators([config])
    got = run_annotators([annotator], samples, outputs)["extracted"]
    [direct] = ModelBackends().backend_for(f"hf:{tiny_lm}").generate(
        [GenerationRequest(sample=samples[0], prompt="Answer in the answer is inform:")], {"temperature": 0.0, "max_tokens": 4})
    expected = direct.output.strip().splitlines()[0].strip() if direct.output.strip() else None
    assert got[0].value == expected and got[0].matched == bool(expected)
    assert got[1].value is None and not got[1].matched and "no text" in got[1].error
