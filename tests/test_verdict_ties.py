"""Resampling tests count ties (issue 28; jhclark/multeval#3, huggingface/evaluate#795).

A resampling test's p-value counts the null statistics at least as extreme as the observed
one (|d*| >= |d|) with the +1 correction: two identical systems get p = 1 in every paired
test of the product, no p-value is below 1/(R+1), and a one-word change in one of 30 real
segments is "no significant difference" (the strict count that multeval and sacrebleu use
made it p = 1/(R+1), "regressed")."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from sacrebleu.metrics import BLEU, CHRF

from metric_ops import compare, stats
from metric_ops.agents.passk import paired_pass_k
from metric_ops.base import Sample
from metric_ops.lexical.bleu import bleu_from_totals
from metric_ops.lexical.chrf import chrf_from_totals
from metric_ops.registry import get_metric
from metric_ops.scoring.frame import score_rows
from tests.conftest import DATA_DIR


def _sfres(n: int = 30):
    data = json.loads((DATA_DIR / "unieval" / "sfres.json").read_text())[:n]
    return [d["reference"] for d in data], [d["system_output"] for d in data]


def _one_word_changed(outputs: list[str]) -> list[str]:
    changed = list(outputs)
    words = changed[7].split()
    words[1] = "restaurant" if words[1] != "restaurant" else "place"
    changed[7] = " ".join(words)
    return changed


def _stats(metric, hyps, refs):
    return np.array(metric._extract_corpus_statistics(hyps, [refs]), float)


@pytest.mark.parametrize("sacre,agg", [(BLEU, bleu_from_totals), (CHRF, chrf_from_totals)])
def test_identical_systems_get_p_one_in_the_corpus_tests(sacre, agg):
    refs, hyps = _sfres()
    s = _stats(sacre(), hyps, refs)
    ar = stats.approximate_randomization(s, s.copy(), agg, 2000, seed=3)
    bs = stats.paired_bootstrap_corpus(s, s.copy(), agg, 1000, seed=3)
    assert ar.p_value == 1.0 and bs.p_value == 1.0
    # the strict rule of sacrebleu/multeval gives the smallest possible p on the same input
    strict = stats.approximate_randomization(s, s.copy(), agg, 2000, seed=3, count_ties=False)
    assert strict.p_value == pytest.approx(1 / 2001, abs=1e-15)


def test_identical_systems_get_p_one_in_the_per_sample_tests():
    refs, hyps = _sfres()
    rows = score_rows(get_metric("token_f1"), [Sample(str(i), "x", (r,)) for i, r in enumerate(refs)], hyps)
    values = np.array([r["value"] for r in rows], float)
    assert stats.paired_permutation_test(values, values.copy()).p_value == 1.0
    binary = (values > 0.5).astype(float)
    assert stats.mcnemar_exact(binary, binary.copy()).p_value == 1.0
    trials = {f"t{i}": [bool(v) for v in row] for i, row in enumerate(np.random.default_rng(0).random((20, 4)) > 0.4)}
    assert paired_pass_k(trials, dict(trials), 2).p_value == 1.0


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_no_p_value_below_one_over_r_plus_one(seed):
    rng = np.random.default_rng(seed)
    refs, hyps = _sfres()
    base = _stats(BLEU(), hyps, refs)
    cand = base * rng.uniform(1.0, 1.5, base.shape)  # a clearly better pseudo-system
    for r in (99, 999):
        assert stats.approximate_randomization(base, cand, bleu_from_totals, r, seed).p_value >= 1 / (r + 1)
        assert stats.paired_bootstrap_corpus(base, cand, bleu_from_totals, r, seed).p_value >= 1 / (r + 1)


def test_one_word_changed_in_one_of_thirty_segments_is_no_significant_difference():
    refs, hyps = _sfres()
    changed = _one_word_changed(hyps)
    assert BLEU().corpus_score(hyps, [refs]).score != BLEU().corpus_score(changed, [refs]).score
    ar = stats.approximate_randomization(_stats(BLEU(), hyps, refs), _stats(BLEU(), changed, refs), bleu_from_totals, 10000, 0)
    assert ar.p_value == 1.0  # every trial reproduces +-d: all are ties
    samples = [Sample(f"s{i:03d}", "x", (r,)) for i, r in enumerate(refs)]
    metric = get_metric("corpus_bleu")
    rows = [{**r, "model": "v1"} for r in score_rows(metric, samples, hyps)]
    rows += [{**r, "model": "v2"} for r in score_rows(metric, samples, changed)]
    out = compare.compare_models(pl.DataFrame(rows, schema_overrides={"sample_id": pl.String}), baseline="v1")
    (pw,) = [r for r in out if r["kind"] == "pairwise" and r["metric"] == "corpus_bleu"]
    assert pw["delta"] != 0 and pw["p_value"] == 1.0 and pw["p_holm"] == 1.0
    assert pw["verdict"] == "no significant difference"
    from metric_ops.gates import evaluate_gates

    assert evaluate_gates(out, "v1").passed  # the gate passes: nothing to fail a release on
