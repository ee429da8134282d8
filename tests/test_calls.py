"""Model and judge calls at the server's speed (issue 30): declared rate limits, 429s with
Retry-After, budgets and no call twice, against real OpenAI-format servers on 127.0.0.1
(tests/support/scripted_llm.py) and real Delta lakes and Dagster runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metric_ops.base import Sample
from metric_ops.errors import BudgetExhausted
from resources.backends import GenerationRequest
from resources.backends.api import APIBackend
from resources.backends.budget import Budget, EndpointError
from resources.backends.endpoints import Pacer, call_session, endpoint_for, endpoint_options
from resources.lake.resource import LakeStore
from support.scripted_llm import ScriptedLLM


@pytest.fixture(scope="module")
def llm():
    server = ScriptedLLM().start()
    yield server
    server.stop()


def _requests(n: int, prefix: str = "q") -> list[GenerationRequest]:
    return [GenerationRequest(sample=Sample(sample_id=f"{prefix}{i}", input=f"question {i}"), prompt=f"question {i}") for i in range(n)]


def _generate(base_url: str, runtime: dict, n: int, prefix: str = "q") -> list:
    backend = APIBackend(f"api:scripted@{base_url}", runtime)
    with call_session(runtime):
        return list(backend.generate(_requests(n, prefix), {"max_tokens": 8}))


# --------------------------------------------------------------------------- options and pacing
def test_endpoint_options_merge_per_url_and_refuse_bad_values():
    runtime = {"concurrency": 8, "rpm": 500, "endpoints": {"http://judge.local/v1": {"concurrency": 2, "tpm": 1000}}}
    assert endpoint_options(runtime, "http://model.local/v1").concurrency == 8
    judge = endpoint_options(runtime, "http://judge.local/v1")
    assert (judge.concurrency, judge.rpm, judge.tpm) == (2, 500.0, 1000.0)
    assert endpoint_options({}).concurrency == 32  # the measured default (benchmarks/bench_calls.py)
    for bad in ({"rpm": 0}, {"concurrency": "many"}, {"mode": "bulk"}, {"endpoints": {"http://x/v1": {"rmp": 1}}}):
        with pytest.raises(EndpointError):
            endpoint_options(bad, "http://x/v1")


def test_pacer_spaces_requests_and_gives_back_unused_tokens():
    """GCRA virtual scheduling: at rpm 600 the 2nd and 3rd calls leave 0.1 s apart; at tpm 6000
    (100 tokens/s) a refund of unused tokens lets the next call leave at once."""
    import time

    pacer = Pacer(rpm=600, tpm=None)
    t0 = time.monotonic()
    for _ in range(3):
        pacer.admit(1)
    assert 0.19 <= time.monotonic() - t0 < 0.5  # tolerance: the two waits of 0.1 s plus scheduling
    tokens = Pacer(rpm=None, tpm=6000)
    tokens.admit(100)  # within the one second of burst: at once
    tokens.correct(100, 0)  # the reply used nothing: its 100 tokens come back
    assert tokens.admit(100) == 0.0
    assert tokens.admit(100) == 0.0  # the burst allowance again
    assert tokens.admit(100) > 0.5  # now the schedule is 1 s ahead: it waits


def test_budget_parse_and_reservations():
    budget = Budget.parse("usd=0.5,tokens=1000,calls=2")
    assert budget.limits() == {"usd": 0.5, "tokens": 1000, "calls": 2}
    held = budget.reserve(400, 0.1)
    budget.settle(held, sent=True, tokens=300, usd=0.05)
    assert budget.spent() == {"calls": 1, "tokens": 300, "usd": 0.05}
    with pytest.raises(BudgetExhausted, match="tokens"):
        budget.reserve(800, 0.1)
    budget.settle(budget.reserve(10, 0.01), sent=True, tokens=10, usd=0.01)
    with pytest.raises(BudgetExhausted, match="calls: 2 of 2 sent"):
        budget.reserve(1, 0.0)
    with pytest.raises(BudgetExhausted, match="no price"):
        Budget.parse({"usd": 1}).reserve(1, None)
    for bad in ("usd=-1", "calls=1.5", "dollars=3", "calls"):
        with pytest.raises(EndpointError):
            Budget.parse(bad)


# --------------------------------------------------------------------------- rate limits over HTTP
def test_declared_rpm_keeps_a_limited_server_from_refusing():
    """A server allowing 120 requests per minute (quantised per second, as OpenAI documents)
    refuses an unpaced client and never refuses one that declares rpm: 120."""
    unpaced, paced = ScriptedLLM(rpm=120).start(), ScriptedLLM(rpm=120).start()
    try:
        results = _generate(unpaced.base_url, {"concurrency": 8, "max_retries": 6}, 12)
        assert unpaced.refused > 0  # the control: without the declaration the server refuses
        # ... and every sample is there, an output or an error naming the refusal (never skipped)
        assert len(results) == 12 and all(r.status == "ok" or "RateLimitError" in r.error for r in results)
        results = _generate(paced.base_url, {"concurrency": 8, "rpm": 120, "max_retries": 0}, 12)
        assert paced.refused == 0 and paced.calls == 12
        assert [r.status for r in results] == ["ok"] * 12
    finally:
        unpaced.stop()
        paced.stop()


def test_429_with_retry_after_loses_no_sample_and_pauses_the_endpoint(llm):
    llm.reset()
    llm.refuse_now(1.5, retry_after="1")
    results = _generate(llm.base_url, {"concurrency": 4, "max_retries": 5}, 10, prefix="r")
    assert [r.status for r in results] == ["ok"] * 10 and [r.sample_id for r in results] == [f"r{i}" for i in range(10)]
    assert llm.refused >= 1 and llm.calls == 10
    assert endpoint_for(llm.base_url).refusals == llm.refused  # the transport hook saw every 429
    # the pause after a 429 holds new calls back: far fewer refusals than 10 samples x retries
    assert llm.refused <= 3 * 4


def test_calls_that_finally_fail_are_errors_with_the_reason_never_skipped(llm):
    llm.reset()
    llm.refuse_now(30, retry_after="0")
    try:
        results = _generate(llm.base_url, {"concurrency": 2, "max_retries": 1}, 4, prefix="f")
    finally:
        llm.refuse_now(0)
    assert [r.sample_id for r in results] == ["f0", "f1", "f2", "f3"]
    assert all(r.status == "error" and r.output is None and "RateLimitError" in r.error for r in results)


# --------------------------------------------------------------------------- budgets and reuse through runs
def _spec(base_url: str, n: int, runtime: dict, judged: bool = False, name: str = "calls"):
    from resources.catalog.spec import EvaluationSpec

    return EvaluationSpec.from_mapping({
        "name": name, "dataset": {"kind": "sfres", "limit": n},
        "adapter": {"kind": "chat", "template": "{input}"}, "generation": {"max_tokens": 8, "temperature": 0.0},
        "models": {"scripted": f"api:scripted@{base_url}"}, "runtime": runtime,
        "metrics": ["token_f1", *(["g_eval"] if judged else [])],
        **({"metric_params": {"g_eval": {"judge": f"api:scripted@{base_url}"}}} if judged else {}),
    })


def _budget_error(exc: BaseException) -> BudgetExhausted | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BudgetExhausted):
            return exc
        exc = getattr(exc, "user_exception", None) or exc.__cause__ or exc.__context__
    return None


def _run(spec, lake, instance):
    from pipelines.runs.runner import run_evaluation

    try:
        run_evaluation(spec, lake, instance)
    except Exception as exc:  # noqa: BLE001 - the budget stop, inside Dagster's step error
        found = _budget_error(exc)
        if found is None:
            raise
        return found
    return None


def _spend(lake, asset: str) -> list[dict]:
    runs = lake.read("runs", where={"asset": asset}).sort("finished_at")
    return [json.loads(p)["spend"] for p in runs["provenance"].to_list()]


def test_a_budget_of_n_calls_sends_exactly_n_and_the_rerun_sends_only_the_rest(llm, tmp_path, instance):
    lake = LakeStore(root=str(tmp_path / "lake"))
    llm.reset()
    stop = _run(_spec(llm.base_url, 10, {"concurrency": 3, "budget": {"calls": 4}}), lake, instance)
    assert stop is not None and "calls: 4 of 4 sent" in str(stop) and "6 not generated" in str(stop)
    assert llm.calls == 4
    gens = lake.read("generations")
    assert gens.height == 4 and set(gens["status"]) == {"ok"}  # finished rows kept, none skipped as errors
    assert _spend(lake, "generations")[-1]["calls"] == 4  # spend per run in the runs table
    assert not lake.exists("scores")  # nothing scored on a partial generation
    stop = _run(_spec(llm.base_url, 10, {"concurrency": 3, "budget": {"calls": 100}}), lake, instance)
    assert stop is None and llm.calls == 10  # only the 6 not yet sent
    assert lake.read("generations")["sample_id"].n_unique() == 10
    assert lake.read("scores", where={"metric": "token_f1"}).height == 10
    assert _spend(lake, "generations")[-1]["calls"] == 6
    # the report's overview lists each step's calls and spend, the budget stop included
    from pipelines.report import build_html, load_report_data
    from resources.catalog import evaluation_row

    data = load_report_data(lake, evaluation_row(lake, "calls")["fingerprint"])
    gen_rows = [r for r in data.spend if r["step"] == "generations"]
    assert [r["calls sent"] for r in gen_rows] == [4, 6] and "budget reached" in gen_rows[0]["stopped"]
    assert gen_rows[1]["calls reused"] == 4 and gen_rows[1]["stopped"] == "-"
    assert "Calls and spend per run (10 calls sent, 4 reused)" in build_html(data)


@pytest.mark.slow  # two judged runs and a forced rescore (~15 s)
def test_judged_budget_stop_keeps_scores_and_reruns_send_no_call_twice(llm, tmp_path, instance):
    """Generation 6 calls + G-Eval's steps call + 2 ratings = a budget of 9: the two rated
    samples keep their scores, the other four have no row (never an error or a zero); the
    re-run with a larger budget sends only the 4 missing ratings; a third run and a forced
    rescore send nothing (scores reused, then judge replies from judge_cache)."""
    from pipelines.runs.runner import materialize_model
    from resources.catalog import evaluation_row, pairs_of

    lake = LakeStore(root=str(tmp_path / "lake"))
    llm.reset()
    stop = _run(_spec(llm.base_url, 6, {"concurrency": 3, "budget": {"calls": 9}}, judged=True, name="judged"), lake, instance)
    assert stop is not None and "not scored: 4 sample(s) of g_eval" in str(stop)
    assert llm.calls == 9
    geval = lake.read("scores", where={"metric": "g_eval"})
    assert geval.height == 2 and set(geval["status"]) == {"scored"} and geval["value"].to_list() == [0.75, 0.75]
    assert lake.read("scores", where={"metric": "token_f1"}).height == 6  # local metrics are not held back
    stop = _run(_spec(llm.base_url, 6, {"concurrency": 3, "budget": {"calls": 50}}, judged=True, name="judged"), lake, instance)
    assert stop is None and llm.calls == 9 + 4
    assert lake.read("scores", where={"metric": "g_eval"}).height == 6
    assert _run(_spec(llm.base_url, 6, {"concurrency": 3}, judged=True, name="judged"), lake, instance) is None
    assert llm.calls == 13  # a re-run of a judged evaluation sends 0 calls
    fp = evaluation_row(lake, "judged")["fingerprint"]
    pair = pairs_of(lake, fp)[0]
    result = materialize_model(pair["model"], fp, lake, instance, metrics=["g_eval"])  # forced rescore
    meta = {k: getattr(v, "value", v) for e in result.get_asset_materialization_events() if e.asset_key.path == ["scores"]
            for k, v in e.materialization.metadata.items()}
    assert llm.calls == 13 and meta["calls_sent"] == 0 and meta["calls_reused"] == 7  # 6 ratings + the steps call


# --------------------------------------------------------------------------- the Batch API
BATCH_RUNTIME = {"mode": "batch", "poll_s": 0.1, "prices": {"scripted": {"input_per_1m": 1.0, "output_per_1m": 2.0, "batch_discount": 0.5}}}


def _generation_rows(lake) -> list[tuple]:
    gens = lake.read("generations").sort("sample_id")
    return list(gens.select("sample_id", "status", "output", "tokens_in", "tokens_out", "prompt").iter_rows())


def test_batch_mode_completes_an_evaluation_at_the_batch_price(llm, tmp_path, instance):
    lake = LakeStore(root=str(tmp_path / "lake"))
    llm.reset()
    files, batches = len(llm.files), len(llm.batches)
    assert _run(_spec(llm.base_url, 5, BATCH_RUNTIME, name="batched"), lake, instance) is None
    assert llm.calls == 0 and len(llm.batches) == batches + 1 and llm.batch_requests == 5 and len(llm.files) == files + 2
    rows = _generation_rows(lake)
    assert [r[1] for r in rows] == ["ok"] * 5 and all(r[2].startswith("answer: ") for r in rows)
    assert lake.read("scores", where={"metric": "token_f1"}).height == 5
    ledger = lake.read("outbound_ledger")
    batch_id = lake.read("call_batches", where={"state": "done"})["batch_id"].item()
    assert ledger.height == 5 and set(ledger["batch_id"]) == {batch_id} and set(ledger["status"]) == {"completed"}
    assert lake.read("call_batches").sort("created_at")["state"].to_list() == ["uploaded", "submitted", "done"]
    perf = json.loads(lake.read("runs", where={"asset": "generations"})["provenance"].item())["performance"]
    tokens_in, tokens_out = sum(r[3] for r in rows), sum(r[4] for r in rows)
    assert perf["cost"]["total"] == pytest.approx((tokens_in * 0.5 + tokens_out * 1.0) / 1e6, rel=1e-9)  # half the live price


@pytest.mark.slow  # two `facetlake run` processes per case (~25 s)
@pytest.mark.parametrize("fault", ["batch.after_create@1", "batch.before_create@1"])
def test_kill_after_submission_then_rerun_submits_nothing_new(llm, tmp_path, fault):
    """kill -9 (FACETLAKE_FAULT ends the process as kill -9 would) right after the batch is
    created, or between the upload and the create: the re-run resumes that batch (the server
    counts one file uploaded and one batch of 6 requests) and stores the rows of a run that
    was not killed."""
    import os
    import subprocess
    import sys

    import yaml

    root = Path(__file__).resolve().parents[1]
    spec = _spec(llm.base_url, 6, BATCH_RUNTIME, name="killed").to_mapping()
    spec["dataset"] = {"kind": "sfres", "limit": 6}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(root)}

    def run(lake_dir: Path, extra: dict) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(path), "--lake", str(lake_dir)], cwd=root,
                              env={**env, **extra}, capture_output=True, text=True, timeout=300)

    files, batches, requests = len(llm.files), len(llm.batches), llm.batch_requests
    killed = run(tmp_path / "killed", {"FACETLAKE_FAULT": fault})
    assert killed.returncode == 137, killed.stderr[-2000:]
    assert len(llm.files) == files + 1 and len(llm.batches) == batches + (1 if fault.startswith("batch.after") else 0)
    again = run(tmp_path / "killed", {})
    assert again.returncode == 0, again.stderr[-2000:]
    # nothing submitted twice: one input file (plus the output file), one batch, 6 requests
    assert len(llm.files) == files + 2 and len(llm.batches) == batches + 1 and llm.batch_requests == requests + 6
    clean = run(tmp_path / "clean", {})
    assert clean.returncode == 0, clean.stderr[-2000:]
    killed_lake, clean_lake = LakeStore(root=str(tmp_path / "killed")), LakeStore(root=str(tmp_path / "clean"))
    assert _generation_rows(killed_lake) == _generation_rows(clean_lake)
    ledger = killed_lake.read("outbound_ledger")
    assert ledger.height == 6 and set(ledger["status"]) == {"completed"} and ledger["batch_id"].null_count() == 0


def test_judges_in_batch_mode_send_their_calls_as_batches(llm, tmp_path, instance):
    """G-Eval with a judge whose endpoint is in batch mode: its evaluation-steps call, then its
    ratings, go as two batches (no live call); the scores equal the live path's; a re-run
    sends nothing."""
    live_lake, lake = LakeStore(root=str(tmp_path / "live")), LakeStore(root=str(tmp_path / "batch"))
    assert _run(_spec(llm.base_url, 4, {}, judged=True, name="live-judge"), live_lake, instance) is None
    llm.reset()
    batches = len(llm.batches)
    assert _run(_spec(llm.base_url, 4, BATCH_RUNTIME, judged=True, name="batch-judge"), lake, instance) is None
    assert llm.calls == 0  # generation and judging both through the Batch API
    assert len(llm.batches) == batches + 3 and llm.batch_requests == 4 + 1 + 4  # outputs; steps; ratings
    live = live_lake.read("scores", where={"metric": "g_eval"}).sort("sample_id")
    batched = lake.read("scores", where={"metric": "g_eval"}).sort("sample_id")
    assert batched["value"].to_list() == live["value"].to_list() and set(batched["status"]) == {"scored"}
    judge_rows = lake.read("outbound_ledger").filter(~lake.read("outbound_ledger")["purpose"].is_in(["generation"]))
    assert judge_rows.height == 5 and judge_rows["batch_id"].null_count() == 0
    assert set(judge_rows["purpose"]) == {"g_eval"}  # as a live judge call of the metric writes it
    assert _run(_spec(llm.base_url, 4, BATCH_RUNTIME, judged=True, name="batch-judge"), lake, instance) is None
    assert len(llm.batches) == batches + 3 and llm.calls == 0  # the re-run sends nothing


def test_spec_checks_runtime_options_and_keeps_budget_out_of_the_fingerprint(llm):
    from resources.catalog.spec import SpecError

    spec = _spec(llm.base_url, 3, {"concurrency": 2}).to_mapping()
    with_budget = {**spec, "budget": {"usd": 5, "calls": 100}}
    from resources.catalog.spec import EvaluationSpec

    parsed = EvaluationSpec.from_mapping(with_budget)
    assert parsed.runtime["budget"] == {"usd": 5.0, "calls": 100}
    plain = EvaluationSpec.from_mapping({**spec, "runtime": {"concurrency": 64, "rpm": 500, "mode": "batch"}})
    assert parsed.fingerprint_inputs("0" * 64) == plain.fingerprint_inputs("0" * 64)  # how a run spends, not what it makes
    with pytest.raises(SpecError, match="rpm must be a positive number"):
        EvaluationSpec.from_mapping({**spec, "runtime": {"rpm": 0}})
    with pytest.raises(SpecError, match="budget is given twice"):
        EvaluationSpec.from_mapping({**with_budget, "runtime": {"budget": {"calls": 1}}})
    with pytest.raises(SpecError, match="unknown keys"):
        EvaluationSpec.from_mapping({**spec, "budget": {"dollars": 1}})
