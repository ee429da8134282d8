"""The report's parts without a browser (issue 19): runs vs rescoring events, every metric
of every run kept, small-multiple bars on their own axes, and the in-memory fallback
computed by metric_ops (the same numbers as the comparisons asset stores)."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from pipelines.report.data import recompute_comparisons, recompute_correlations, run_groups
from pipelines.report.samples import multirun_bars

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _run(run_id, model, minute, version, metrics="all", fp="f" * 64):
    return {"run_id": run_id, "asset": "scores", "model": model, "fingerprint": fp, "table_version": version,
            "finished_at": T0 + dt.timedelta(minutes=minute), "provenance": json.dumps({"metrics": metrics})}


def test_a_rescore_belongs_to_the_run_before_it_and_is_no_run_of_its_own():
    runs = pl.DataFrame([
        _run("full-1", "a", 0, 1), _run("full-1", "b", 1, 2),
        _run("rescore-1", "a", 5, 3, ["bertscore"]), _run("rescore-1", "b", 6, 4, ["bertscore"]),
        _run("full-2", "a", 10, 5), _run("rescore-2", "a", 12, 6, ["meteor"]), _run("rescore-3", "a", 13, 7, ["chrf"]),
    ])
    groups = run_groups(runs)
    assert [(g["run_id"], g["model"], g["scores_version"], g["rescored_by"]) for g in groups] == [
        ("full-2", "a", 7, ["rescore-2", "rescore-3"]),
        ("full-1", "b", 4, ["rescore-1"]),
        ("full-1", "a", 3, ["rescore-1"]),
    ]


def test_a_rescore_without_an_earlier_full_run_stays_visible():
    groups = run_groups(pl.DataFrame([_run("rescore-0", "a", 0, 1, ["bleu"]), _run("rescore-1", "a", 1, 2, ["chrf"])]))
    assert [(g["run_id"], g["scores_version"], g["rescored_by"]) for g in groups] == [("rescore-0", 2, ["rescore-1"])]


def test_multirun_bars_give_each_metric_its_own_axis_and_keep_partial_metrics():
    runs = [{"label": "r1", "means": {"bleu": 30.0, "rouge_l_f": 0.4}},
            {"label": "r2", "means": {"bleu": 25.0, "rouge_l_f": 0.5, "chrf": 55.0}}]
    fig = multirun_bars(runs, ["bleu", "chrf", "rouge_l_f"])
    axes = {}
    for trace in fig.data:
        axes.setdefault(trace.yaxis, []).append((trace.name, trace.y[0]))
    assert len(axes) == 3  # one y axis per metric: ROUGE's 0-1 is not drawn on BLEU's 0-100 scale
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["bleu", "chrf", "rouge_l_f"]
    by_metric = dict(zip(titles, axes.values()))
    assert by_metric["rouge_l_f"] == [("r1", 0.4), ("r2", 0.5)]
    assert by_metric["chrf"] == [("r1", None), ("r2", 55.0)]  # r1 has no chrF: no bar, not a zero
    assert sum(1 for t in fig.data if t.showlegend) == 2  # one legend entry per run


def test_fallback_comparisons_equal_what_the_asset_stored(evaluated_lake):
    lake, resolved = evaluated_lake
    fp = resolved.fingerprint
    stored = lake.read("comparisons", where={"fingerprint": fp}).filter(pl.col("kind") == "model_metric")
    assert stored.height > 0
    fresh = {(r["model"], r["metric"]): r for r in recompute_comparisons(lake.read("scores", where={"fingerprint": fp}), None)
             if r["kind"] == "model_metric"}
    for r in stored.iter_rows(named=True):
        mine = fresh[(r["model"], r["metric"])]
        assert (mine["mean"], mine["n_scored"], mine["n_total"]) == (pytest.approx(r["mean"]), r["n_scored"], r["n_total"])
        assert (mine["ci_low"], mine["ci_high"]) == (pytest.approx(r["ci_low"]), pytest.approx(r["ci_high"]))
        assert "relative_change" in mine and isinstance(mine["detail"], dict)  # every stored column, detail parsed


def test_fallback_correlations_equal_what_the_asset_stored(evaluated_lake):
    lake, resolved = evaluated_lake
    fp = resolved.fingerprint
    stored = {(r["model"], r["metric_a"], r["metric_b"]): r for r in lake.read("correlations", where={"fingerprint": fp}).iter_rows(named=True)}
    fresh = {(r["model"], r["metric_a"], r["metric_b"]): r for r in recompute_correlations(lake, fp, lake.read("scores", where={"fingerprint": fp}))}
    assert set(fresh) == set(stored) and any(k[1].startswith("human:") or k[2].startswith("human:") for k in fresh)
    for key, r in stored.items():
        assert fresh[key]["spearman"] == (None if r["spearman"] is None else pytest.approx(r["spearman"]))


def test_report_modules_stay_small_and_recompute_without_the_assets():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "pipelines" / "report"
    for path in root.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 500, path.name
    tree = ast.parse((root / "data.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "metric_ops.compare" in imported and "metric_ops.compare.meta_eval" in imported
    assert not {"assets.correlations"} & imported and "comparison_rows" not in (root / "data.py").read_text()


def test_radar_draws_only_metrics_every_model_has():
    """Issue 26, fault 14: human ratings exist for the dataset's own system only; a polygon
    over the missing value drew an edge across it."""
    import re

    import polars as pl

    from pipelines.report.data import ReportData
    from pipelines.report.html import Figures
    from pipelines.report.sections import section_radar

    rows = []
    for model, metrics in (("sys", {"token_f1": 0.6, "bleu": 30.0, "human:overall": 4.0}), ("copy", {"token_f1": 0.3, "bleu": 10.0})):
        for i in range(5):
            rows += [{"model": model, "sample_id": str(i), "metric": m, "value": v + i, "direction": "maximize", "status": "scored"}
                     for m, v in metrics.items()]
    scores = pl.DataFrame(rows)
    d = ReportData(fingerprint="f" * 64, evaluation={}, samples=pl.DataFrame(), generations=pl.DataFrame(), scores=scores,
                   comparisons=[], comparisons_source="", correlations=[], correlations_source="", token_logprobs=pl.DataFrame(), runs=[])
    section = section_radar(d, Figures())
    assert section.present
    thetas = re.findall(r'"theta":\[([^\]]*)\]', section.body)
    assert thetas and all("human:overall" not in t and "token_f1" in t and "bleu" in t for t in thetas)
    assert "left out of the radar: human:overall" in section.body


def test_a_re_run_that_wrote_no_score_is_no_run_and_is_listed_as_unchanged():
    """Issue 26, fault 10: re-runs that reused every score (0 rows written) are not runs."""
    rows = [_run("full-1", "a", 0, 1), _run("again-1", "a", 5, 1), _run("again-2", "a", 9, 1), _run("full-2", "a", 20, 2)]
    for r, n in zip(rows, (40, 0, 0, 40)):
        r["rows"] = n
    groups = run_groups(pl.DataFrame(rows))
    assert [(g["run_id"], g["unchanged_by"]) for g in groups] == [("full-2", []), ("full-1", ["again-1", "again-2"])]
    from pipelines.report.data import unchanged_text

    assert unchanged_text(groups[1]) == "unchanged since this run: 2 re-runs (last again-2, 2026-01-01 00:09)"
    assert unchanged_text(groups[0]) == "-"


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_report_of_a_re_run_evaluation_shows_one_run_per_model_unchanged_since(tmp_path, instance):
    """End to end: the same evaluation run three times writes its scores once; the report's
    runs are one per model, each 'unchanged since' with two re-runs; the timeline has one
    panel (y axis) per score and one legend entry per model."""
    from pipelines.report import build_html
    from pipelines.report.data import load_report_data
    from pipelines.report.html import Figures
    from pipelines.report.samples import section_timeline
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from resources.lake.tables import LakeTables
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path / "lake"))
    for _ in range(3):
        resolved = run_evaluation(small_spec(), lake, instance)
    data = load_report_data(LakeTables(root=lake.root), resolved.fingerprint)
    assert [(r["model"], len(r["unchanged_by"])) for r in data.runs] == [("sfres-system", 2)]
    assert "unchanged since this run: 2 re-runs" in build_html(data)

    class Kept(Figures):
        figures: list = []

        def div(self, fig, height=420, top=40):
            self.figures.append(fig)
            return super().div(fig, height, top)

    figs = Kept()
    section_timeline(data, figs)
    fig = figs.figures[-1]
    metrics = set(data.scores.filter(pl.col("status") == "scored")["metric"].to_list())
    assert len(metrics) >= 4  # exact_match, token_f1, bleu, rouge_l: one panel each, in its own units
    assert len({t.yaxis for t in fig.data}) == len(metrics)
    assert [a.text for a in fig.layout.annotations] == sorted(metrics)
    assert sum(1 for t in fig.data if t.showlegend) == 1  # one legend entry per model
