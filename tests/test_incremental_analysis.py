"""Cost proportional to the change (issue 14): after `facetlake score --metric M` only M's
summary, comparisons and correlations rows are recomputed. Checked by counting work
(which rows got the rescore's run id, which statistics were called, what the runs
provenance lists), never by timing. Also: a corpus-level metric lands in the lake once
per model (issue 15) and flows through summary, comparisons and the evidence export."""

from __future__ import annotations

import json
import sys
from collections import Counter

import polars as pl
import pytest
from sacrebleu.metrics import CHRF

from tests.conftest import small_spec

KEY = ["kind", "model", "baseline", "metric", "sample_id"]


def _latest(lake, asset, fp):
    runs = lake.read("runs", where={"asset": asset, "fingerprint": fp}).sort("finished_at")
    return runs.row(-1, named=True)


def _run_ids(frame: pl.DataFrame, by: list[str]) -> dict:
    return {tuple(r[k] for k in by): r["run_id"] for r in frame.iter_rows(named=True)}


@pytest.fixture
def two_models(lake_copy, instance):
    """40 real SF-RES rows scored for the shipped system and the copy-input heuristic,
    with summary, comparisons and correlations materialised."""
    from pipelines.runs.runner import materialize_analysis, materialize_model
    from pipelines.runs.register import register

    lake, resolved = lake_copy
    spec = small_spec()
    spec.models["copy-input"] = "heuristic:copy-input"
    spec.baseline = "sfres-system"
    assert register(spec, lake, instance).fingerprint == resolved.fingerprint
    materialize_model("copy-input", resolved.fingerprint, lake, instance)
    materialize_analysis(resolved.fingerprint, lake, instance, with_summary=True)
    return lake, resolved.fingerprint


@pytest.fixture
def count_tests(monkeypatch):
    """Count the paired tests the analysis runs (in-process materialisation)."""
    from metric_ops import stats

    calls: Counter = Counter()
    for name in ("paired_permutation_test", "mcnemar_exact", "approximate_randomization", "paired_bootstrap_corpus",
                 "bootstrap_ci", "wilson_interval", "correlation"):
        original = getattr(stats, name)

        def counted(*args, _name=name, _f=original, **kwargs):
            calls[_name] += 1
            return _f(*args, **kwargs)

        monkeypatch.setattr(stats, name, counted)
        # metric_ops.stats re-exports its submodules: patch where the function is defined too,
        # so calls between statistics functions (paired_test -> mcnemar_exact) are counted
        monkeypatch.setattr(sys.modules[original.__module__], name, counted)
    return calls


@pytest.mark.slow
def test_rescoring_one_metric_recomputes_only_its_analysis_rows(two_models, instance, count_tests):
    from pipelines.runs.runner import rescore

    lake, fp = two_models
    comp0, corr0, summ0 = (lake.read(t, where={"fingerprint": fp}) for t in ("comparisons", "correlations", "summary"))
    assert comp0.height and corr0.height and summ0.height
    count_tests.clear()

    done = rescore(["token_f1"], lake, instance, force=True)
    assert {d["model"] for d in done if d["scored"] == ["token_f1"]} == {"sfres-system", "copy-input"}
    rescore_run = _latest(lake, "scores", fp)["run_id"]
    comp_run = _latest(lake, "comparisons", fp)
    comp1 = lake.read("comparisons", where={"fingerprint": fp})

    # comparisons: token_f1's rows are new, every other row is the stored one (same run id, same values)
    before, after = _run_ids(comp0, KEY), _run_ids(comp1, KEY)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed and {k[3] for k in changed} == {"token_f1"}
    assert {after[k] for k in changed} == {comp_run["run_id"]}
    others = [m for m in comp0["metric"].unique().to_list() if m != "token_f1"]
    cols = ["kind", "model", "metric", "sample_id", "mean", "p_value", "p_holm", "verdict", "run_id"]
    assert comp0.filter(pl.col("metric").is_in(others)).select(cols).sort(cols[:4]).equals(
        comp1.filter(pl.col("metric").is_in(others)).select(cols).sort(cols[:4]))
    prov = json.loads(comp_run["provenance"])
    assert prov["recomputed"] == ["token_f1"] and "token_f1" not in prov["kept"] and "bleu" in prov["kept"]
    assert comp_run["rows"] == comp1.filter(pl.col("metric") == "token_f1").height

    # correlations: only the pairs with token_f1 (one model's pairs x 2 models)
    corr_run = _latest(lake, "correlations", fp)
    corr1 = lake.read("correlations", where={"fingerprint": fp})
    by = ["model", "metric_a", "metric_b"]
    cb, ca = _run_ids(corr0, by), _run_ids(corr1, by)
    moved = {k for k in ca if ca[k] != cb.get(k)}
    assert moved and all("token_f1" in k[1:] for k in moved) and {ca[k] for k in moved} == {corr_run["run_id"]}
    assert all(ca[k] == cb[k] for k in ca if "token_f1" not in k[1:])
    assert json.loads(corr_run["provenance"])["recomputed"] == ["token_f1"]

    # summary: one row per model for token_f1 rewritten, the rest untouched
    summ1 = lake.read("summary", where={"fingerprint": fp})
    sb, sa = _run_ids(summ0, ["model", "metric"]), _run_ids(summ1, ["model", "metric"])
    assert {k for k in sa if sa[k] != sb.get(k)} == {("sfres-system", "token_f1"), ("copy-input", "token_f1")}

    # the work done: one paired test (one model pair x token_f1), not one per metric
    assert count_tests["paired_permutation_test"] == 1
    assert count_tests["mcnemar_exact"] == 0 and count_tests["approximate_randomization"] == 0
    assert count_tests["bootstrap_ci"] == 3  # token_f1's interval for each model and of the paired difference (issue 28)
    n_names = len(set(corr1.filter(pl.col("model") == "sfres-system")[["metric_a", "metric_b"]].to_numpy().ravel()))
    # 3 correlation methods x the pairs that contain token_f1, per model (sfres-system also has human ratings)
    assert count_tests["correlation"] == 3 * len(moved)
    assert rescore_run != comp_run["run_id"]

    # nothing changed since: a second analysis run computes nothing and writes nothing
    from pipelines.runs.runner import materialize_analysis

    versions = {t: lake.version(t) for t in ("comparisons", "correlations")}
    count_tests.clear()
    materialize_analysis(fp, lake, instance)
    assert {t: lake.version(t) for t in versions} == versions
    assert sum(count_tests.values()) == 0
    assert json.loads(_latest(lake, "comparisons", fp)["provenance"])["recomputed"] == []
    assert n_names >= 4


@pytest.mark.slow
def test_a_corpus_metric_is_stored_once_per_model_and_flows_through_the_analysis(two_models, instance, count_tests, tmp_path):
    from pipelines.runs.runner import rescore
    from resources.evidence.export import export_evidence

    lake, fp = two_models
    comp0 = lake.read("comparisons", where={"fingerprint": fp})
    count_tests.clear()
    done = rescore(["corpus_chrf"], lake, instance)
    from pipelines.runs.runner import scoring_outcome

    outcome = scoring_outcome(lake, done)  # what `facetlake score` prints: the segments, not one row
    assert outcome["scored"].to_list() == [40, 40] and outcome["error"].to_list() == [0, 0]
    scores = lake.read("scores", where={"fingerprint": fp}).filter(pl.col("metric") == "corpus_chrf")
    assert scores.height == 2 and scores["sample_id"].null_count() == 2  # one corpus row per model, no copies
    gens = lake.read("generations", where={"fingerprint": fp})
    samples = lake.read("samples", where={"fingerprint": fp}).sort("position")
    for model in ("sfres-system", "copy-input"):
        out = dict(gens.filter(pl.col("model") == model).select("sample_id", "output").iter_rows())
        hyps = [out[s] for s in samples["sample_id"]]
        refs = [r[0] for r in samples["references"]]
        value = scores.filter(pl.col("model") == model)["value"][0]
        assert value == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-9)
    # summary: the corpus value with the segments it covers
    summ = lake.read("summary", where={"fingerprint": fp}).filter(pl.col("metric") == "corpus_chrf")
    assert summ.height == 2 and set(summ["n_scored"]) == {40} and set(summ["n_total"]) == {40}
    # comparisons: only corpus_chrf computed, by approximate randomisation over the 40 segments
    comp = lake.read("comparisons", where={"fingerprint": fp})
    (pw,) = comp.filter((pl.col("kind") == "pairwise") & (pl.col("metric") == "corpus_chrf")).iter_rows(named=True)
    assert pw["test"] == "approximate-randomization" and pw["n_pairs"] == 40 and pw["verdict"] == "regressed"
    assert count_tests["approximate_randomization"] == 1 and count_tests["paired_permutation_test"] == 0
    kept = comp.filter(pl.col("metric") != "corpus_chrf")
    assert _run_ids(kept, KEY) == _run_ids(comp0, KEY)
    # correlations: a corpus score has no per-sample values; nothing to recompute
    corr_prov = json.loads(_latest(lake, "correlations", fp)["provenance"])
    assert corr_prov["recomputed"] == [] and corr_prov["reads"]["corpus_level_not_correlated"] == ["corpus_chrf"]
    # the evidence export carries the corpus row with its statistics
    export_evidence(lake, fp, tmp_path / "ev")
    exported = [json.loads(line) for line in (tmp_path / "ev" / "scores.jsonl").read_text().splitlines()]
    rows = [r for r in exported if r["metric"] == "corpus_chrf"]
    assert len(rows) == 2 and all(r["sample_id"] is None and json.loads(r["detail"])["level"] == "corpus" for r in rows)
