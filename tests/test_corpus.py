"""Corpus-level metrics (issue 15, kind 6): stored once per model with per-segment
sufficient statistics, compared by paired bootstrap and approximate randomisation as
sacrebleu does (same p-values at the same seed), corpus chrF / chrF++ against sacrebleu."""

from __future__ import annotations

import json
import random

import numpy as np
import polars as pl
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample

from metric_ops import compare, stats
from metric_ops.base import Sample
from metric_ops.scoring.corpus import CorpusStatistics
from metric_ops.lexical.bleu import bleu_from_totals
from metric_ops.lexical.chrf import chrf_from_totals
from metric_ops.registry import get_metric
from metric_ops.scoring.frame import score_rows
from tests.conftest import DATA_DIR

SACREBLEU_SEED = 12345  # sacrebleu's default SACREBLEU_SEED
VOCAB = ("the a cat dog sat ran on under mat rug house garden quickly slowly red blue big small bird fish tree "
         "road river hill city old new happy sad").split()


def noisy_pair(seed: int, n: int = 30, words: int = 12, replaced: int = 4):
    """The issue's setting: n reference segments of `words` words; two systems, each
    with `replaced` words of every segment replaced at random, independently."""
    rnd = random.Random(seed)
    refs = [" ".join(rnd.choice(VOCAB) for _ in range(words)) for _ in range(n)]

    def noisy(ref: str) -> str:
        w = ref.split()
        for i in rnd.sample(range(words), replaced):
            w[i] = rnd.choice(VOCAB)
        return " ".join(w)

    return refs, [noisy(r) for r in refs], [noisy(r) for r in refs]


def _score_frame(metric_name: str, refs, systems: dict[str, list[str]], **params) -> pl.DataFrame:
    samples = [Sample(f"s{i:03d}", "input", (r,)) for i, r in enumerate(refs)]
    metric = get_metric(metric_name, **params)
    rows = []
    for model, outputs in systems.items():
        for row in score_rows(metric, samples, outputs):
            rows.append({**row, "model": model})
    return pl.DataFrame(rows, schema_overrides={"value": pl.Float64, "sample_id": pl.String})


# --------------------------------------------------------------------------- aggregates
@pytest.mark.parametrize("settings", [{}, {"smooth_method": "floor"}, {"smooth_method": "add-k"}, {"smooth_method": "none"},
                                      {"effective_order": True}, {"smooth_method": "floor", "smooth_value": 0.3}])
def test_vectorised_bleu_equals_sacrebleu_on_every_row(settings):
    bleu = BLEU(**settings)
    rng = np.random.default_rng(0)
    totals = rng.integers(0, 6, size=(2000, 10)).astype(float)
    totals[:, 6:] += totals[:, 2:6]  # totals >= matches
    totals[::7, 6:] = 0  # no n-grams at all
    totals[::11, 2:6] = 0  # no matches
    totals[::13, 0] = 0  # empty hypothesis
    totals[::17, 9] = 0  # no 4-grams
    ours = bleu_from_totals(totals, 4, bleu.smooth_method, bleu.smooth_value, bleu.effective_order)
    ref = np.array([bleu._compute_score_from_stats(list(t)).score for t in totals])
    assert np.abs(ours - ref).max() < 1e-12  # numpy's exp/log vs math's: last-bit differences only


@pytest.mark.parametrize("word_order,beta,eps", [(0, 2, False), (2, 2, False), (0, 1, False), (2, 3, True), (1, 2, False)])
def test_vectorised_chrf_equals_sacrebleu_on_every_row(word_order, beta, eps):
    chrf = CHRF(word_order=word_order, beta=beta, eps_smoothing=eps)
    rng = np.random.default_rng(word_order + beta)
    totals = rng.integers(0, 9, size=(2000, 3 * (6 + word_order))).astype(float)
    totals[::5] = 0
    totals[::3, 0::3] = 0  # no hypothesis n-grams
    ours = chrf_from_totals(totals, 6, word_order, beta, eps)
    ref = np.array([chrf._compute_score_from_stats(list(t)).score for t in totals])
    assert np.abs(ours - ref).max() == 0.0


# --------------------------------------------------------------------------- corpus chrF
def test_corpus_chrf_known_answer_from_the_issue():
    hyps = ["the cat sat on the mat", "a dog barked loudly", ""]
    refs = ["the cat sat on the mat", "the dog barked loudly", "birds fly south"]
    samples = [Sample(str(i), "x", (r,)) for i, r in enumerate(refs)]
    rows = score_rows(get_metric("corpus_chrf"), samples, hyps)
    (row,) = rows
    assert row["sample_id"] is None and row["status"] == "scored"
    assert round(row["value"], 2) == 71.05
    assert row["value"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-12)
    (pp,) = score_rows(get_metric("corpus_chrf++"), samples, hyps)
    assert pp["metric"] == "corpus_chrf_pp" and pp["value"] == pytest.approx(CHRF(word_order=2).corpus_score(hyps, [refs]).score, abs=1e-12)
    stats_ = CorpusStatistics.from_detail(row["detail"])
    assert stats_.sample_ids == ["0", "1", "2"] and stats_.score() == pytest.approx(row["value"], abs=1e-12)


@pytest.mark.parametrize("name,word_order", [("corpus_chrf", 0), ("corpus_chrf_pp", 2)])
def test_corpus_chrf_equals_sacrebleu_on_real_sfres_outputs(name, word_order):
    data = json.loads((DATA_DIR / "unieval" / "sfres.json").read_text())
    hyps = [d["system_output"] for d in data]
    refs = [d["reference"] for d in data]
    samples = [Sample(str(d["doc_id"]) + f"-{i}", d["source"], (d["reference"],)) for i, d in enumerate(data)]
    (row,) = score_rows(get_metric(name), samples, hyps)
    assert row["value"] == pytest.approx(CHRF(word_order=word_order).corpus_score(hyps, [refs]).score, abs=1e-9)
    detail = json.loads(row["detail"])
    assert detail["n_segments"] == len(data) and len(detail["statistics"]["values"]) == len(data)
    assert detail["statistics"]["params"]["word_order"] == word_order


def test_corpus_rows_keep_unscored_segments_apart_and_store_one_value():
    refs = ["the cat sat on the mat", "a dog ran", "birds fly south", "big red house"]
    samples = [Sample(f"s{i}", "x", (r,)) for i, r in enumerate(refs)] + [Sample("noref", "x", ())]
    outputs = ["the cat sat on a mat", "a dog ran", None, "big blue house", "anything"]
    rows = score_rows(get_metric("corpus_bleu"), samples, outputs)
    corpus = [r for r in rows if r["sample_id"] is None]
    segments = [r for r in rows if r["sample_id"] is not None]
    assert len(corpus) == 1 and corpus[0]["status"] == "scored"
    assert {r["sample_id"]: r["status"] for r in segments} == {"s2": "unscored", "noref": "unscored"}
    assert all(r["value"] is None for r in segments)  # nothing with a value is copied onto sample rows
    scored = [0, 1, 3]
    expected = BLEU().corpus_score([outputs[i] for i in scored], [[refs[i] for i in scored]]).score
    assert corpus[0]["value"] == pytest.approx(expected, abs=1e-12)
    detail = json.loads(corpus[0]["detail"])
    assert (detail["n_segments"], detail["n_unscored_segments"]) == (3, 2)
    assert detail["statistics"]["sample_ids"] == ["s0", "s1", "s3"]
    # nothing scorable: no corpus value at all (never 0); the segments' rows say why
    none = score_rows(get_metric("corpus_bleu"), samples[:2], [None, None])
    assert [(r["sample_id"], r["status"], r["value"]) for r in none] == [("s0", "unscored", None), ("s1", "unscored", None)]


def test_corpus_value_is_clamped_only_for_float_rounding():
    # identical hypothesis and reference: 100 up to rounding, stored as exactly 100 with the raw value kept when clamped
    samples = [Sample(f"s{i}", "x", (t,)) for i, t in enumerate(["the cat sat", "a dog ran off", "birds fly south now"])]
    (row,) = score_rows(get_metric("corpus_bleu"), samples, [s.references[0] for s in samples])
    assert row["value"] == 100.0 and row["status"] == "scored"
    raw = json.loads(row["detail"]).get("raw_value", row["value"])
    assert abs(raw - 100.0) <= 1e-9


# --------------------------------------------------------------------------- significance against sacrebleu
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("metric_name,sacre", [("corpus_bleu", BLEU), ("corpus_chrf", CHRF)])
def test_paired_tests_equal_sacrebleu_at_the_same_seed(seed, metric_name, sacre):
    refs, a, b = noisy_pair(seed)
    metric = sacre()
    expected = {}
    for test_type, n in (("bs", 1000), ("ar", 10000)):
        _, res = PairedTest([("A", a), ("B", b)], {"m": sacre()}, [refs], test_type=test_type, n_samples=n)()
        key = next(k for k in res if k != "System")
        expected[test_type] = res[key][1]
    sa = np.array(metric._extract_corpus_statistics(a, [refs]), float)
    sb = np.array(metric._extract_corpus_statistics(b, [refs]), float)
    agg = (lambda t: bleu_from_totals(t)) if sacre is BLEU else (lambda t: chrf_from_totals(t))
    # sacrebleu's strict rule (ties not counted) reproduces its p exactly; the product's default counts ties
    bs = stats.paired_bootstrap_corpus(sa, sb, agg, 1000, seed=SACREBLEU_SEED, count_ties=False)
    ar = stats.approximate_randomization(sa, sb, agg, 10000, seed=SACREBLEU_SEED, count_ties=False)
    assert bs.p_value == expected["bs"].p_value  # same resamples, same rule: the same p, exactly
    assert ar.p_value == expected["ar"].p_value
    assert ar.statistic == pytest.approx(expected["ar"].score - sacre().corpus_score(a, [refs]).score, abs=1e-9)
    # sacrebleu sums the resampled statistics in float32: its bootstrap means agree to ~1e-6
    assert bs.extra["bootstrap_mean"] == pytest.approx(expected["bs"].mean, abs=1e-4)
    assert bs.extra["bootstrap_halfwidth"] == pytest.approx(expected["bs"].ci, abs=1e-4)


def test_corpus_bootstrap_resamples_are_sacrebleus():
    refs, a, _ = noisy_pair(11)
    bleu = BLEU()
    raw = bleu._extract_corpus_statistics(a, [refs])
    _, theirs = _bootstrap_resample(raw, bleu, 1000)  # seeded from SACREBLEU_SEED (12345)
    ours = stats.corpus_bootstrap(np.array(raw, float), bleu_from_totals, 1000, seed=SACREBLEU_SEED)
    assert np.abs(ours - np.array([s.score for s in theirs])).max() < 1e-4  # float32 sums in sacrebleu


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_two_equally_noisy_systems_are_not_regressed(seed):
    """The issue's example: per-sample tests over a copied corpus value gave p = 0.0002,
    a zero-width interval and d_z = -2.6e15; over resampled statistics they are honest."""
    refs, a, b = noisy_pair(seed)
    frame = _score_frame("corpus_bleu", refs, {"base": a, "cand": b})
    assert frame.filter(pl.col("metric") == "corpus_bleu").height == 2  # once per model
    rows = compare.compare_models(frame, baseline="base", seed=SACREBLEU_SEED, n_permutations=10000, n_resamples=1000)
    (pw,) = [r for r in rows if r["kind"] == "pairwise"]
    _, res = PairedTest([("A", a), ("B", b)], {"m": BLEU()}, [refs], test_type="ar", n_samples=10000)()
    key = next(k for k in res if k != "System")
    # the product counts ties (issue 28): sacrebleu's strict count plus the trials that tie exactly
    sa, sb = (np.array(BLEU()._extract_corpus_statistics(x, [refs]), float) for x in (a, b))
    with_ties = stats.approximate_randomization(sa, sb, bleu_from_totals, 10000, seed=SACREBLEU_SEED).p_value
    assert pw["test"] == "approximate-randomization" and pw["p_value"] == with_ties >= res[key][1].p_value
    assert pw["p_value"] > 0.05 and pw["verdict"] == "no significant difference"
    assert pw["n_pairs"] == 30 and pw["effect_size"] is None
    _, res_bs = PairedTest([("A", a), ("B", b)], {"m": BLEU()}, [refs], test_type="bs", n_samples=1000)()
    assert pw["detail"]["paired_bootstrap_p"] >= res_bs[key][1].p_value  # reported beside the verdict's AR test (ties counted)
    assert pw["detail"]["delta_ci_low"] < pw["delta"] < pw["detail"]["delta_ci_high"]
    assert not [r for r in rows if r["kind"] == "sample_change"]  # a corpus value has no per-sample changes
    stats_rows = {r["model"]: r for r in rows if r["kind"] == "model_metric"}
    base = stats_rows["base"]
    assert base["mean"] == pytest.approx(BLEU().corpus_score(a, [refs]).score, abs=1e-9)
    assert base["n_scored"] == base["n_total"] == 30 and base["median"] is None
    assert base["ci_method"] == "bootstrap-percentile (corpus)" and base["ci_high"] - base["ci_low"] > 5.0


def test_a_clearly_better_system_is_improved_and_models_compare_over_common_segments():
    refs, a, _ = noisy_pair(21)
    b = list(refs)  # perfect copies: better on every segment
    b[3] = None  # one failed generation: unscored, compared over the other 29 segments
    samples = [Sample(f"s{i:03d}", "x", (r,)) for i, r in enumerate(refs)]
    metric = get_metric("corpus_chrf")
    rows = [{**r, "model": "base"} for r in score_rows(metric, samples, a)] + [{**r, "model": "cand"} for r in score_rows(metric, samples, b)]
    frame = pl.DataFrame(rows, schema_overrides={"value": pl.Float64, "sample_id": pl.String})
    out = compare.compare_models(frame, baseline="base", n_permutations=2000, n_resamples=500)
    (pw,) = [r for r in out if r["kind"] == "pairwise"]
    assert pw["verdict"] == "improved" and pw["n_pairs"] == 29 and pw["p_value"] < 0.01
    keep = [i for i in range(30) if i != 3]
    assert pw["baseline_mean"] == pytest.approx(CHRF().corpus_score([a[i] for i in keep], [[refs[i] for i in keep]]).score, abs=1e-9)
    assert "29 segments both models scored" in pw["detail"]["subset_note"]
    cand = next(r for r in out if r["kind"] == "model_metric" and r["model"] == "cand")
    assert (cand["n_scored"], cand["n_total"], cand["mean"]) == (29, 30, pytest.approx(100.0))


def test_old_format_corpus_rows_are_not_used_as_per_sample_values():
    refs, a, b = noisy_pair(31)
    rows = []
    for model, outs in (("base", a), ("cand", b)):
        value = BLEU().corpus_score(outs, [refs]).score
        for i in range(30):  # the pre-issue-15 format: the corpus value on every row
            rows.append({"model": model, "sample_id": f"s{i:03d}", "metric": "corpus_bleu", "value": value, "direction": "maximize",
                         "dimension": "baseline_grounding", "status": "scored", "detail": json.dumps({"level": "corpus", "stats": [1]})})
    out = compare.compare_models(pl.DataFrame(rows), baseline="base")
    assert not [r for r in out if r["kind"] == "pairwise"]
    base = next(r for r in out if r["kind"] == "model_metric" and r["model"] == "base")
    assert base["mean"] is None and "rescore it" in base["detail"]["note"]


def test_idf_bertscore_is_stored_once_per_score_as_the_corpus_mean():
    data = json.loads((DATA_DIR / "unieval" / "sfres.json").read_text())[:6]
    samples = [Sample(f"s{i}", d["source"], (d["reference"],)) for i, d in enumerate(data)]
    outputs = [d["system_output"] for d in data]
    metric = get_metric("bertscore", idf=True)
    per_sample = metric.score_batch(samples, outputs)
    rows = score_rows(metric, samples, outputs)
    assert [r["sample_id"] for r in rows] == [None, None, None]
    for row in rows:
        expected = np.mean([s[row["metric"]].value for s in per_sample])
        assert row["value"] == pytest.approx(expected, abs=1e-12)
        st = CorpusStatistics.from_detail(row["detail"])
        assert st.kind == "mean" and st.values[:, 1].tolist() == [1.0] * 6


def test_corpus_scores_with_different_settings_are_not_compared():
    refs, a, b = noisy_pair(41)
    samples = [Sample(f"s{i:03d}", "x", (r,)) for i, r in enumerate(refs)]
    rows = [{**r, "model": "base"} for r in score_rows(get_metric("corpus_bleu"), samples, a)]
    rows += [{**r, "model": "cand"} for r in score_rows(get_metric("corpus_bleu", smooth_method="floor"), samples, b)]
    out = compare.compare_models(pl.DataFrame(rows, schema_overrides={"sample_id": pl.String}), baseline="base")
    (pw,) = [r for r in out if r["kind"] == "pairwise"]
    assert pw["p_value"] is None and pw["verdict"] == "untested" and "different settings" in pw["detail"]["test_note"]
