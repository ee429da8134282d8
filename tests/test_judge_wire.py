"""The judge wire path end to end: a real OpenAI-compatible HTTP server on 127.0.0.1
serving a tiny local LM (tests/support/judge_server.py), reached through
resources/scoring/judges.py -> resources/privacy/outbound.py -> the openai client.

The tiny model writes gibberish, so its replies fail to parse: they must land as
``error`` rows with the raw text kept (never a zero, never a crash), judge calls must be
cached in the lake's ``judge_cache`` (a forced re-score pays nothing), and the commands
(`score --judge`, `pairwise`, `stability`, `meta-eval halueval`) must run over a stored
run.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipelines.cli import app

# pytest-xdist: one worker runs this module (the judge server and lake are module-scoped; README "Tests")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("judge_wire")]
runner = CliRunner()


@pytest.fixture(scope="module")
def server():
    from tests.support.judge_server import JudgeServer
    from tests.support.tiny_lm import build_tiny_lm

    srv = JudgeServer(build_tiny_lm(), max_new_tokens=12).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def judge_spec(server):
    return f"api:tiny-judge@{server.base_url}"


@pytest.fixture(scope="module")
def two_model_lake(tmp_path_factory, instance):
    """SF-RES, 3 real rows, two precomputed systems (the real outputs and the references)."""
    from pipelines.runs.runner import run_evaluation
    from resources.datasets import make_dataset
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    root = tmp_path_factory.mktemp("judge_lake")
    refs = root / "refs.jsonl"
    rows = make_dataset({"kind": "sfres", "limit": 3}).load()
    refs.write_text("\n".join(json.dumps({"sample_id": s.sample_id, "output": s.references[0]}) for s in rows))
    spec = EvaluationSpec.from_mapping({
        "name": "sfres-judged", "dataset": {"kind": "sfres", "limit": 3},
        "models": {"sys": "precomputed:column=system_output", "ref": f"precomputed:{refs}"},
        "metrics": ["exact_match"],
    })
    lake = LakeStore(root=str(root / "lake"))
    resolved = run_evaluation(spec, lake, instance)
    return lake, resolved


def test_api_judge_reply_and_logprobs_over_http(server, judge_spec):
    from metric_ops.judged.judging import resolve_judge
    import resources.scoring.judges  # noqa: F401  (installs the resolver)

    judge = resolve_judge(judge_spec)
    assert judge.locality == "external"
    before = len(server.requests)
    reply = judge.complete([{"role": "user", "content": "Rate this."}], purpose="test", temperature=0.0, max_tokens=5,
                           logprobs=True, top_logprobs=3)
    assert len(server.requests) == before + 1
    assert server.requests[-1]["model"] == "tiny-judge" and server.requests[-1]["top_logprobs"] == 3
    assert reply.logprobs and "".join(t.token for t in reply.logprobs) == reply.text
    assert all(len(t.top) == 3 for t in reply.logprobs)


def test_offline_mode_refuses_the_remote_judge_before_any_request(server, judge_spec, monkeypatch):
    from metric_ops.base import Sample
    from metric_ops.judged.geval_jury import GEval
    import resources.scoring.judges  # noqa: F401

    monkeypatch.setenv("FACETLAKE_OFFLINE", "1")
    before = len(server.requests)
    metric = GEval(judge=judge_spec, criteria=[{"name": "c", "description": "", "steps": ["x"]}])
    score = metric.score_batch([Sample("s", input="q")], ["a"])[0]["g_eval"]
    assert score.status == "error" and "offline mode" in score.detail["error"]
    assert len(server.requests) == before


def test_score_with_judge_from_cli_lands_errors_with_raw_text_and_caches(server, judge_spec, two_model_lake):
    lake, resolved = two_model_lake
    fp = resolved.fingerprint
    generations_version = lake.version("generations")
    args = ["score", "--metric", "faithfulness", "--metric", "g_eval", "--judge", judge_spec,
            "--param", "max_tokens=12", "--lake", lake.root]
    before = len(server.requests)
    result = runner.invoke(app, args)
    # every judge reply is unparseable: the rows are stored as errors and the command says so
    assert result.exit_code == 1, result.output
    assert "stored only errors" in " ".join(result.output.split())
    paid = len(server.requests) - before
    # faithfulness: the claims step fails for each distinct (question, answer), 2 attempts each;
    # g_eval: the evaluation-steps call fails, 2 attempts, once (the second model hits the cache)
    gens = lake.read("generations", where={"fingerprint": fp})
    distinct = gens.select("sample_id", "output").unique().height
    assert paid == 2 * distinct + 2
    scores = lake.read("scores", where={"fingerprint": fp, "metric": ["faithfulness", "hallucination", "g_eval"]})
    assert scores.height == 2 * 3 * 3
    assert set(scores["status"]) == {"error"} and scores["value"].null_count() == scores.height
    assert set(scores["locality"]) == {"external"}
    assert all(judge_spec in s for s in scores["signature"])
    details = [json.loads(d) for d in scores["detail"]]
    assert all(d["raw_reply"] == d["raw_replies"][-1] and len(d["raw_replies"]) == 2 for d in details)
    sent_texts = [r["messages"][-1]["content"] for r in server.requests[before:]]
    assert any("atomic claims" in t for t in sent_texts) and any("evaluation steps" in t for t in sent_texts)
    assert lake.version("generations") == generations_version  # rescoring never touches generations
    cached = lake.read("judge_cache")
    assert cached.height == paid

    again = runner.invoke(app, [*args, "--force"])
    assert again.exit_code == 1 and "stored only errors" in " ".join(again.output.split()), again.output
    assert len(server.requests) - before == paid  # re-materialising paid nothing
    rescored = lake.read("scores", where={"fingerprint": fp, "metric": ["faithfulness", "hallucination", "g_eval"]})
    assert sorted(rescored["detail"]) == sorted(scores["detail"])

    skipped = runner.invoke(app, args)  # same signature: skipped without --force
    assert skipped.exit_code == 0 and "skipped" in skipped.output and len(server.requests) - before == paid


def test_pairwise_command_runs_over_the_stored_run(server, judge_spec, two_model_lake):
    lake, resolved = two_model_lake
    result = runner.invoke(app, ["pairwise", "--judge", judge_spec, "--lake", lake.root])
    assert result.exit_code == 0, result.output
    assert "win rates" in result.output and "position bias" in result.output
    rows = lake.read("pairwise", where={"fingerprint": resolved.fingerprint})
    assert rows.height == 3  # one pair (ref, sys) x 3 samples
    assert set(rows["status"]) == {"error"} and rows["winner"].null_count() == 3
    detail = json.loads(rows["detail"][0])
    assert isinstance(detail["raw_reply_ab"], str) and "error" in detail

    # --format json: only the win-rate rows on stdout (the cached verdicts: nothing paid again)
    before = len(server.requests)
    piped = runner.invoke(app, ["pairwise", "--judge", judge_spec, "--lake", lake.root, "--format", "json"])
    assert piped.exit_code == 0, piped.output
    rates = json.loads(piped.stdout)
    assert {r["model"] for r in rates} == {"ref", "sys"} and {r["fingerprint"] for r in rates} == {resolved.fingerprint[:12]}
    assert all(r["games"] == 0 and r["errors"] == 3 and r["win_rate"] is None for r in rates)  # numbers, null when undefined
    assert "position bias" in piped.stderr and "win rates" not in piped.output
    assert len(server.requests) == before


def test_stability_pays_every_repeat(server, judge_spec, two_model_lake):
    lake, _ = two_model_lake
    before = len(server.requests)
    result = runner.invoke(app, ["stability", "--metric", "context_relevance", "--repeats", "2", "--model", "sys",
                                 "--limit", "2", "--judge", judge_spec, "--param", "max_attempts=1",
                                 "--lake", lake.root, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert len(server.requests) - before == 2 * 2  # 2 repeats x 2 samples, no cache
    row = json.loads(result.stdout)[0]
    assert row["metric"] == "context_relevance" and row["repeats"] == 2 and row["max_error"] == 2
    assert row["sigma_of_means"] is None  # nothing scored: undefined, not 0


def test_halueval_meta_eval_path(server, judge_spec):
    result = runner.invoke(app, ["meta-eval", "halueval", "--judge", judge_spec, "--limit", "3",
                                 "--param", "max_attempts=1", "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)  # stdout holds only the row; the notes are on stderr
    assert row["rows"] == 3 and row["error"] == 3 and row["auroc_hallucination"] is None
    assert "AUROC undefined" in result.stderr and "raw reply" in result.stderr


def test_local_hf_judge_through_the_backend_is_local_and_errors_keep_raw_text():
    from metric_ops.base import Sample
    from metric_ops.judged.rag_triad import ContextRelevance
    from tests.support.tiny_lm import build_tiny_lm
    import resources.scoring.judges  # noqa: F401

    metric = ContextRelevance(judge=f"hf:{build_tiny_lm()}", max_tokens=8, max_attempts=1, concurrency=1)
    assert metric.locality == "local"
    score = metric.score_batch([Sample("s", input="q?", context=("A fact. Another fact.",))], ["a"])[0]["context_relevance"]
    assert score.status == "error" and isinstance(score.detail["raw_reply"], str)
    assert "unparseable judge reply" in score.detail["error"]
