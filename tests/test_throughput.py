"""Throughput is reported only where the backend generates (issue 19): reading a
precomputed file, lm-eval's responses or a heuristic rule measures nothing."""

from __future__ import annotations

import json


from resources.backends import GenerationResult, PrecomputedBackend
from resources.backends.planning import performance
from resources.backends.heuristic import HeuristicBackend


def _results() -> list[GenerationResult]:
    return [GenerationResult(sample_id=str(i), output="a b c", tokens_in=4, tokens_out=3) for i in range(10)]


def test_performance_leaves_throughput_out_when_nothing_was_measured():
    assert performance(_results(), 0.5, 1.0, {}, None)["tokens_per_s"] == 60.0  # 30 tokens / 0.5 s
    perf = performance(_results(), 0.5, 1.0, {}, None, measures_throughput=False)
    assert perf["tokens_per_s"] is None
    assert perf["tokens_out"] == 30 and perf["n_generated"] == 10  # the counts stay


def test_which_backends_measure_throughput():
    from resources.backends.api import APIBackend
    from resources.backends.hf import HFBackend
    from resources.lm_eval.bridge import LmEvalOutputBackend

    assert not PrecomputedBackend.measures_throughput
    assert not LmEvalOutputBackend.measures_throughput
    assert not HeuristicBackend.measures_throughput
    assert APIBackend.measures_throughput and HFBackend.measures_throughput


def test_a_precomputed_run_records_no_throughput(evaluated_lake):
    lake, resolved = evaluated_lake
    runs = lake.read("runs", where={"asset": "generations", "fingerprint": resolved.fingerprint})
    assert runs.height >= 1
    for provenance in runs["provenance"].to_list():
        perf = json.loads(provenance)["performance"]
        assert perf["tokens_per_s"] is None and perf["tokens_out"] > 0
