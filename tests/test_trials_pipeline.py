"""Repeated trials end to end (issue 28): `trials: k` in a spec generates and scores every
sample k times against a real OpenAI-format server on 127.0.0.1 that counts requests; a re-run
with a larger k sends only the new trials; comparisons treat a sample's trials as one cluster."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from support.recording_server import RecordingServer

QUESTIONS = ["What is the capital of France?", "Name a prime number above 10.", "Which planet is called the red planet?"]


@pytest.fixture(scope="module")
def server():
    srv = RecordingServer().start()
    yield srv
    srv.stop()


def _spec(tmp_path: Path, base_url: str, trials: int | None):
    from resources.catalog.spec import EvaluationSpec

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer": q.split()[-1]}) + "\n" for i, q in enumerate(QUESTIONS)))
    spec = {
        "name": "trials-demo",
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "adapter": {"kind": "chat", "template": "{input}"},
        "generation": {"temperature": 0.7, "max_tokens": 8, "seed": 0},
        "runtime": {"concurrency": 1, "max_retries": 0},
        "models": {"live": f"api:recording@{base_url}", "copy": "heuristic:copy-input"},
        "baseline": "copy",
        "metrics": ["token_f1", "exact_match"],
    }
    if trials is not None:
        spec["trials"] = trials
    return EvaluationSpec.from_mapping(spec)


def _asked(server: RecordingServer) -> Counter:
    out: Counter = Counter()
    for raw in server.received:
        body = json.loads(raw)
        out[[m["content"] for m in body["messages"] if m["role"] == "user"][-1]] += 1
    return out


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_trials_store_one_row_per_trial_and_a_larger_k_sends_only_the_new_trials(server, tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    server.received.clear()
    four = run_evaluation(_spec(tmp_path, server.base_url, 4), lake, instance)
    assert _asked(server) == {q: 4 for q in QUESTIONS}  # every sample 4 times
    gens = lake.read("generations", where={"model": "live", "fingerprint": four.fingerprint})
    assert sorted(gens["sample_id"].to_list()) == sorted(f"q{i}#{t}" for i in range(3) for t in range(4))
    scores = lake.read("scores", where={"fingerprint": four.fingerprint, "metric": "token_f1"})
    assert scores.height == 2 * 12 and set(scores["status"]) == {"scored"}

    # k = 8: another evaluation (trials are in the fingerprint), whose first 4 trials are reused
    eight = run_evaluation(_spec(tmp_path, server.base_url, 8), lake, instance)
    assert eight.fingerprint != four.fingerprint
    assert _asked(server) == {q: 8 for q in QUESTIONS}  # only trials 4..7 were sent
    gens8 = lake.read("generations", where={"model": "live", "fingerprint": eight.fingerprint})
    assert gens8.height == 24 and gens8["sample_id"].n_unique() == 24
    # the same k again sends nothing
    run_evaluation(_spec(tmp_path, server.base_url, 8), lake, instance)
    assert sum(_asked(server).values()) == 24

    # a single-trial spec keeps the fingerprint it had before trials existed
    single = _spec(tmp_path, server.base_url, None)
    assert "trials" not in single.to_mapping() and "trials" not in single.fingerprint_inputs("x")

    # comparisons: a sample's trials are one cluster (3 clusters of 8 trials), summary means over every trial
    comp = lake.read("comparisons", where={"fingerprint": eight.fingerprint})
    pw = comp.filter((pl.col("kind") == "pairwise") & (pl.col("metric") == "token_f1")).row(0, named=True)
    detail = json.loads(pw["detail"])
    assert detail.get("n_clusters") == 3, detail
    # per-sample trial statistics and pass@k / pass^k of the binary score, stored as comparisons rows
    trials = comp.filter(pl.col("kind") == "trials")
    assert sorted(zip(trials["model"], trials["metric"])) == [(m, s) for m in ("copy", "live") for s in ("exact_match", "token_f1")]
    em = trials.filter((pl.col("model") == "live") & (pl.col("metric") == "exact_match")).row(0, named=True)
    em_detail = json.loads(em["detail"])
    assert em_detail["k"] == 8 and em["n_total"] == 3 and sum(em_detail["pass_histogram"].values()) == 3
    passk = comp.filter((pl.col("kind") == "pass_k") & (pl.col("model") == "live"))
    assert sorted(json.loads(d)["k"] for d in passk["detail"]) == list(range(1, 9)) and set(passk["metric"]) == {"exact_match"}
    live_em = lake.read("scores", where={"fingerprint": eight.fingerprint, "metric": "exact_match", "model": "live"})
    k1 = passk.filter(pl.col("detail").str.contains('"k": 1,')).row(0, named=True)
    assert k1["mean"] == pytest.approx(live_em["value"].mean(), abs=1e-12)  # pass^1 = the mean pass rate
    # compare and the report show them
    from typer.testing import CliRunner

    from pipelines.cli import app

    shown = CliRunner().invoke(app, ["compare", "-e", eight.fingerprint, "--lake", lake.root], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "repeated trials" in shown.output and "pass^k" in shown.output and "flip rate" in shown.output
    page = tmp_path / "report.html"
    made = CliRunner().invoke(app, ["report", "-e", eight.fingerprint, "--out", str(page), "--lake", lake.root])
    assert made.exit_code == 0, made.output
    assert "<h3>Repeated trials</h3>" in page.read_text(encoding="utf-8")
    # the run's printed summary shows each model's tie group (issue 28: ties in compare, summary, report, SQL)
    from pipelines.runs.runner import summary_table

    printed = summary_table(lake, [eight.fingerprint])
    stored = {(r["model"], r["metric"]): json.loads(r["detail"]).get("tie_group")
              for r in comp.filter(pl.col("kind") == "model_metric").iter_rows(named=True)}
    assert {(r["model"], r["metric"]): r["tie group"] for r in printed.iter_rows(named=True)} == stored
    assert set(stored.values()) <= {1, 2} and 1 in stored.values()
    summary = lake.read("summary", where={"fingerprint": eight.fingerprint, "metric": "token_f1"})
    live = lake.read("scores", where={"fingerprint": eight.fingerprint, "metric": "token_f1", "model": "live"})
    assert summary.filter(pl.col("model") == "live")["mean"][0] == pytest.approx(live["value"].mean(), abs=1e-12)


def test_trials_are_refused_for_precomputed_outputs_and_bad_counts(tmp_path):
    from resources.catalog.spec import EvaluationSpec, SpecError

    base = {"name": "t", "dataset": {"kind": "sfres", "limit": 3}, "metrics": ["bleu"]}
    with pytest.raises(SpecError, match=r"sys read one stored output per sample \(precomputed:\)"):
        EvaluationSpec.from_mapping({**base, "models": {"sys": "precomputed:column=system_output"}, "trials": 3})
    for bad in (0, -1, 2.5, "4", True, 1001):
        with pytest.raises(SpecError, match="trials must be a whole number"):
            EvaluationSpec.from_mapping({**base, "models": {"c": "heuristic:copy-input"}, "trials": bad})
    assert EvaluationSpec.from_mapping({**base, "models": {"c": "heuristic:copy-input"}, "trials": 5}).trials == 5


def _judged_spec(tmp_path: Path, base_url: str, trials):
    from resources.catalog.spec import EvaluationSpec

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer": q.split()[-1]}) + "\n" for i, q in enumerate(QUESTIONS)))
    return EvaluationSpec.from_mapping({
        "name": "judged-trials",
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "models": {"copy": "heuristic:copy-input"},
        "metrics": ["g_eval"],
        "metric_params": {"g_eval": {"judge": f"api:judge@{base_url}"}},
        "trials": trials,
    })


def _judged(server: RecordingServer) -> Counter:
    """Judge requests per question (a G-Eval request about a sample carries its output, here the question)."""
    text = [json.dumps(json.loads(raw)) for raw in server.received]
    return Counter({q: sum(json.dumps(q)[1:-1] in t for t in text) for q in QUESTIONS})


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_repeated_judging_asks_the_judge_once_per_trial_and_a_larger_k_only_for_the_new_ones(server, tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    server.received.clear()
    two = run_evaluation(_judged_spec(tmp_path, server.base_url, {"k": 2, "repeat": "judging"}), lake, instance)
    per_question = _judged(server)
    assert set(per_question.values()) == {2}, per_question  # one output, judged twice
    gens = lake.read("generations", where={"fingerprint": two.fingerprint})
    assert sorted(gens["sample_id"].to_list()) == ["q0", "q1", "q2"]  # generated once
    scores = lake.read("scores", where={"fingerprint": two.fingerprint, "metric": "g_eval"})
    assert sorted(scores["sample_id"].to_list()) == sorted(f"q{i}#{t}" for i in range(3) for t in range(2))
    assert set(scores["status"]) == {"scored"}, scores["detail"].to_list()

    run_evaluation(_judged_spec(tmp_path, server.base_url, {"k": 3, "repeat": "judging"}), lake, instance)
    assert set(_judged(server).values()) == {3}  # trials 0 and 1 replayed from the judge cache; only trial 2 asked
    run_evaluation(_judged_spec(tmp_path, server.base_url, {"k": 3, "repeat": "judging"}), lake, instance)
    assert set(_judged(server).values()) == {3}
    # repeat: generation judges identical outputs once (one cached verdict shared by the trials)
    gen = run_evaluation(_judged_spec(tmp_path, server.base_url, {"k": 3, "repeat": "generation"}), lake, instance)
    assert set(_judged(server).values()) == {4}
    assert lake.read("scores", where={"fingerprint": gen.fingerprint, "metric": "g_eval"}).height == 9
    # the forms are distinct evaluations, and a stored spec reads back as written
    assert len({two.fingerprint, gen.fingerprint}) == 2
    assert _judged_spec(tmp_path, server.base_url, {"k": 3, "repeat": "judging"}).to_mapping()["trials"] == {"k": 3, "repeat": "judging"}
    assert _judged_spec(tmp_path, server.base_url, {"k": 3}).to_mapping()["trials"] == 3


def test_repeated_judging_takes_precomputed_outputs_and_bad_forms_are_refused():
    from resources.catalog.spec import EvaluationSpec, SpecError

    base = {"name": "t", "dataset": {"kind": "sfres", "limit": 3}, "metrics": ["bleu"], "models": {"sys": "precomputed:column=system_output"}}
    spec = EvaluationSpec.from_mapping({**base, "trials": {"k": 4, "repeat": "judging"}})
    assert (spec.trials, spec.trial_repeat) == (4, "judging")
    with pytest.raises(SpecError, match=r"repeat: judging"):
        EvaluationSpec.from_mapping({**base, "trials": {"k": 4, "repeat": "generation"}})
    with pytest.raises(SpecError, match="trials.repeat 'twice' is not one of both, generation, judging"):
        EvaluationSpec.from_mapping({**base, "trials": {"k": 4, "repeat": "twice"}})
    with pytest.raises(SpecError, match="trials takes k and repeat"):
        EvaluationSpec.from_mapping({**base, "trials": {"k": 4, "times": 2}})
