"""Pure comparison and meta-evaluation logic (metric_ops.compare, metric_ops.compare.meta_eval)
on planted data whose right answers are known."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from metric_ops import compare, stats
from metric_ops.compare import meta_eval

N = 60


def _rows(model, metric, values, direction="maximize", dimension="baseline_grounding", status=None):
    return [
        {"model": model, "sample_id": f"s{i:03d}", "metric": metric, "value": None if v is None else float(v),
         "direction": direction, "dimension": dimension, "status": (status or ("scored" if v is not None else "unscored"))}
        for i, v in enumerate(values)
    ]


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(0)
    base_f1 = rng.uniform(0.3, 0.9, N)
    better_f1 = np.clip(base_f1 + 0.15, 0, 1)  # improves every sample
    same_f1 = base_f1.copy()
    same_f1[:3] += 0.01  # a negligible change on 3 samples
    base_em = (rng.uniform(size=N) < 0.5).astype(float)
    worse_em = base_em.copy()
    ones = np.flatnonzero(base_em == 1)
    worse_em[ones[:20]] = 0.0  # 20 planted regressions on a 0/1 score
    latency = rng.uniform(1, 2, N)
    rows = (
        _rows("base", "token_f1", base_f1) + _rows("better", "token_f1", better_f1) + _rows("same", "token_f1", same_f1)
        + _rows("base", "exact_match", base_em) + _rows("better", "exact_match", base_em) + _rows("same", "exact_match", worse_em)
        + _rows("base", "seconds", latency, "minimize") + _rows("better", "seconds", latency * 2, "minimize")
        + _rows("same", "seconds", latency, "minimize")
        + _rows("base", "human:overall", rng.uniform(1, 5, N)) + _rows("better", "human:overall", rng.uniform(1, 5, N))
    )
    frame = pl.DataFrame(rows, schema_overrides={"value": pl.Float64})
    # one unscored row for "same": counts in n_total, not in n_scored
    extra = pl.DataFrame(_rows("same", "bleu", [None, 10.0, 20.0, 30.0]), schema_overrides={"value": pl.Float64})
    return pl.concat([frame, extra]), {"base_f1": base_f1, "better_f1": better_f1, "base_em": base_em, "worse_em": worse_em}


def test_model_statistics_winners_and_counts(planted):
    frame, v = planted
    rows = compare.metric_statistics(frame)
    by = {(r["model"], r["metric"]): r for r in rows}
    assert not any(m.startswith("human:") for _, m in by)  # ratings of the dataset output are not model scores
    assert by[("base", "token_f1")]["mean"] == pytest.approx(v["base_f1"].mean())
    assert by[("base", "token_f1")]["median"] == pytest.approx(np.median(v["base_f1"]))
    assert by[("better", "token_f1")]["is_winner"] and not by[("base", "token_f1")]["is_winner"]
    # minimise: the lower mean wins (base and same tie)
    assert by[("base", "seconds")]["is_winner"] and by[("same", "seconds")]["is_winner"] and not by[("better", "seconds")]["is_winner"]
    em = by[("base", "exact_match")]
    assert em["ci_method"] == "wilson"
    assert (em["ci_low"], em["ci_high"]) == pytest.approx(
        (stats.wilson_interval(int(v["base_em"].sum()), N).low, stats.wilson_interval(int(v["base_em"].sum()), N).high))
    assert by[("base", "token_f1")]["ci_method"] == "bootstrap-percentile"
    bleu = by[("same", "bleu")]
    assert (bleu["n_scored"], bleu["n_total"], bleu["mean"]) == (3, 4, pytest.approx(20.0))
    assert bleu["is_winner"] is None  # one model has it: no winner


def test_pairwise_verdicts_holm_and_effect_signs(planted):
    frame, v = planted
    rows = compare.compare_models(frame, baseline="base", n_permutations=4999)
    pw = {(r["model"], r["metric"]): r for r in rows if r["kind"] == "pairwise"}
    assert {r["baseline"] for r in pw.values()} == {"base"}
    f1 = pw[("better", "token_f1")]
    assert f1["verdict"] == "improved" and f1["effect_size"] > 0 and f1["test"] == "paired-permutation"
    assert f1["delta"] == pytest.approx(v["better_f1"].mean() - v["base_f1"].mean())
    assert f1["retention"] == pytest.approx(v["better_f1"].mean() / v["base_f1"].mean())
    secs = pw[("better", "seconds")]
    assert secs["verdict"] == "regressed" and secs["effect_size"] < 0  # slower is worse for a minimised score
    assert secs["retention"] == pytest.approx(0.5)  # baseline / candidate for minimise
    em = pw[("same", "exact_match")]
    assert em["test"] == "mcnemar-exact" and em["verdict"] == "regressed"
    assert em["p_value"] == pytest.approx(sps.binomtest(20, 20, 0.5).pvalue)
    assert pw[("same", "token_f1")]["verdict"] == "no significant difference"
    # Holm over the pairwise tests of each score name (its model pairs): a rescore of one
    # metric never changes another metric's verdicts
    ordered = [r for r in rows if r["kind"] == "pairwise"]
    for metric in {r["metric"] for r in ordered}:
        family = [r for r in ordered if r["metric"] == metric]
        assert [r["p_holm"] for r in family] == pytest.approx(stats.holm([r["p_value"] for r in family]))
        assert all(r["detail"]["holm_family_size"] == len(family) == 2 for r in family)


def test_sample_changes_list_the_planted_regressions(planted):
    frame, v = planted
    rows = compare.compare_models(frame, baseline="base", n_permutations=999, max_samples=50)
    changes = [r for r in rows if r["kind"] == "sample_change" and r["model"] == "same" and r["metric"] == "exact_match"]
    regressed = {r["sample_id"] for r in changes if r["verdict"] == "regressed"}
    planted_ids = {f"s{i:03d}" for i in np.flatnonzero((v["base_em"] == 1) & (v["worse_em"] == 0))}
    assert regressed == planted_ids
    still_wrong = {r["sample_id"] for r in changes if r["verdict"] == "still_wrong"}
    assert still_wrong == {f"s{i:03d}" for i in np.flatnonzero((v["base_em"] == 0) & (v["worse_em"] == 0))}
    worst = [r for r in rows if r["kind"] == "sample_change" and r["model"] == "better" and r["metric"] == "seconds"
             and r["verdict"] == "regressed"]
    assert worst[0]["delta"] == max(r["delta"] for r in worst)  # slowest-down first (minimise)


def test_all_pairs_without_baseline_and_unknown_baseline(planted):
    frame, _ = planted
    assert compare.model_pairs(["b", "a", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    with pytest.raises(ValueError, match="no scores"):
        compare.model_pairs(["a", "b"], baseline="zzz")


def test_tradeoff_pareto():
    metric_rows = [
        {"model": "fast", "metric": "f1", "direction": "maximize", "dimension": "x", "mean": 0.6},
        {"model": "good", "metric": "f1", "direction": "maximize", "dimension": "x", "mean": 0.8},
        {"model": "bad", "metric": "f1", "direction": "maximize", "dimension": "x", "mean": 0.5},
    ]
    res = {"fast": {"latency_s": 1.0}, "good": {"latency_s": 3.0}, "bad": {"latency_s": 2.0}}
    rows = {r["model"]: r for r in compare.tradeoff_rows(metric_rows, res)}
    assert rows["fast"]["detail"]["pareto_optimal_on"] == ["latency_s"]
    assert rows["good"]["detail"]["pareto_optimal_on"] == ["latency_s"]
    assert rows["bad"]["detail"]["pareto_optimal_on"] == []  # fast is quicker and better


def test_meta_eval_matches_scipy_and_flags_divergence():
    rng = np.random.default_rng(3)
    human = rng.uniform(1, 6, 50)
    a = human + rng.normal(0, 0.3, 50)  # tracks the ratings
    b = rng.uniform(0, 1, 50)  # same dimension, unrelated
    const = np.zeros(50)
    rows = (_rows("m", "a", a) + _rows("m", "b", b) + _rows("m", "c", const, dimension="factual")
            + _rows("m", "human:overall", human))
    frame = pl.DataFrame(rows, schema_overrides={"value": pl.Float64})
    out = {(r["metric_a"], r["metric_b"]): r for r in meta_eval.correlation_rows(frame)}
    ah = out[("a", "human:overall")]
    assert ah["kind"] == "metric-human"
    assert ah["pearson"] == pytest.approx(sps.pearsonr(a, human).statistic, abs=1e-12)
    assert ah["spearman"] == pytest.approx(sps.spearmanr(a, human).statistic, abs=1e-12)
    assert ah["kendall"] == pytest.approx(sps.kendalltau(a, human).statistic, abs=1e-12)
    ab = out[("a", "b")]
    assert ab["same_dimension"] and ab["divergent"] and ab["detail"]["most_disagreeing"]
    assert not ah["divergent"]  # a metric-human pair is meta-evaluation, not divergence
    assert out[("a", "c")]["pearson"] is None and "constant" in out[("a", "c")]["detail"]["notes"]["pearson"]
    # a minimised score that mirrors a maximised one agrees with it: not divergent
    mirror = pl.DataFrame(_rows("m", "faith", a) + _rows("m", "halluc", -a, "minimize"), schema_overrides={"value": pl.Float64})
    (pair,) = meta_eval.correlation_rows(mirror)
    assert pair["pearson"] == pytest.approx(-1.0) and pair["detail"]["pearson_oriented"] == pytest.approx(1.0)
    assert not pair["divergent"]
    no_human = meta_eval.correlation_rows(frame, include_human=False)
    assert all("human:" not in r["metric_a"] + r["metric_b"] for r in no_human)


def test_interval_test_and_effect_come_from_the_declaration(planted):
    """The issue's case: one model's token_f1 values happen to be all 0/1, the other's are
    not; both get the bootstrap and the permutation test (token_f1 is not declared 0/1),
    while exact_match (declared 0/1) gets Wilson and McNemar for every model."""
    frame, v = planted
    rng = np.random.default_rng(4)
    zero_one = (rng.uniform(size=N) < 0.6).astype(float)
    extra = pl.DataFrame(_rows("binaryish", "token_f1", zero_one) + _rows("binaryish", "exact_match", v["base_em"]),
                         schema_overrides={"value": pl.Float64})
    rows = compare.compare_models(pl.concat([frame, extra]), baseline="base", n_permutations=999)
    by = {(r["model"], r["metric"]): r for r in rows if r["kind"] == "model_metric"}
    assert {by[(m, "token_f1")]["ci_method"] for m in ("base", "binaryish", "better")} == {"bootstrap-percentile"}
    assert {by[(m, "exact_match")]["ci_method"] for m in ("base", "binaryish", "same")} == {"wilson"}
    pw = {(r["model"], r["metric"]): r for r in rows if r["kind"] == "pairwise"}
    assert pw[("binaryish", "token_f1")]["test"] == "paired-permutation"
    assert pw[("binaryish", "token_f1")]["effect_size_name"] == "cohens_dz"
    assert pw[("binaryish", "exact_match")]["test"] == "mcnemar-exact"
    # an explicit declaration overrides the registry
    rows = compare.compare_models(pl.concat([frame, extra]), baseline="base", n_permutations=999, binary={"token_f1"})
    by = {(r["model"], r["metric"]): r for r in rows if r["kind"] == "model_metric"}
    assert by[("binaryish", "token_f1")]["ci_method"] == "wilson"
    assert by[("base", "token_f1")]["ci_low"] is None and "declared 0/1" in by[("base", "token_f1")]["detail"]["note"]


def test_constant_shift_has_an_undefined_effect_size_with_its_reason():
    x = [0.2, 0.3, 0.4, 0.5] * 5
    y = [v + 0.1 for v in x]
    frame = pl.DataFrame(_rows("a", "token_f1", x) + _rows("b", "token_f1", y), schema_overrides={"value": pl.Float64})
    (row,) = [r for r in compare.compare_models(frame, n_permutations=999) if r["kind"] == "pairwise"]
    assert row["effect_size"] is None and row["effect_size_name"] == "cohens_dz"
    assert "no variance" in row["detail"]["effect_note"]
    assert row["detail"]["n_improved"] == 20 and row["detail"]["n_unchanged"] == 0
    assert row["verdict"] == "improved" and row["p_value"] < 1e-5  # every pair better: exact sign-flip p = 2 / 2**20


def test_metrics_restricts_the_work_to_the_named_scores(planted):
    frame, _ = planted
    rows = compare.compare_models(frame, baseline="base", n_permutations=99, metrics={"token_f1"})
    assert {r["metric"] for r in rows} == {"token_f1"}
    assert {r["kind"] for r in rows} == {"model_metric", "pairwise", "sample_change", "tradeoff"}
    full = {(r["kind"], r["model"], r["metric"], r.get("sample_id")): r for r in compare.compare_models(frame, baseline="base", n_permutations=99)}
    for r in rows:  # the same numbers as the full computation
        other = full[(r["kind"], r["model"], r["metric"], r.get("sample_id"))]
        assert r.get("mean") == other.get("mean") and r.get("p_value") == other.get("p_value") and r.get("p_holm") == other.get("p_holm")


def test_one_bootstrap_flavour_per_score_even_when_sample_sizes_straddle_the_threshold(monkeypatch):
    from metric_ops.stats import core as stats_core  # where bootstrap_resampling reads the threshold

    monkeypatch.setattr(stats_core, "WILD_BOOTSTRAP_ABOVE", 50 * 999)  # 40 values x 999 resamples below, 60 above
    rng = np.random.default_rng(2)
    frame = pl.DataFrame(_rows("small", "token_f1", rng.uniform(size=40)) + _rows("large", "token_f1", rng.uniform(size=60)),
                         schema_overrides={"value": pl.Float64})
    rows = [r for r in compare.metric_statistics(frame, n_resamples=999) if r["kind"] == "model_metric"]
    assert {r["ci_method"] for r in rows} == {"bootstrap-percentile (wild, Rademacher)"}
