"""Human review (issue 29): rubrics in the spec, reviews through the page and from a CSV
file, idempotent and concurrent writes, the derived human:<rubric> score rows, the queue,
and agreement equal to sklearn / statsmodels / krippendorff on the stored reviews."""

from __future__ import annotations

import csv
import json
import threading
import urllib.parse
import urllib.request

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from metric_ops.review import ReviewSpecError, assign, parse_review
from pipelines.cli import app as cli
from pipelines.runs.runner import run_evaluation
from resources.catalog import evaluation_row
from resources.catalog.spec import SpecError, resolve
from resources.review import agreement_rows, import_csv, latest_reviews, record_reviews, review_plan, review_row
from tests.support.serving import BackgroundServer
from tests.test_recurring import fresh_instance, lake, spec_for, write_dataset, write_outputs  # noqa: F401 - fixtures

N = 200
REVIEW = {"reviewers_per_sample": 2, "reviewers": ["alice", "bob", "carol"],
          "rubrics": [{"name": "correct", "labels": ["wrong", "right"], "version": "1"},
                      {"name": "fluency", "scale": [1, 5], "version": "2"}]}


def test_the_review_block_is_checked_and_outside_the_fingerprint(tmp_path):
    data = write_dataset(tmp_path, n=4)
    plain = resolve(spec_for("r", data, {"m": "precomputed:column=answer"}))
    reviewed = resolve(spec_for("r", data, {"m": "precomputed:column=answer"}, review=REVIEW))
    assert plain.fingerprint == reviewed.fingerprint  # reviewing changes no result
    plan = parse_review(reviewed.spec.review)
    assert plan.rubric("human:correct").value_of("right") == 1.0 and plan.rubric("fluency").level == "ordinal"
    for bad, needle in (({"rubrics": [{"name": "x"}]}, "needs either labels"),
                        ({"rubrics": [{"name": "x", "scale": [5, 1]}]}, "lo < hi"),
                        ({"rubrics": [{"name": "x", "labels": ["a"]}]}, "two distinct labels"),
                        ({"rubrics": [{"name": "x", "labels": ["a", "b"]}], "reviewers_per_sample": 3, "reviewers": ["a"]},
                         "only 1 reviewers"),
                        ({"rubric": []}, r"unknown keys \['rubric'\]")):
        with pytest.raises(SpecError, match=needle):
            resolve(spec_for("r", data, {"m": "precomputed:column=answer"}, review=bad))
    with pytest.raises(ReviewSpecError, match=r"'maybe' is not one of its labels \['wrong', 'right'\]"):
        plan.rubric("correct").value_of("maybe")
    with pytest.raises(ReviewSpecError, match=r"outside its scale \[1, 5\]"):
        plan.rubric("fluency").value_of(7)


def test_the_queue_hands_each_sample_to_k_reviewers():
    queue = assign([f"s{i}" for i in range(9)], ["alice", "bob", "carol"], 2)
    assert all(len(set(v)) == 2 for v in queue.values())
    load = {r: sum(r in v for v in queue.values()) for r in ("alice", "bob", "carol")}
    assert load == {"alice": 6, "bob": 6, "carol": 6}


@pytest.fixture
def reviewed_lake(lake, fresh_instance, tmp_path):  # noqa: F811
    """N samples, two models (exact outputs on 120 and 150 samples), rubrics declared."""
    data = write_dataset(tmp_path, n=N)
    models = {"m1": f"precomputed:{write_outputs(tmp_path, 'm1.jsonl', correct=120, n=N)}",
              "m2": f"precomputed:{write_outputs(tmp_path, 'm2.jsonl', correct=150, n=N)}"}
    spec = spec_for("rev", data, models, review=REVIEW)
    spec.metrics = ["exact_match", "token_f1"]
    run_evaluation(spec, lake, fresh_instance)
    return lake


def _labels(lake, reviewer_noise: int) -> dict[tuple[str, str], str]:
    """A reviewer's labels of m1: exact match, with every ``reviewer_noise``-th sample flipped."""
    fp = evaluation_row(lake, "rev")["fingerprint"]
    em = lake.read("scores", where={"fingerprint": fp, "model": "m1", "metric": "exact_match"}).sort("sample_id")
    out = {}
    for i, (sid, value) in enumerate(zip(em["sample_id"], em["value"])):
        right = (value == 1.0) != (i % reviewer_noise == 0)
        out[("m1", sid)] = "right" if right else "wrong"
    return out


def test_csv_import_is_idempotent_and_reports_bad_rows(reviewed_lake, tmp_path):
    lake = reviewed_lake
    labels = _labels(lake, 7)
    path = tmp_path / "alice.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sample_id", "model", "rubric", "value", "reviewer"])
        for (model, sid), label in labels.items():
            w.writerow([sid, model, "correct", label, "alice"])
        w.writerow(["nope", "m1", "correct", "right", "alice"])
        w.writerow(["q1", "m1", "correct", "maybe", "alice"])
    first = import_csv(lake, "rev", path)
    assert (first.added, first.already) == (N, 0)
    assert [line for line, _ in first.errors] == [N + 2, N + 3] and "no sample 'nope'" in first.errors[0][1]
    again = CliRunner().invoke(cli, ["review", "import", str(path), "-e", "rev", "--lake", lake.root])
    assert again.exit_code == 1 and f"0 review(s) added, {N} already stored, 2 row(s) left out" in again.output
    assert lake.read("reviews").height == N
    fp = evaluation_row(lake, "rev")["fingerprint"]
    human = lake.read("scores", where={"fingerprint": fp, "model": "m1", "metric": "human:correct"})
    assert human.height == N and dict(zip(human["sample_id"], human["value"])) == {
        sid: (1.0 if label == "right" else 0.0) for (_, sid), label in labels.items()}
    detail = json.loads(human.filter(pl.col("sample_id") == "q3")["detail"][0])
    assert detail["reviewers"] == {"alice": labels[("m1", "q3")]} and detail["rubric_version"] == ["1"]


def test_two_reviewers_writing_at_once_lose_nothing(reviewed_lake):
    lake = reviewed_lake
    row, plan = review_plan(lake, "rev")
    rubric = plan.rubric("fluency")
    batches = {who: [review_row(row, "m2", f"q{i}", rubric, who, 1 + (i + k) % 5, "viewer") for i in range(20)]
               for k, who in enumerate(("alice", "bob"))}
    errors = []

    def write(rows):
        try:
            for r in rows:
                record_reviews(lake, "rev", [r])
        except Exception as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(rows,)) for rows in batches.values()]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    stored = latest_reviews(lake, row["fingerprint"])
    assert stored.height == 40
    human = lake.read("scores", where={"fingerprint": row["fingerprint"], "model": "m2", "metric": "human:fluency"})
    assert human.height == 20 and all(len(json.loads(d)["reviewers"]) == 2 for d in human["detail"])
    expected = {f"q{i}": ((1 + i % 5) + (1 + (i + 1) % 5)) / 2 for i in range(20)}
    assert dict(zip(human["sample_id"], human["value"])) == pytest.approx(expected)


@pytest.mark.slow
def test_reviews_from_the_page_and_a_csv_agree_as_the_references_say(reviewed_lake, tmp_path):
    """alice's 200 labels from a CSV, bob's 200 through the viewer's form (POST on a real
    server, a double submit included), then agreement against the reference packages."""
    from sklearn.metrics import cohen_kappa_score, roc_auc_score

    from pipelines.view import create_app

    lake = reviewed_lake
    alice, bob = _labels(lake, 7), _labels(lake, 5)
    path = tmp_path / "alice.csv"
    path.write_text("sample_id,model,rubric,value\n" + "".join(f"{sid},{m},correct,{v}\n" for (m, sid), v in alice.items()))
    assert import_csv(lake, "rev", path, reviewer="alice").added == N
    viewer = BackgroundServer(create_app(lake.root, reviewer="bob"), name="the viewer", lifespan="on").start()
    try:
        fp = evaluation_row(lake, "rev")["fingerprint"]
        for i, ((model, sid), label) in enumerate(bob.items()):
            body = urllib.parse.urlencode({"evaluation": "rev", "model": model, "sample_id": sid, "rubric": "correct",
                                           "value": label, "back": f"/sample/{fp}/{sid}"}).encode()
            for _ in range(2 if i == 0 else 1):  # a double click on the first
                with urllib.request.urlopen(f"{viewer.url}/review", data=body, timeout=60) as response:
                    assert response.status == 200 and f"/sample/{fp}/{sid}" in response.url  # redirected back
        with urllib.request.urlopen(f"{viewer.url}/queue?evaluation=rev&reviewer=bob", timeout=60) as response:
            page = response.read().decode()
    finally:
        viewer.stop()
    stored = latest_reviews(lake, fp)
    assert stored.filter(pl.col("reviewer") == "bob").height == N and lake.read("reviews").height == 2 * N
    assert "still to review" in page
    rows, skipped = agreement_rows(lake, "rev")
    by_kind = {r["kind"]: r for r in rows if r["rubric"] == "correct"}
    ids = sorted(alice)
    a = np.array([alice[k] == "right" for k in ids], dtype=float)
    b = np.array([bob[k] == "right" for k in ids], dtype=float)
    assert by_kind["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert by_kind["cohen_kappa"]["n"] == N
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    assert by_kind["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(aggregate_raters(np.stack([a, b], axis=1))[0]), abs=1e-12)
    krippendorff = pytest.importorskip("krippendorff")
    assert by_kind["krippendorff_alpha"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=np.stack([a, b]), level_of_measurement="nominal"), abs=1e-12)
    judged = {r["metric"]: r for r in rows if r["kind"] == "judge_vs_human_auroc"}
    f1 = lake.read("scores", where={"fingerprint": fp, "model": "m1", "metric": "token_f1"}).sort("sample_id")
    human = lake.read("scores", where={"fingerprint": fp, "model": "m1", "metric": "human:correct"}).sort("sample_id")
    assert judged["token_f1"]["value"] == pytest.approx(roc_auc_score(human["value"].to_numpy(), f1["value"].to_numpy()), abs=1e-12)
    assert any("fluency" in s for s in skipped)  # no fluency review yet: said, not a zero


def test_the_agreement_asset_is_a_verdict_kept_fresh_after_reviews(reviewed_lake, fresh_instance):  # noqa: F811
    """A review rewrites human:<rubric> rows, so `agreement` (and the other verdicts) are
    stale until recomputed; the stored rows equal agreement_rows."""
    from assets.freshness import stale_verdicts
    from pipelines.runs.runner import refresh_verdicts

    lake = reviewed_lake
    row, plan = review_plan(lake, "rev")
    fp = row["fingerprint"]
    assert "agreement" not in stale_verdicts(lake, fp)  # computed by the run (no reviews yet: no rows)
    rubric = plan.rubric("correct")
    reviews = [review_row(row, "m1", f"q{i}", rubric, who, ["wrong", "right"][(i + k) % 3 != 0], "viewer")
               for i in range(30) for k, who in enumerate(("alice", "bob"))]
    record_reviews(lake, "rev", reviews)
    assert "agreement" in stale_verdicts(lake, fp) and "correlations" in stale_verdicts(lake, fp)
    refresh_verdicts(lake, [fp], fresh_instance)
    assert stale_verdicts(lake, fp) == []
    stored = lake.read("agreement", where={"fingerprint": fp}).sort(["kind", "metric"], nulls_last=True)
    expected, _ = agreement_rows(lake, "rev")
    assert sorted((r["kind"], r["metric"], round(r["value"], 12)) for r in expected) == sorted(
        (k, m, round(v, 12)) for k, m, v in zip(stored["kind"], stored["metric"], stored["value"]))
    assert {"cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "judge_vs_human_auroc"} <= set(stored["kind"])
    # the viewer's agreement page: the stored rows, each disagreement linked to its sample page
    import re

    from starlette.testclient import TestClient

    from pipelines.view import create_app

    client = TestClient(create_app(lake.root))
    page = client.get("/agreement?evaluation=rev").text
    assert page.count('class="agreement-row"') == stored.height
    links = re.findall(r'class="disagreement" href="([^"]+)"', page)
    disagree = {f"q{i}" for i in range(30) if (i % 3 != 0) != ((i + 1) % 3 != 0)}  # alice and bob differ
    assert {re.search(r"/sample/[0-9a-f]+/([^?]+)", link).group(1) for link in links} == disagree
    assert client.get(links[0].replace("&amp;", "&")).status_code == 200


def test_evidence_carries_the_reviews_and_verify_catches_an_altered_one(reviewed_lake, tmp_path):
    lake = reviewed_lake
    row, plan = review_plan(lake, "rev")
    record_reviews(lake, "rev", [review_row(row, "m1", f"q{i}", plan.rubric("correct"), "alice", "right", "viewer") for i in range(5)])
    runner = CliRunner()
    out = tmp_path / "evidence"
    done = runner.invoke(cli, ["export", "-e", "rev", "--out", str(out), "--unsigned", "--lake", lake.root])
    assert done.exit_code == 0, done.output
    exported = [json.loads(line) for line in (out / "reviews.jsonl").read_text().splitlines()]
    assert sorted((r["reviewer"], r["sample_id"], r["label"]) for r in exported) == [("alice", f"q{i}", "right") for i in range(5)]
    assert runner.invoke(cli, ["verify", str(out), "--allow-unsigned", "--lake", lake.root]).exit_code == 0
    exported[0]["label"], exported[0]["value"] = "wrong", 0.0  # a review altered after export
    (out / "reviews.jsonl").write_text("".join(json.dumps(r) + "\n" for r in exported))
    bad = runner.invoke(cli, ["verify", str(out), "--allow-unsigned"])
    assert bad.exit_code == 1 and "reviews.jsonl" in bad.output
