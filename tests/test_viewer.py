"""The results viewer (issue 29), on a real lake: SF-RES rows scored for two models (the
system outputs and the copy-input reference system), read through the viewer's queries and
through its pages in Chromium. Every view is checked against SQL written independently
here (DuckDB over the same lake), never against the viewer's own numbers."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import polars as pl
import pytest

from pipelines.view import CompareQuery, LakeReader, ViewError, compare_page, create_app, word_diff
from resources.sql.query import query
from tests.browser_support import chromium
from tests.support.serving import BackgroundServer, free_port
from tests.conftest import small_spec

pytestmark = pytest.mark.xdist_group("viewer")
N = 120
MODEL = "tuned"  # the other model: its outputs file is written from the data (below)
MODELS = ("sfres-system", MODEL)


def tuned_outputs(samples, path):
    """A second system over the same samples: the reference (better) on every third sample,
    the input copied (worse) on the next, the system's own output on the rest (equal)."""
    import json

    with open(path, "w") as f:
        for i, s in enumerate(samples):
            output = [s.references[0], s.input, s.metadata["system_output"]][i % 3]
            f.write(json.dumps({"sample_id": s.sample_id, "output": output}) + "\n")


@pytest.fixture(scope="module")
def viewed(tmp_path_factory, instance):
    """(lake, fingerprint, reader): SF-RES's first N rows under two models, three metrics."""
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    from resources.catalog.spec import resolve

    root = tmp_path_factory.mktemp("viewer")
    lake = LakeStore(root=str(root / "lake"))
    spec = small_spec(name="viewed", limit=N, metrics=("token_f1", "exact_match", "rouge_l"))
    tuned_outputs(resolve(spec).samples, root / "tuned.jsonl")
    spec = small_spec(name="viewed", limit=N, metrics=("token_f1", "exact_match", "rouge_l"),
                      models={"sfres-system": "precomputed:column=system_output", MODEL: f"precomputed:{root / 'tuned.jsonl'}"})
    resolved = run_evaluation(spec, lake, instance)
    reader = LakeReader(lake)
    yield lake, resolved.fingerprint, reader
    reader.close()


def _latest(lake, fp: str, metric: str) -> pl.DataFrame:
    """sample_id, model, value of ``metric``: the latest scored row per (model, sample), by SQL."""
    return query(lake, f"""
        SELECT sample_id, model, arg_max(value, created_at) AS value, arg_max(status, created_at) AS status
        FROM scores WHERE fingerprint = '{fp}' AND metric = '{metric}' GROUP BY ALL""")


def _all_ids(reader, q: CompareQuery) -> list[str]:
    ids, page = [], 1
    while True:
        result = compare_page(reader, CompareQuery(**{**q.__dict__, "page": page}))
        ids += [r["sample_id"] for r in result.rows]
        if page >= result.pages:
            return ids
        page += 1


def test_regressed_and_improved_equal_their_sql(viewed):
    lake, fp, reader = viewed
    frame = _latest(lake, fp, "token_f1").pivot(on="model", index="sample_id", values="value")
    regressed = set(frame.filter(pl.col(MODEL) < pl.col("sfres-system"))["sample_id"])
    improved = set(frame.filter(pl.col(MODEL) > pl.col("sfres-system"))["sample_id"])
    base = CompareQuery(evaluation="viewed", baseline="sfres-system", metric="token_f1")
    got = _all_ids(reader, CompareQuery(**{**base.__dict__, "mode": "regressed"}))
    assert len(got) == len(set(got)) and set(got) == regressed and 0 < len(regressed) < N
    assert set(_all_ids(reader, CompareQuery(**{**base.__dict__, "mode": "improved"}))) == improved
    page = compare_page(reader, CompareQuery(**{**base.__dict__, "mode": "regressed"}))
    assert page.total == len(regressed) and page.query.models == (MODEL,)


def test_both_wrong_search_and_filters_equal_their_sql(viewed):
    lake, fp, reader = viewed
    em = _latest(lake, fp, "exact_match").pivot(on="model", index="sample_id", values="value")
    both_wrong = set(em.filter((pl.col(MODEL) == 0) & (pl.col("sfres-system") == 0))["sample_id"])
    base = CompareQuery(evaluation="viewed", baseline="sfres-system", metric="exact_match")
    assert set(_all_ids(reader, CompareQuery(**{**base.__dict__, "mode": "both_wrong"}))) == both_wrong
    # a regular expression over input and outputs (no judge reasoning stored here): DuckDB's regexp_matches
    pattern = r"\b(near|cheap)\b"
    expected = set(query(lake, f"""
        SELECT s.sample_id FROM samples s WHERE s.fingerprint = '{fp}' AND (regexp_matches(s.input, '{pattern}')
           OR EXISTS (SELECT 1 FROM generations g WHERE g.fingerprint = s.fingerprint AND g.sample_id = s.sample_id
                      AND regexp_matches(g.output, '{pattern}'))
           OR EXISTS (SELECT 1 FROM scores r WHERE r.fingerprint = s.fingerprint AND r.sample_id = s.sample_id
                      AND regexp_matches(r.detail, '{pattern}')))""")["sample_id"])
    got = set(_all_ids(reader, CompareQuery(**{**base.__dict__, "q": pattern, "regex": True})))
    assert got == expected and 0 < len(expected) < N
    # a metric filter on one model, and a metadata field
    f1 = _latest(lake, fp, "token_f1")
    low = set(f1.filter((pl.col("model") == MODEL) & (pl.col("status") == "scored") & (pl.col("value") < 0.3))["sample_id"])
    got = set(_all_ids(reader, CompareQuery(**{**base.__dict__, "filter_metric": "token_f1", "filter_model": MODEL,
                                               "filter_op": "lt", "filter_value": "0.3"})))
    assert got == low and 0 < len(low) < N
    meta = query(lake, f"SELECT sample_id, json_extract_string(metadata, '$.doc_id') AS doc FROM samples WHERE fingerprint = '{fp}'")
    value = meta["doc"][7]
    got = set(_all_ids(reader, CompareQuery(**{**base.__dict__, "meta_key": "doc_id", "meta_value": value})))
    assert got == set(meta.filter(pl.col("doc") == value)["sample_id"]) and len(got) == 1


def test_sorting_paging_and_errors(viewed):
    lake, fp, reader = viewed
    q = CompareQuery(evaluation="viewed", baseline="sfres-system", metric="token_f1", sort="delta", desc=True, page_size=10)
    first = compare_page(reader, q)
    assert len(first.rows) == 10 and first.total == N and first.pages == 12
    f1 = _latest(lake, fp, "token_f1").pivot(on="model", index="sample_id", values="value")
    deltas = dict(zip(f1["sample_id"], f1[MODEL] - f1["sfres-system"]))
    shown = [deltas[r["sample_id"]] for r in first.rows]
    assert shown == sorted(shown, reverse=True) and shown[0] == max(d for d in deltas.values() if d is not None)
    second = compare_page(reader, CompareQuery(**{**q.__dict__, "page": 2}))
    assert not {r["sample_id"] for r in first.rows} & {r["sample_id"] for r in second.rows}
    with pytest.raises(ViewError, match="metric 'nope' has no scores in evaluation 'viewed'; metrics: exact_match"):
        compare_page(reader, CompareQuery(evaluation="viewed", metric="nope"))
    with pytest.raises(ViewError, match="no evaluation 'missing' in the lake; evaluations: viewed"):
        compare_page(reader, CompareQuery(evaluation="missing"))
    with pytest.raises(ViewError, match="model 'gpt' has no outputs"):
        compare_page(reader, CompareQuery(evaluation="viewed", baseline="gpt"))


def test_a_view_is_its_url():
    q = CompareQuery(evaluation="e", baseline="a", models=("b", "c"), metric="m", mode="regressed", q="x|y", regex=True, page=3)
    assert CompareQuery.from_params(q.params()) == q
    assert CompareQuery(evaluation="e").params() == {"evaluation": "e"}  # defaults stay out of the URL


@pytest.mark.slow
def test_the_view_command_serves_the_lake(viewed, tmp_path):
    """`facetlake view` as a user starts it: binds 127.0.0.1, serves the compare page."""
    import os
    import signal
    import subprocess
    import sys
    import urllib.request
    from pathlib import Path

    lake, _, _ = viewed
    port = free_port()
    log = (tmp_path / "view.log").open("w+")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "facetlake"), "view", "--lake", lake.root, "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/compare?evaluation=viewed&mode=regressed", timeout=5) as r:
                    body = r.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (tmp_path / "view.log").read_text()
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert 'id="total"' in body and "tr class=\"sample\"" in body
    assert f"http://127.0.0.1:{port}/" in (tmp_path / "view.log").read_text()
    refused = subprocess.run([str(Path(sys.executable).parent / "facetlake"), "view", "--lake", str(tmp_path / "empty")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "no evaluation in the lake" in refused.stderr + refused.stdout


def test_word_diff_marks_added_and_dropped_words():
    assert str(word_diff("the cheap cafe near town", "the cheap bistro near the town")) == \
        "the cheap <del>cafe</del> <ins>bistro</ins> near <ins>the</ins> town"
    assert str(word_diff(None, "<b>")) == "<ins>&lt;b&gt;</ins>"


# ----------------------------------------------------------------------------- in Chromium
def _shown_ids(page) -> list[str]:
    """The sample ids of the compare page open in ``page``, in order."""
    return page.eval_on_selector_all("tr.sample", "rows => rows.map(r => r.dataset.sampleId)")


def _ids_on_every_page(page) -> list[str]:
    """The sample ids of the open compare view, from this page to its last (following #next)."""
    seen = _shown_ids(page)
    while page.query_selector("#next") is not None:
        page.click("#next")
        seen += _shown_ids(page)
    return seen


@pytest.fixture(scope="module")
def server(viewed):
    """The viewer on 127.0.0.1 (uvicorn in a thread); yields its base URL."""
    lake, _, _ = viewed
    viewer = BackgroundServer(create_app(lake.root), name="the viewer", lifespan="on").start()
    yield viewer.url
    viewer.stop()


@pytest.mark.slow
def test_pages_in_chromium(viewed, server):
    lake, fp, _ = viewed
    f1 = _latest(lake, fp, "token_f1").pivot(on="model", index="sample_id", values="value")
    regressed = set(f1.filter(pl.col(MODEL) < pl.col("sfres-system"))["sample_id"])
    with chromium() as browser:
        page = browser.new_page()
        requests: list[str] = []
        problems: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.goto(server + "/")
        page.click("#evaluations a:text('viewed')")
        page.select_option("select[name=metric]", "token_f1")
        page.select_option("select[name=mode]", "regressed")
        page.click("button[type=submit]")
        seen = _ids_on_every_page(page)
        assert set(seen) == regressed and len(seen) == len(regressed)
        assert int(page.inner_text("#total")) == len(regressed)
        # the permalink reloads the same view
        page.goto(server + "/compare?" + urlencode({"evaluation": "viewed", "metric": "token_f1", "mode": "regressed"}))
        first = _shown_ids(page)
        page.goto(server + page.get_attribute("#permalink", "href"))
        assert _shown_ids(page) == first
        # a sample page: every model, its scores
        page.click("a.sample-link >> nth=0")
        assert page.inner_text("#sample-id") == first[0]
        assert set(page.eval_on_selector_all("section.model", "s => s.map(x => x.dataset.model)")) == set(MODELS)
        assert "token_f1" in page.inner_text("section.model[data-model='tuned']")
        page.goto(server + "/compare?evaluation=nope")
        assert "no evaluation 'nope'" in page.inner_text("#error")
        # the history chart: plotly served by the viewer itself, drawn without error
        page.goto(server + "/history?" + urlencode({"evaluation": "viewed", "metric": "token_f1"}))
        page.wait_for_selector("#history-chart svg.main-svg", timeout=60_000)
        assert page.eval_on_selector_all("#history tbody tr", "rows => rows.length") == 3  # run 1: one model; run 2: both
    outside = [u for u in requests if not u.startswith(server)]
    assert outside == [] and [p for p in problems if "404" not in p] == []
    assert any(u.endswith("/static/view.css") for u in requests) and any(u.endswith("/static/plotly.min.js") for u in requests)


@pytest.mark.slow
def test_a_static_export_opens_from_file_with_the_live_counts(viewed, tmp_path):
    """`facetlake view --export DIR --url PERMALINK`: the same samples as the live view,
    page by page from file://, nothing requested from anywhere else."""
    from typer.testing import CliRunner

    from pipelines.cli import app

    lake, fp, reader = viewed
    url = "/compare?" + urlencode({"evaluation": "viewed", "metric": "token_f1", "mode": "regressed"})
    live = _all_ids(reader, CompareQuery.from_params(dict(evaluation="viewed", metric="token_f1", mode="regressed")))
    out = CliRunner().invoke(app, ["view", "--lake", lake.root, "--export", str(tmp_path / "bundle"), "--url", url])
    assert out.exit_code == 0, out.output
    assert f"wrote {len(live)} samples" in out.output
    refused = CliRunner().invoke(app, ["view", "--lake", lake.root, "--export", str(tmp_path / "b2"), "--url", url, "--max-samples", "3"])
    assert refused.exit_code == 1 and "more than 3" in refused.output
    with chromium() as browser:
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto((tmp_path / "bundle" / "index.html").as_uri())
        assert int(page.inner_text("#total")) == len(live)
        seen = _ids_on_every_page(page)
        assert seen == live
        first_here = _shown_ids(page)[0]
        page.click("a.sample-link >> nth=0")  # a sample page of the bundle
        assert page.inner_text("#sample-id") == first_here
    assert all(u.startswith("file://") for u in requests)


@pytest.mark.slow
def test_fifty_thousand_samples_per_model_in_chromium(tmp_path):
    """2 models x 50,000 samples (benchmarks/bench_viewer.py's lake): the regressed mode and
    a regular-expression search show exactly what DuckDB returns, page 1 and the count."""
    from benchmarks.bench_viewer import build_lake
    from resources.lake.resource import LakeStore

    root, fp = build_lake(tmp_path, 50_000)
    lake = LakeStore(root=root)
    f1 = _latest(lake, fp, "token_f1").pivot(on="model", index="sample_id", values="value")
    order = query(lake, f"SELECT sample_id, position FROM samples WHERE fingerprint = '{fp}'")
    regressed = (f1.filter(pl.col("tuned") < pl.col("base")).join(order, on="sample_id").sort("position")["sample_id"].to_list())
    pattern = "#12[0-9]{3}: "
    matched = query(lake, f"""SELECT s.sample_id FROM samples s WHERE s.fingerprint = '{fp}' AND (regexp_matches(s.input, '{pattern}')
        OR EXISTS (SELECT 1 FROM generations g WHERE g.fingerprint = s.fingerprint AND g.sample_id = s.sample_id
                   AND regexp_matches(g.output, '{pattern}'))) ORDER BY s.position""")["sample_id"].to_list()
    assert 1000 < len(regressed) < 50_000 and len(matched) == 1000
    viewer = BackgroundServer(create_app(root), name="the viewer", lifespan="on").start()
    base = f"{viewer.url}/compare?"
    try:
        with chromium() as browser:
            page = browser.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            for params, expected in (({"mode": "regressed"}, regressed), ({"q": pattern, "regex": "1"}, matched)):
                page.goto(base + urlencode({"evaluation": "scale", "baseline": "base", "metric": "token_f1", **params}))
                assert int(page.inner_text("#total")) == len(expected)
                assert _shown_ids(page) == expected[:50]
                page.click("#next")
                assert _shown_ids(page) == expected[50:100]
    finally:
        viewer.stop()
    assert all(u.startswith(f"{viewer.url}/") for u in requests)


def test_the_leaderboard_is_the_stored_comparison(viewed):
    from pipelines.view.data import leaderboard

    lake, fp, reader = viewed
    board = leaderboard(reader)
    stored = query(lake, f"SELECT model, metric, mean, ci_low FROM comparisons WHERE fingerprint = '{fp}' AND kind = 'model_metric'"
                         " AND mean IS NOT NULL")
    assert board.height == stored.height > 0
    assert dict(zip(zip(board["model"], board["metric"]), board["mean"])) == dict(zip(zip(stored["model"], stored["metric"]), stored["mean"]))
    f1 = board.filter(pl.col("metric") == "token_f1")
    assert set(f1["tie_group"].to_list()) <= {1, 2} and f1["tie_group"].min() == 1
    regressed = query(lake, f"SELECT DISTINCT model, metric FROM comparisons WHERE fingerprint = '{fp}' AND kind = 'pairwise' "
                            "AND verdict = 'regressed'")
    assert set(zip(board.filter(pl.col("regressed"))["model"], board.filter(pl.col("regressed"))["metric"])) == set(
        zip(regressed["model"], regressed["metric"]))


def test_history_marks_the_regression_alert_of_each_run(viewed):
    from pipelines.view.data import metric_history

    lake, fp, reader = viewed
    history = metric_history(reader, "viewed", "token_f1")
    frame = history.filter(pl.col("run_id") == history["run_id"][-1])  # after the last scores run (one run per model pair)
    assert set(frame["model"]) == set(MODELS) and frame["n"].to_list() == [N, N]
    f1 = _latest(lake, fp, "token_f1").group_by("model").agg(pl.col("value").mean())
    assert dict(zip(frame["model"], frame["mean"])) == pytest.approx(dict(zip(f1["model"], f1["value"])))
    regressed = set(query(lake, f"SELECT model FROM comparisons WHERE fingerprint = '{fp}' AND kind = 'pairwise' "
                                "AND metric = 'token_f1' AND verdict = 'regressed'")["model"])
    assert {m for m, r in zip(frame["model"], frame["regressed"]) if r} == regressed


@pytest.mark.parametrize("sort", ["value:tuned", "delta:tuned", "input", "sample_id"])
def test_any_column_sorts_like_sql(viewed, sort):
    lake, fp, reader = viewed
    q = CompareQuery(evaluation="viewed", baseline="sfres-system", metric="token_f1", sort=sort, desc=True)
    got = _all_ids(reader, q)
    f1 = _latest(lake, fp, "token_f1").pivot(on="model", index="sample_id", values="value")
    samples = query(lake, f"SELECT sample_id, position, input FROM samples WHERE fingerprint = '{fp}'").join(f1, on="sample_id")
    key = {"value:tuned": pl.col(MODEL), "delta:tuned": pl.col(MODEL) - pl.col("sfres-system"), "input": pl.col("input"),
           "sample_id": pl.col("sample_id")}[sort]
    expected = samples.with_columns(k=key).sort(["k", "position"], descending=[True, False], nulls_last=True)["sample_id"].to_list()
    assert got == expected
    with pytest.raises(ViewError, match="sort 'value:nobody' is not one of position, sample_id, input"):
        compare_page(reader, CompareQuery(evaluation="viewed", sort="value:nobody"))


def test_cost_latency_and_tokens_show_where_recorded(tmp_path):
    """With a price table in the spec and token counts stored, each output shows its cost:
    tokens in and out times the price per million tokens."""
    from starlette.testclient import TestClient

    from benchmarks.bench_viewer import build_lake
    from resources.lake.resource import LakeStore

    prices = {"base": {"input_per_1m": 2.5, "output_per_1m": 10.0, "currency": "USD"},
              "tuned": {"input_per_1m": 0.15, "output_per_1m": 0.6, "currency": "EUR"}}
    root, fp = build_lake(tmp_path, 60, prices=prices)
    gens = LakeStore(root=root).read("generations", where={"fingerprint": fp}).filter(pl.col("sample_id") == "s0")
    html = TestClient(create_app(root)).get("/compare?" + urlencode({"evaluation": "scale", "baseline": "base"})).text
    for row in gens.iter_rows(named=True):
        p = prices[row["model"]]
        cost = (row["tokens_in"] * p["input_per_1m"] + row["tokens_out"] * p["output_per_1m"]) / 1e6
        assert f"{row['tokens_in']} → {row['tokens_out']} tokens · <span class=\"cost\">{cost:.6f} {p['currency']}</span>" in html
