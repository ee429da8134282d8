"""The comparisons and correlations assets end to end on the real demo data (SF-RES and
QAGS-CNNDM, every row), the regression alert on a planted regression and without one,
cross-fingerprint refusal, and the lineage command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps
from typer.testing import CliRunner

from metric_ops import stats
from tests.conftest import small_spec

# pytest-xdist: one worker runs this module (the demo lake is built once per worker; README "Tests")
pytestmark = pytest.mark.xdist_group("analysis")

CONFIGS = Path(__file__).resolve().parents[1] / "pipelines" / "configs"
runner = CliRunner()


@pytest.fixture(scope="session")
def demo_lake(tmp_path_factory, instance):
    """The demo evaluations (pipelines/configs/sfres.yaml and qags.yaml, full data) materialised
    once through pipelines.runs.runner.run_evaluation, the path `facetlake demo` takes."""
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path_factory.mktemp("demo_lake") / "lake"))
    resolved = {name: run_evaluation(EvaluationSpec.from_yaml(CONFIGS / f"{name}.yaml"), lake, instance) for name in ("sfres", "qags")}
    return lake, {k: v.fingerprint for k, v in resolved.items()}


def _paired(scores: pl.DataFrame, model: str, a: str, b: str):
    ok = scores.filter((pl.col("model") == model) & (pl.col("status") == "scored"))
    wide = ok.pivot(on="metric", index="sample_id", values="value").select("sample_id", a, b).drop_nulls()
    return wide[a].to_numpy(), wide[b].to_numpy()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sfres", "qags"])
def test_correlations_equal_scipy_on_the_real_data(demo_lake, name):
    lake, fps = demo_lake
    fp = fps[name]
    corr = lake.read("correlations", where={"fingerprint": fp})
    scores = lake.read("scores", where={"fingerprint": fp})
    system = f"{name}-system"
    human = corr.filter((pl.col("model") == system) & (pl.col("kind") == "metric-human"))
    expected_humans = {"sfres": 3, "qags": 1}[name]
    metrics = {"exact_match", "token_f1", "bleu", "rouge_l_f", "rouge_l_precision", "rouge_l_recall"}
    assert human.height == expected_humans * len(metrics)
    checked = 0
    for row in corr.filter(pl.col("model") == system).iter_rows(named=True):
        x, y = _paired(scores, system, row["metric_a"], row["metric_b"])
        assert row["n"] == len(x)
        if np.all(x == x[0]) or np.all(y == y[0]):  # e.g. exact_match is 0 on every QAGS summary
            assert row["pearson"] is None and row["spearman"] is None and row["kendall"] is None
            continue
        assert row["pearson"] == pytest.approx(sps.pearsonr(x, y).statistic, abs=1e-12)
        assert row["spearman"] == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
        assert row["kendall"] == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-12)
        assert row["kendall_p"] == pytest.approx(sps.kendalltau(x, y).pvalue, rel=1e-9, abs=1e-300)
        checked += 1
    assert checked == {"sfres": 36, "qags": 15}[name]  # every pair; on QAGS the 6 with constant exact_match are undefined
    # human ratings rate the shipped system output: never correlated for the heuristic reference system
    other = corr.filter(pl.col("model") != system)
    assert other.height > 0 and other.filter(pl.col("kind") != "metric-metric").height == 0


@pytest.mark.slow
def test_comparisons_on_the_real_data_are_right_and_name_what_they_read(demo_lake):
    lake, fps = demo_lake
    fp = fps["sfres"]
    comp = lake.read("comparisons", where={"fingerprint": fp})
    scores = lake.read("scores", where={"fingerprint": fp})
    stats_rows = comp.filter(pl.col("kind") == "model_metric")
    assert set(stats_rows["model"]) == {"sfres-system", "copy-input"}
    assert not any(m.startswith("human:") for m in stats_rows["metric"])
    for r in stats_rows.iter_rows(named=True):
        vals = scores.filter((pl.col("model") == r["model"]) & (pl.col("metric") == r["metric"]) & (pl.col("status") == "scored"))["value"]
        assert r["mean"] == pytest.approx(vals.mean()) and r["n_scored"] == vals.len() == 1181
        assert r["ci_low"] <= r["mean"] <= r["ci_high"]
    winners = {r["metric"]: r["model"] for r in stats_rows.filter(pl.col("is_winner")).iter_rows(named=True)}
    assert winners["token_f1"] == "sfres-system" and winners["bleu"] == "sfres-system"
    pw = comp.filter(pl.col("kind") == "pairwise")
    assert set(pw["baseline"]) == {"sfres-system"} and set(pw["model"]) == {"copy-input"}
    em = pw.filter(pl.col("metric") == "exact_match").row(0, named=True)
    x = scores.filter((pl.col("model") == "sfres-system") & (pl.col("metric") == "exact_match")).sort("sample_id")["value"].to_numpy()
    y = scores.filter((pl.col("model") == "copy-input") & (pl.col("metric") == "exact_match")).sort("sample_id")["value"].to_numpy()
    b, c = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    assert em["test"] == "mcnemar-exact" and em["p_value"] == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue)
    for metric in set(pw["metric"].to_list()):  # Holm's family: one score name's pairwise tests (one pair here)
        fam = pw.filter(pl.col("metric") == metric)
        assert fam["p_holm"].to_list() == pytest.approx(stats.holm(fam["p_value"].to_list()))
    # every row names the partitions and Delta versions it read; they match the runs table
    reads = {json.dumps(json.loads(s), sort_keys=True) for s in comp["reads"]}
    assert len(reads) == 1
    read = json.loads(reads.pop())
    assert read["models"] == ["copy-input", "sfres-system"]
    runs = lake.read("runs", where={"fingerprint": fp})
    comp_run = runs.filter(pl.col("asset") == "comparisons").sort("finished_at").row(-1, named=True)
    assert json.loads(comp_run["provenance"])["read"]["scores"] == read["table_versions"]["scores"]
    scores_versions = runs.filter(pl.col("asset") == "scores")["table_version"].to_list()
    assert read["table_versions"]["scores"] >= max(scores_versions)
    assert set(read["scores_run_ids"]) == {"sfres-system", "copy-input"}
    # per model and metric signature, the scores run whose rows were read (lineage)
    stored = lake.read("scores", where={"fingerprint": fp})
    for (model, signature), group in stored.group_by(["model", "signature"]):
        assert read["scores_runs_by_signature"][model][signature] == sorted(set(group["run_id"]))


@pytest.mark.slow
def test_cross_fingerprint_comparison_is_refused_naming_the_differences(demo_lake):
    from assets.comparisons import IncomparableError, require_comparable

    lake, fps = demo_lake
    with pytest.raises(IncomparableError) as info:
        require_comparable(lake, [fps["sfres"], fps["qags"]])
    message = str(info.value)
    assert "generation.max_tokens: 64 vs 128" in message and "dataset_content_sha256" in message and "--force" in message
    diffs = require_comparable(lake, [fps["sfres"], fps["qags"]], force=True)
    assert diffs[fps["qags"]]["generation.max_tokens"] == (64, 128)
    assert require_comparable(lake, [fps["sfres"], fps["sfres"][:10]]) == {}
    out = runner.invoke(__import__("pipelines.cli", fromlist=["app"]).app,
                        ["report", "-e", fps["sfres"][:10], "--compare", fps["qags"][:10], "--lake", lake.root, "--out", "/dev/null"])
    assert out.exit_code == 1 and "refusing to compare" in out.output


@pytest.mark.slow
def test_lineage_command_reaches_dataset_hash_and_model_identity(demo_lake):
    from pipelines.cli import app

    lake, fps = demo_lake
    fp = fps["qags"]
    ev = lake.read("evaluations", where={"fingerprint": fp}).row(0, named=True)
    text = runner.invoke(app, ["lineage", "-e", fp[:12], "--lake", lake.root])
    assert text.exit_code == 0, text.output
    assert ev["dataset_hash"] in text.output
    assert "heuristic=lead-3" in text.output and "column=system_output" in text.output
    assert "{" not in text.output and "/" not in text.output.split("\n", 1)[1]  # no raw dicts, no paths (issue 26)
    assert "(as above)" in text.output  # a shared subtree is drawn once
    assert "rouge_l|v:2" in text.output  # metric signatures of the scores runs
    scores_runs = lake.read("runs", where={"fingerprint": fp, "asset": "scores"})
    for v in scores_runs["table_version"].to_list():
        assert f"scores[" in text.output and f"] v{v}" in text.output
    mermaid = runner.invoke(app, ["lineage", "-e", fp[:12], "--lake", lake.root, "--format", "mermaid"]).output
    lines = mermaid.strip().splitlines()
    assert lines[0] == "flowchart LR"
    declared = {ln.split("[", 1)[0].split("(", 1)[0].strip() for ln in lines[1:] if "-->" not in ln}
    edges = [ln.strip().split(" --> ") for ln in lines if "-->" in ln]
    assert edges and all(a in declared and b in declared for a, b in edges)
    assert any(a.startswith("dataset_") for a, _ in edges) and any(b.startswith("comparisons") for _, b in edges)
    dot = runner.invoke(app, ["lineage", "-e", fp[:12], "--lake", lake.root, "--format", "dot"]).output
    assert dot.startswith("digraph lineage {") and dot.count("->") == len(edges)
    missing = runner.invoke(app, ["lineage", "-e", "ffff", "--lake", lake.root])
    assert missing.exit_code == 1 and "no evaluation matches 'ffff'" in missing.output and "sfres (9868f4b32c97)" in missing.output


def _write_outputs(path: Path, outputs: dict[str, str]) -> str:
    path.write_text("\n".join(json.dumps({"sample_id": k, "output": v}) for k, v in outputs.items()) + "\n")
    return f"precomputed:{path}"


@pytest.mark.slow
def test_regression_check_fails_on_a_planted_regression_and_passes_otherwise(lake_copy, instance, tmp_path):
    from assets.comparisons import CHECK_REGRESSION
    from pipelines.runs.runner import materialize_analysis, materialize_model
    from pipelines.runs.register import register

    lake, resolved = lake_copy  # 40 real SF-RES rows, sfres-system already generated and scored
    system = {r["sample_id"]: r["output"] for r in lake.read("generations").iter_rows(named=True)}
    planted_ids = sorted(system)[::2]  # every other sample loses its answer
    spec = small_spec()
    spec.models.update({
        "sfres-same": _write_outputs(tmp_path / "same.jsonl", system),
        "sfres-planted": _write_outputs(tmp_path / "bad.jsonl", {k: ("I cannot help with that ." if k in planted_ids else v) for k, v in system.items()}),
    })
    spec.baseline = "sfres-system"
    assert register(spec, lake, instance).fingerprint == resolved.fingerprint  # models and baseline are not in the fingerprint

    def check():
        result = materialize_analysis(resolved.fingerprint, lake, instance)
        evals = [e for e in result.get_asset_check_evaluations() if e.check_name == CHECK_REGRESSION]
        assert len(evals) == 1
        return evals[0]

    materialize_model("sfres-same", resolved.fingerprint, lake, instance)
    ok = check()
    assert ok.passed, ok.description
    assert "no significant regression against baseline sfres-system" in ok.description

    materialize_model("sfres-planted", resolved.fingerprint, lake, instance)
    failed = check()
    assert not failed.passed and failed.severity.value == "ERROR"
    assert "sfres-planted" in failed.description and "sfres-same" not in failed.description
    meta = {k: v.value for k, v in failed.metadata.items()}
    assert meta["baseline"] == "sfres-system" and meta["n_regressions"] >= 3
    assert meta["metric"] in {"token_f1", "bleu", "exact_match", "rouge_l_f", "rouge_l_precision", "rouge_l_recall"}
    # the plotted deltas are keyed per evaluation, model and score (no UI plot mixes units)
    deltas = {k: v for k, v in meta.items() if k.startswith("delta · ")}
    assert deltas and all(v < 0 for v in deltas.values())
    assert f"delta · {resolved.spec.name} · sfres-planted · {meta['metric']}" in deltas
    worst = meta["worst_samples"]["sfres-planted|token_f1"]
    assert worst and all(entry.split(" ", 1)[0] in planted_ids for entry in worst)
    comp = lake.read("comparisons", where={"fingerprint": resolved.fingerprint})
    f1 = comp.filter((pl.col("kind") == "pairwise") & (pl.col("model") == "sfres-planted") & (pl.col("metric") == "token_f1")).row(0, named=True)
    assert f1["verdict"] == "regressed" and f1["significant"] and f1["p_holm"] < 0.05 and f1["delta"] < 0
    same = comp.filter((pl.col("kind") == "pairwise") & (pl.col("model") == "sfres-same"))
    assert set(same["verdict"]) == {"no significant difference"} and set(same["delta"]) == {0.0}


def test_spec_baseline_must_name_a_model():
    from resources.catalog.spec import SpecError

    with pytest.raises(SpecError, match="baseline 'nope' is not one of the models"):
        small_spec(baseline="nope")
    assert small_spec(baseline="sfres-system").baseline == "sfres-system"
    assert "baseline" not in small_spec().to_mapping()


@pytest.mark.slow
def test_demo_report_says_which_sections_lack_data_and_pages_in_chromium(demo_lake, tmp_path):
    from pipelines.report import write_report
    from tests.browser_support import chromium, open_report

    lake, fps = demo_lake
    out, statuses = write_report(lake, fps["sfres"], tmp_path / "demo.html")
    assert [s for s, ok in statuses if not ok] == ["hallucination", "triad", "jury", "bertscore"]
    page_html = out.read_text()
    for needle in ("no faithfulness scores under this fingerprint", "needs at least two of faithfulness",
                   "no jury scores with an agreement value", "no BERTScore scores under this fingerprint"):
        assert needle in page_html
    with chromium() as browser:
        page, problems, requests = open_report(browser, out)
        assert page.evaluate("[...document.querySelectorAll('section[data-status=absent]')].every(s => !s.querySelector('.plotly-graph-div') && s.querySelector('.absent'))")
        # the per-sample heatmap is paged: 1181 samples, 50 a page; moving the slider shows page 2
        div = page.locator("#sample-heatmap .plotly-graph-div").first
        div_id = div.get_attribute("id")
        state = "(id) => { const d = document.getElementById(id); return [d.layout.title.text, d.data.findIndex(t => t.visible === true), d.layout.sliders[0].steps.length]; }"
        title, visible, n_pages = page.evaluate(state, div_id)
        assert (visible, n_pages) == (0, 24) and title.endswith("samples 1–50 of 1181")
        rail = div.locator("rect.slider-rail-rect").first
        rail.scroll_into_view_if_needed()
        box = rail.bounding_box()
        page.mouse.click(box["x"] + box["width"] / (n_pages - 1), box["y"] + box["height"] / 2)
        page.wait_for_function(f"() => document.getElementById('{div_id}').data[1].visible === true")
        title, visible, _ = page.evaluate(state, div_id)
        assert visible == 1 and title.endswith("samples 51–100 of 1181")
        assert problems == [], problems
        assert [u for u in requests if not u.startswith("file:")] == []
        page.screenshot(path=str(tmp_path / "demo.png"))
        assert (tmp_path / "demo.png").stat().st_size > 20_000


def test_definitions_hold_the_analysis_assets_and_the_regression_check():
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    deps = {k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys} for k in graph.get_all_asset_keys()}
    assert {"scores", "generations"} <= deps["comparisons"] and "scores" in deps["correlations"]
    assert "check_comparisons_no_regression" in {k.name for k in graph.asset_check_keys}
    # scheduled runs materialise scores; the analysis sensor runs the analysis job after them
    assert "analysis_sensor" in {s.name for s in defs.sensors}
    from pipelines.jobs import analysis_job

    assert {k.to_user_string() for k in analysis_job.selection.resolve(graph)} == {"summary", "comparisons", "correlations", "agreement"}


def test_tradeoff_resources_come_from_generations_and_runs_provenance(tmp_path):
    import datetime as dt

    from assets.analysis_common import pinned_versions, resource_figures
    from resources.lake.schemas import SCHEMAS
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    fp = "a" * 64
    now = dt.datetime.now(dt.timezone.utc)
    gens = []
    for i, (lat, tin, tout, status) in enumerate([(0.5, 10, 4, "ok"), (1.5, 12, 6, "ok"), (None, 11, None, "error")]):
        row = {n: None for n in SCHEMAS["generations"].names}
        row.update(model="m1", fingerprint=fp, dataset="d", sample_id=str(i), status=status, latency_s=lat, tokens_in=tin,
                   tokens_out=tout, created_at=now)
        gens.append(row)
    lake.replace("generations", gens, {"model": "m1", "fingerprint": fp})
    prov = {"performance": {"wall_s": 3.0, "cost": {"total": 0.0123, "currency": "USD"}, "model_parameters": 1_500_000,
                            "model_size_bytes": 6_000_000}}
    lake.append("runs", [{"run_id": "r1", "asset": "generations", "model": "m1", "fingerprint": fp, "dataset": "d",
                          "table_name": "generations", "table_version": 0, "rows": 3, "started_at": now, "finished_at": now,
                          "mode": "online", "provenance": json.dumps(prov)}])
    res = resource_figures(lake, fp, ["m1", "m2"], pinned_versions(lake))
    m1 = res["m1"]
    assert m1["latency_s"] == pytest.approx(1.0) and m1["tokens_in"] == pytest.approx(11.0) and m1["tokens_out"] == pytest.approx(5.0)
    assert (m1["cost"], m1["cost_currency"], m1["size"], m1["size_unit"], m1["wall_s"]) == (0.0123, "USD", 1_500_000, "parameters", 3.0)
    assert (m1["n_generations"], m1["n_errors"]) == (3, 1)
    assert res["m2"]["cost"] is None and res["m2"]["latency_s"] is None  # nothing recorded: None, never 0
