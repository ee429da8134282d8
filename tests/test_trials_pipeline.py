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
        "metrics": ["token_f1"],
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
