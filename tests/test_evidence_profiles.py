"""Evidence export -> verify round trip with tamper detection; practitioner profiles."""

from __future__ import annotations

import json
import warnings

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from resources.evidence.export import export_evidence
from resources.evidence.verify import verify_evidence
from resources.catalog.spec import EvaluationSpec, fingerprint_of
from resources.catalog.profiles import CrossCheckWarning, load_profile, profile_metrics, profile_view


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    from resources.evidence.keys import generate_keypair, load_public_key, load_signing_key

    private, public, _ = generate_keypair(tmp_path_factory.mktemp("keys"))
    return load_signing_key(private), load_public_key(public)


@pytest.fixture(scope="module")
def exported(evaluated_lake, tmp_path_factory, keys):
    import shutil

    lake, resolved = evaluated_lake
    copy = tmp_path_factory.mktemp("evidence_lake") / "lake"  # export appends its anchor: keep the session lake read-only
    shutil.copytree(lake.root, copy)
    lake = type(lake)(root=str(copy))
    out = tmp_path_factory.mktemp("evidence") / "json"
    manifest = export_evidence(lake, resolved.fingerprint[:12], out, "json", include_samples=True, signing_key=keys[0])
    return lake, resolved, out, manifest


def test_export_holds_scores_fingerprint_inputs_and_manifest(exported):
    lake, resolved, out, manifest = exported
    assert manifest["fingerprint"] == resolved.fingerprint
    assert set(manifest["files"]) == {"evaluation.json", "models.json", "metrics.json", "scores.jsonl", "judge_details.jsonl",
                                      "summary.jsonl", "runs.jsonl", "outbound_ledger.jsonl", "reviews.jsonl", "environment.json", "samples.jsonl"}
    evaluation = json.loads((out / "evaluation.json").read_text())
    assert fingerprint_of(evaluation["fingerprint_inputs"]) == resolved.fingerprint
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == lake.read("scores", where={"fingerprint": resolved.fingerprint}).height
    assert {r["status"] for r in rows} <= {"scored", "unscored", "error"} and all(r["signature"] for r in rows)
    metrics = json.loads((out / "metrics.json").read_text())
    assert {m["metric"] for m in metrics} >= {"bleu", "token_f1", "exact_match"}


def test_verify_round_trips_and_detects_a_tampered_byte(exported, tmp_path, keys):
    import shutil

    lake, resolved, out, _ = exported
    report = verify_evidence(out, public_key=keys[1], lake=lake)
    assert report.ok, report.problems
    assert report.recomputed_fingerprint == resolved.fingerprint and report.files_checked == 11
    assert report.signature_ok and report.anchored
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    data = bytearray((copy / "scores.jsonl").read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in one byte
    (copy / "scores.jsonl").write_bytes(bytes(data))
    report = verify_evidence(copy, public_key=keys[1])
    assert not report.ok and any("scores.jsonl" in p and "modified" in p for p in report.problems)
    # a consistent forgery: rewrite the fingerprint inputs and re-hash the manifest -> the fingerprint breaks
    forged = tmp_path / "forged"
    shutil.copytree(out, forged)
    evaluation = json.loads((forged / "evaluation.json").read_text())
    evaluation["fingerprint_inputs"]["generation"]["temperature"] = 0.7
    (forged / "evaluation.json").write_text(json.dumps(evaluation))
    from resources.evidence.keys import sha256_file

    manifest = json.loads((forged / "MANIFEST.json").read_text())
    manifest["files"]["evaluation.json"]["sha256"] = sha256_file(forged / "evaluation.json")
    (forged / "MANIFEST.json").write_text(json.dumps(manifest))
    report = verify_evidence(forged, public_key=keys[1])
    assert not report.ok and any("recomputed" in p for p in report.problems)
    assert any("signature does not match" in p for p in report.problems)
    (copy / "extra.txt").write_text("x")
    assert any("not listed" in p for p in verify_evidence(copy, public_key=keys[1]).problems)


def test_cli_export_csv_and_verify(lake_copy, tmp_path):
    import csv

    lake, resolved = lake_copy
    runner = CliRunner()
    out = tmp_path / "csv"
    result = runner.invoke(app, ["export", "-e", resolved.fingerprint, "--out", str(out), "--format", "csv", "--unsigned", "--lake", lake.root])
    assert result.exit_code == 0, result.output
    with open(out / "scores.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and rows[0]["fingerprint"] == resolved.fingerprint and "detail" in rows[0]
    assert runner.invoke(app, ["verify", str(out)]).exit_code == 1  # unsigned: not accepted by default
    assert runner.invoke(app, ["verify", str(out), "--allow-unsigned", "--lake", lake.root]).exit_code == 0
    (out / "summary.csv").write_text((out / "summary.csv").read_text().replace("0.", "1.", 1))
    bad = runner.invoke(app, ["verify", str(out), "--allow-unsigned"])
    assert bad.exit_code == 1 and "summary.csv" in bad.output
    again = runner.invoke(app, ["export", "-e", resolved.fingerprint, "--out", str(out), "--unsigned", "--lake", lake.root])
    assert again.exit_code == 1 and "not empty" in again.output


# ------------------------------------------------------------------ profiles
def test_shipped_profiles_map_dimensions_metrics_and_output():
    for name, form in (("technical_expert", "technical_table"), ("domain_expert", "per_sample"), ("compliance_officer", "evidence")):
        profile = load_profile(name)
        assert profile.form == form and profile.dimensions and profile.metrics
    with pytest.raises(ValueError, match="unknown profile 'auditor'.*compliance_officer"):
        load_profile("auditor")


def test_profile_selects_metrics_and_warns_below_two_per_dimension(tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = EvaluationSpec.from_mapping({"name": "p", "dataset": {"kind": "sfres"}, "models": {"m": "precomputed:column=system_output"},
                                            "profile": "domain_expert"})
    assert spec.metrics == ["numeric_accuracy", "rag_citations", "rag_evidence", "retrieval"] and spec.profile == "domain_expert"
    # an organisation's own profile that targets a dimension with one metric
    (tmp_path / "legal.yaml").write_text(
        "name: legal_reviewer\ndimensions: [factual, baseline_grounding]\nmetrics: [numeric_accuracy, bleu, rouge_l]\n"
        "output: {form: per_sample, limit: 3}\n")
    monkeypatch.setenv("FACETLAKE_PROFILES", str(tmp_path))
    with pytest.warns(CrossCheckWarning, match="factual dimension but the run has 1 metric"):
        selected = profile_metrics("legal_reviewer", ["token_f1"])
    assert selected == ["token_f1", "numeric_accuracy", "bleu", "rouge_l"]
    judged = profile_metrics("compliance_officer", [], {"faithfulness": {"judge": "api:m@http://127.0.0.1:1/v1"}})
    assert "faithfulness" in judged and "g_eval" not in judged


def test_profile_views(evaluated_lake):
    lake, resolved = evaluated_lake
    table = profile_view(lake, [resolved.fingerprint], "technical_expert")
    assert {"model", "metric", "signature", "mean", "n_scored"} <= set(table.columns) and table.height > 0
    evidence = profile_view(lake, [resolved.fingerprint], "compliance_officer")
    assert evidence["metric"].to_list()[-1] == "0 calls, 0 anonymised"
