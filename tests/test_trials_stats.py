"""Repeated-trial statistics (issue 28, metric_ops/stats/trials.py): pass@k / pass^k for any
binary metric equal the closed forms and an enumeration of every k-subset; the flip rate
equals its closed form; the hierarchical bootstrap widens with trial noise and reduces to
the item bootstrap when trials agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metric_ops.stats.trials import (
    all_subsets_pass,
    binary_pass_k,
    flip_rate,
    hierarchical_bootstrap_ci,
    sample_trials,
    split_trial,
    trial_id,
    trials_by_sample,
)


@pytest.fixture(scope="module")
def synthetic_100x8():
    """100 tasks x 8 trials of a binary metric, each task its own pass probability (seeded)."""
    rng = np.random.default_rng(28)
    p = rng.beta(0.8, 0.8, 100)
    outcomes = (rng.random((100, 8)) < p[:, None]).astype(float)
    ids = [trial_id(f"task-{i:03d}", t) for i in range(100) for t in range(8)]
    return ids, outcomes.reshape(-1).tolist(), outcomes


def test_trial_ids_round_trip():
    assert trial_id("q#1", 3) == "q#1#3" and split_trial("q#1#3") == ("q#1", 3)
    assert split_trial("plain") == ("plain", None) and split_trial("abc#x") == ("abc#x", None)
    with pytest.raises(ValueError, match="trial index"):
        trial_id("q", -1)


def test_pass_at_k_and_pass_hat_k_equal_the_closed_forms_to_1e_12(synthetic_100x8):
    ids, values, outcomes = synthetic_100x8
    grouped = trials_by_sample(ids, values)
    assert len(grouped) == 100 and all(len(v) == 8 for v in grouped.values())
    curve = binary_pass_k(grouped, n_resamples=200)
    c = outcomes.sum(axis=1).astype(int)
    for res in curve:
        k = res.k
        at = np.mean([1 - math.comb(8 - ci, k) / math.comb(8, k) for ci in c])
        hat = np.mean([math.comb(ci, k) / math.comb(8, k) for ci in c])
        assert res.n_tasks == 100 and res.n_excluded == 0
        assert abs(res.pass_at_k - at) <= 1e-12 and abs(res.pass_hat_k - hat) <= 1e-12
    # and an independent reference: every k-subset of every task's trials enumerated
    for k in (1, 3, 8):
        enum = np.array([all_subsets_pass([bool(x) for x in row], k) for row in outcomes])
        res = curve[k - 1]
        assert abs(res.pass_at_k - enum[:, 0].mean()) <= 1e-12 and abs(res.pass_hat_k - enum[:, 1].mean()) <= 1e-12


def test_pass_k_refuses_a_graded_metric():
    with pytest.raises(ValueError, match="binary metric.*'q'.*0.5"):
        binary_pass_k({"q": [1.0, 0.5]})


def test_flip_rate_and_per_sample_statistics():
    # binary: 2 c (n - c) / (n (n - 1))
    for n in range(2, 9):
        for c in range(n + 1):
            vals = [1.0] * c + [0.0] * (n - c)
            assert flip_rate(vals) == pytest.approx(2 * c * (n - c) / (n * (n - 1)), abs=1e-15)
    # graded: pairs enumerated
    vals = [0.2, 0.2, 0.7, 0.9]
    pairs = [(a, b) for i, a in enumerate(vals) for b in vals[i + 1:]]
    assert flip_rate(vals) == pytest.approx(sum(a != b for a, b in pairs) / len(pairs), abs=1e-15)
    assert flip_rate([1.0]) is None
    stats = sample_trials({"a": [1, 0, 1, 1], "b": [0.5]})
    assert stats[0].mean == 0.75 and stats[0].variance == pytest.approx(np.var([1, 0, 1, 1], ddof=1))
    assert stats[0].flip_rate == pytest.approx(0.5) and stats[1].variance is None and stats[1].flip_rate is None
    with pytest.raises(ValueError, match="no trial"):
        sample_trials({"x": []})
    with pytest.raises(ValueError, match="trial 1 twice"):
        trials_by_sample(["a#1", "a#1"], [1, 0])


@pytest.mark.parametrize("wild", [False, True])
def test_hierarchical_bootstrap_reduces_to_the_item_bootstrap_when_trials_agree_and_widens_with_trial_noise(wild):
    rng = np.random.default_rng(5)
    item_means = rng.normal(0.5, 0.2, 300)
    items = [f"s{i}" for i in range(300) for _ in range(4)]
    agree = np.repeat(item_means, 4)
    noisy = agree + rng.normal(0, 0.4, agree.size)
    # the resampling bootstrap and, for large inputs, its wild form: the same variance components
    a = hierarchical_bootstrap_ci(agree, items, n_resamples=1000 if not wild else 4000, seed=1, wild=wild)
    b = hierarchical_bootstrap_ci(noisy, items, n_resamples=1000 if not wild else 4000, seed=1, wild=wild)
    assert a.method == ("hierarchical-wild-bootstrap-percentile" if wild else "hierarchical-bootstrap-percentile")
    se_items = item_means.std(ddof=1) / math.sqrt(300)
    assert a.mean == pytest.approx(item_means.mean(), abs=1e-12)
    assert (a.high - a.low) == pytest.approx(2 * 1.96 * se_items, rel=0.10)  # percentile vs normal width, 1000 draws
    # with trial noise the interval is wider. Resampling trials inside resampled items counts the
    # trial variance once through the item means and once more through the trial draw
    # (Davison & Hinkley 1997, section 3.8): Var = (s_item^2 + s_trial^2 / m + s_trial^2 (m - 1) / m^2) / n
    m = 4
    expect = 2 * 1.96 * math.sqrt((0.2 ** 2 + 0.4 ** 2 / m + 0.4 ** 2 * (m - 1) / m ** 2) / 300)
    assert (b.high - b.low) > (a.high - a.low) and (b.high - b.low) == pytest.approx(expect, rel=0.15)
    assert (a.n_items, a.n_clusters, a.n_trials) == (300, 300, 1200)


@pytest.mark.parametrize("wild", [False, True])
def test_hierarchical_bootstrap_with_clusters_matches_the_cluster_level_variance(wild):
    rng = np.random.default_rng(9)
    n_cl, per = 40, 5
    cl_effect = rng.normal(0, 0.3, n_cl)
    values, items, clusters = [], [], []
    for c in range(n_cl):
        for i in range(per):
            for t in range(2):
                values.append(cl_effect[c] + rng.normal(0, 0.1))
                items.append(f"c{c}i{i}")
                clusters.append(f"c{c}")
    res = hierarchical_bootstrap_ci(values, items, clusters, n_resamples=2000, seed=2, wild=wild)
    naive = hierarchical_bootstrap_ci(values, items, None, n_resamples=2000, seed=2, wild=wild)
    cluster_means = np.array(values).reshape(n_cl, -1).mean(axis=1)
    se = cluster_means.std(ddof=1) / math.sqrt(n_cl)
    assert (res.high - res.low) == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert (res.high - res.low) > 1.8 * (naive.high - naive.low)  # ignoring clusters is far too narrow
    with pytest.raises(ValueError, match="one cluster"):
        hierarchical_bootstrap_ci([1, 2], ["a", "a"], ["x", "y"])


def _score_frame(ids, values, model="m", metric="exact_match", direction="maximize"):
    import polars as pl

    return pl.DataFrame({"model": model, "metric": metric, "sample_id": ids, "value": values, "status": "scored",
                         "direction": direction, "dimension": "correctness"})


def test_trial_rows_store_flip_rate_pass_k_and_the_worst_samples(synthetic_100x8):
    from metric_ops.stats.trials import trial_rows

    ids, values, outcomes = synthetic_100x8
    rows = trial_rows(_score_frame(ids, values), n_resamples=200)
    trials = [r for r in rows if r["kind"] == "trials"]
    passk = {r["detail"]["k"]: r for r in rows if r["kind"] == "pass_k"}
    assert len(trials) == 1 and sorted(passk) == list(range(1, 9))
    t = trials[0]
    c = outcomes.sum(axis=1).astype(int)
    # mean flip rate = mean of 2c(n-c)/(n(n-1)) per task, to 1e-12
    assert abs(t["mean"] - np.mean(2 * c * (8 - c) / 56)) <= 1e-12
    assert t["n_scored"] == t["n_total"] == 100 and t["detail"]["k"] == 8
    assert t["detail"]["pass_histogram"] == {str(v): int((c == v).sum()) for v in sorted(set(c.tolist()))}
    fewest = t["detail"]["fewest_passes"]
    assert [x[1] for x in fewest] == sorted(c.tolist())[:5] and all(x[2] == 8 for x in fewest)
    assert t["ci_low"] <= t["detail"]["score_mean"] <= t["ci_high"] and abs(t["detail"]["score_mean"] - outcomes.mean()) <= 1e-12
    for k, row in passk.items():
        assert abs(row["mean"] - np.mean([math.comb(ci, k) / math.comb(8, k) for ci in c])) <= 1e-12
        assert abs(row["detail"]["pass_at_k"] - np.mean([1 - math.comb(8 - ci, k) / math.comb(8, k) for ci in c])) <= 1e-12
    # a graded score: a trials row (flip rate over exact values), no pass_k rows
    graded = trial_rows(_score_frame(["a#0", "a#1", "b#0", "b#1"], [0.5, 0.5, 0.2, 0.9], metric="token_f1"), n_resamples=50)
    assert [r["kind"] for r in graded] == ["trials"]
    assert graded[0]["mean"] == 0.5 and graded[0]["detail"]["unstable"] == 1 and "pass_histogram" not in graded[0]["detail"]
    assert graded[0]["detail"]["lowest"][0] == ["a", 0.5]


def test_min_trials_passed_gate_fires_naming_the_samples_below_m():
    from metric_ops.gates import GateError, GateRules, evaluate_gates
    from metric_ops.stats.trials import trial_rows

    # cand: q0 passes 4/4, q1 2/4, q2 0/4; base: 4/4 everywhere
    ids = [f"q{i}#{t}" for i in range(3) for t in range(4)]
    cand = [1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    import polars as pl

    frame = pl.concat([_score_frame(ids, [float(v) for v in cand], model="cand"), _score_frame(ids, [1.0] * 12, model="base")])
    rows = trial_rows(frame, n_resamples=50)
    fire = lambda m: [f for f in evaluate_gates(rows, "base", GateRules.from_mapping({"min_trials_passed": {"exact_match": m}})).fired
                      if f.gate == "min_trials_passed"]
    assert fire(1)[0].worst == ("q2",) and "1 of 3 samples passed fewer than 1 of 4 trials" in fire(1)[0].message
    assert fire(3)[0].worst == ("q2", "q1") and fire(3)[0].model == "cand"  # the baseline is not gated
    assert fire(4)[0].worst == ("q2", "q1")
    none = trial_rows(_score_frame(ids, [1.0] * 12, model="cand"), n_resamples=50)
    assert not evaluate_gates(none, None, GateRules.from_mapping({"min_trials_passed": {"*": 4}})).fired
    for bad in (0, 2.5, -1):
        with pytest.raises(GateError, match="whole number of trials"):
            GateRules.from_mapping({"min_trials_passed": {"exact_match": bad}})
