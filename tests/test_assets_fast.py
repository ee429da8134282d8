"""Fast asset tier: the assets called directly with
``dg.build_asset_context(partition_key=...)``, a LakeStore on ``tmp_path`` and small
in-memory polars frames (no Dagster run, no subprocess, no model): what each asset
writes is checked against values computed by hand."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import polars as pl
import pytest
from scipy import stats as sps

from assets.annotations import annotations
from assets.comparisons import ComparisonsConfig, comparisons
from assets.correlations import CorrelationsConfig, correlations
from assets.generations import GenerationsConfig, generations
from assets.partitions import evaluation_partitions, pair_partitions
from assets.samples import samples
from assets.summary import summary
from resources.catalog import register_evaluation
from resources.catalog.spec import resolve
from resources.lake.resource import LakeStore
from tests.conftest import small_spec

N = 6


@pytest.fixture
def registered(tmp_path):
    """A lake with one registered evaluation (6 SF-RES rows, two models) and no scores yet."""
    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = small_spec(name="fast-assets", limit=N, metrics=("token_f1", "exact_match"),
                      models={"base": "precomputed:column=system_output", "cand": "precomputed:column=system_output"})
    resolved = resolve(spec)
    registration = register_evaluation(lake, resolved)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(evaluation_partitions.name, [registration.partition_key])
    return lake, resolved, registration, instance


def _score_rows(resolved, model: str, metric: str, values, *, direction="maximize", statuses=None) -> list[dict]:
    statuses = statuses or ["scored"] * len(values)
    return [{"model": model, "fingerprint": resolved.fingerprint, "dataset": resolved.dataset_name, "sample_id": s.sample_id,
             "metric": metric, "value": v if st == "scored" else None, "direction": direction,
             "dimension": "baseline_grounding", "locality": "local", "status": st, "detail": "{}",
             "signature": f"{metric}|v1", "run_id": f"run-{model}", "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)}
            for s, v, st in zip(resolved.samples, values, statuses)]


def _write_scores(lake: LakeStore, rows: list[dict]) -> None:
    lake.append("scores", rows)  # dicts: cast to the scores schema contract


def _context(registered):
    lake, _, registration, instance = registered
    return dg.build_asset_context(partition_key=registration.partition_key, resources={"lake": lake}, instance=instance)


def test_summary_writes_mean_and_counts_per_model_and_metric(registered):
    lake, resolved, _, _ = registered
    _write_scores(lake, [
        *_score_rows(resolved, "base", "token_f1", [0.5, 0.25, 1.0, 0.0, 0.75, 0.0],
                     statuses=["scored", "scored", "scored", "scored", "unscored", "error"]),
        *_score_rows(resolved, "cand", "token_f1", [1.0] * N),
        *_score_rows(resolved, "base", "exact_match", [1, 0, 0, 0, 0, 1]),
    ])
    result = summary(_context(registered))
    table = lake.read("summary", where={"fingerprint": resolved.fingerprint}).sort(["model", "metric"])
    got = {(r["model"], r["metric"]): (r["mean"], r["n_scored"], r["n_unscored"], r["n_error"], r["n_total"])
           for r in table.iter_rows(named=True)}
    assert got == {
        ("base", "exact_match"): (pytest.approx(2 / 6), 6, 0, 0, 6),
        ("base", "token_f1"): (pytest.approx((0.5 + 0.25 + 1.0 + 0.0) / 4), 4, 1, 1, 6),  # unscored/error never count as 0
        ("cand", "token_f1"): (1.0, 6, 0, 0, 6),
    }
    assert result.metadata["dagster/row_count"] == 3 and result.metadata["rows_written"] == 3
    assert table["dataset"].unique().to_list() == [resolved.dataset_name]


def test_summary_rewrites_only_the_metric_whose_scores_changed(registered):
    lake, resolved, _, _ = registered
    _write_scores(lake, _score_rows(resolved, "base", "token_f1", [0.5] * N) + _score_rows(resolved, "base", "exact_match", [1] * N))
    summary(_context(registered))
    first = {r["metric"]: r["run_id"] for r in lake.read("summary").iter_rows(named=True)}
    lake.replace("scores", _score_rows(resolved, "base", "token_f1", [0.25] * N),
                 {"fingerprint": resolved.fingerprint, "metric": "token_f1"})
    again = summary(_context(registered))
    rows = {r["metric"]: r for r in lake.read("summary").iter_rows(named=True)}
    assert rows["token_f1"]["mean"] == pytest.approx(0.25) and rows["exact_match"]["mean"] == 1.0
    assert rows["exact_match"]["run_id"] == first["exact_match"]  # untouched
    assert again.metadata["recomputed"] == "token_f1"


def test_comparisons_names_the_winner_with_the_right_means_and_test(registered):
    lake, resolved, _, _ = registered
    base = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    cand = [0.6, 0.7, 0.8, 0.9, 1.0, 0.95]
    _write_scores(lake, _score_rows(resolved, "base", "token_f1", base) + _score_rows(resolved, "cand", "token_f1", cand))
    out = list(comparisons(_context(registered), ComparisonsConfig(n_resamples=199, n_permutations=999)))
    materialised = [o for o in out if isinstance(o, dg.MaterializeResult)]
    assert len(materialised) == 1 and any(isinstance(o, dg.AssetCheckResult) for o in out)
    table = lake.read("comparisons", where={"fingerprint": resolved.fingerprint})
    stats_rows = {r["model"]: r for r in table.filter(pl.col("kind") == "model_metric").iter_rows(named=True)}
    assert stats_rows["base"]["mean"] == pytest.approx(sum(base) / N)
    assert stats_rows["cand"]["mean"] == pytest.approx(sum(cand) / N)
    assert stats_rows["cand"]["is_winner"] and not stats_rows["base"]["is_winner"]
    (pair,) = table.filter(pl.col("kind") == "pairwise").iter_rows(named=True)
    # every difference is positive: the exact sign-flip test's two-sided p is 2 / 2**6
    assert pair["p_value"] == pytest.approx(2 / 2 ** 6)
    assert materialised[0].metadata["n_model_metric"] == 2


def test_correlations_match_scipy_on_metric_vs_human_scores(registered):
    lake, resolved, _, _ = registered
    metric = [0.1, 0.4, 0.35, 0.8, 0.7, 0.9]
    human = [1.0, 3.0, 2.0, 5.0, 4.0, 6.0]
    _write_scores(lake, _score_rows(resolved, "base", "token_f1", metric) + _score_rows(resolved, "base", "human:overall", human))
    correlations(_context(registered), CorrelationsConfig())
    table = lake.read("correlations", where={"fingerprint": resolved.fingerprint})
    pairs = {frozenset((r["metric_a"], r["metric_b"])): r for r in table.iter_rows(named=True)}
    row = pairs[frozenset(("token_f1", "human:overall"))]
    assert row["n"] == N and row["model"] == "base"
    assert row["pearson"] == pytest.approx(sps.pearsonr(metric, human).statistic)
    assert row["spearman"] == pytest.approx(sps.spearmanr(metric, human).statistic)
    assert row["kendall"] == pytest.approx(sps.kendalltau(metric, human).statistic)
    assert row["pearson_p"] == pytest.approx(sps.pearsonr(metric, human).pvalue)


def test_scores_writes_the_structured_params_column(registered):
    """The scores asset, called directly on one registered pair after samples and
    generations: every row it stores carries its metric's identity (metric_ops/identity.py)."""
    import json

    from assets.generations import GenerationsConfig, generations
    from assets.partitions import pair_partitions
    from assets.samples import samples
    from assets.scores import ScoresConfig, scores
    from metric_ops.identity import metric_identity
    from metric_ops.registry import get_metric
    from pipelines.definitions import build_resources

    lake, resolved, registration, instance = registered
    pair = registration.pair_keys["base"]
    instance.add_dynamic_partitions(pair_partitions.name, list(registration.pair_keys.values()))
    resources = {**build_resources(lake.root), "lake": lake}
    for asset, key, config in ((samples, registration.partition_key, ()), (generations, pair, (GenerationsConfig(),)),
                               (scores, pair, (ScoresConfig(),))):
        with dg.build_asset_context(partition_key=key, resources=resources, instance=instance) as ctx:
            out = asset(ctx, *config)
            if hasattr(out, "__iter__") and not isinstance(out, (dict, str)):
                list(out)  # a multi-output asset yields its results
    raw = pl.from_arrow(lake.delta("scores").to_pyarrow_table())  # what is stored, not what a read fills in
    assert raw.height > 0 and raw["params"].null_count() == 0
    identities = {r["metric"]: json.loads(r["params"]) for r in raw.iter_rows(named=True)}
    assert identities["token_f1"] == metric_identity(get_metric("token_f1"))
    assert identities["exact_match"] == metric_identity(get_metric("exact_match"))
    human = {m: i for m, i in identities.items() if m.startswith("human:")}
    assert human  # SF-RES carries human ratings: precomputed:column= rows score them
    assert all(i == {"metric": m, "version": None, "params": {"source": "dataset"}} for m, i in human.items())


def test_samples_generations_and_annotations_called_directly(tmp_path):
    """The first three assets of a pair, in process: samples (with its three checks),
    generations (a multi-asset: its table, token_logprobs and lm_eval_responses, and its
    two checks), annotations (a regex annotator over the stored outputs)."""
    from pipelines.definitions import build_resources

    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = small_spec(name="first-three", limit=N, metrics=("exact_match",),
                      annotators=[{"name": "first_word", "kind": "regex", "pattern": r"^\W*(\w+)"}])
    resolved = resolve(spec)
    registration = register_evaluation(lake, resolved)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(evaluation_partitions.name, [registration.partition_key])
    instance.add_dynamic_partitions(pair_partitions.name, list(registration.pair_keys.values()))
    resources = {**build_resources(lake.root), "lake": lake}
    pair = registration.pair_keys["sfres-system"]

    with dg.build_asset_context(partition_key=registration.partition_key, resources=resources, instance=instance) as ctx:
        out = list(samples(ctx))
    materialized, checks = out[0], out[1:]
    assert materialized.metadata["dagster/row_count"] == N and all(c.passed for c in checks) and len(checks) == 3
    assert lake.read("samples", where={"fingerprint": resolved.fingerprint}).height == N

    with dg.build_asset_context(partition_key=pair, resources=resources, instance=instance) as ctx:
        results = generations(ctx, GenerationsConfig())
    by_key = {r.asset_key.to_user_string(): r for r in results}
    assert set(by_key) == {"generations", "token_logprobs", "lm_eval_responses"}
    assert by_key["generations"].metadata["dagster/row_count"] == N and by_key["token_logprobs"].metadata["dagster/row_count"] == 0
    assert [c.passed for c in by_key["generations"].check_results] == [True, True]
    stored = lake.read("generations", where={"fingerprint": resolved.fingerprint})
    outputs = dict(zip(stored["sample_id"], stored["output"]))
    assert outputs == {s.sample_id: s.metadata["system_output"] for s in resolved.samples}

    with dg.build_asset_context(partition_key=pair, resources=resources, instance=instance) as ctx:
        result = annotations(ctx)
    assert result.metadata["dagster/row_count"] == N
    rows = lake.read("annotations", where={"fingerprint": resolved.fingerprint})
    import re

    expected = {sid: re.match(r"^\W*(\w+)", text).group(1) for sid, text in outputs.items()}
    assert dict(zip(rows["sample_id"], rows["value"])) == expected
