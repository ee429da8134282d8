"""The sentinel test: a full `facetlake run` against a real local HTTP server with a sentinel
key and sentinel PII, then an evidence export; the key must appear nowhere we store or
log, and the raw PII nowhere the server received.

Also: offline mode refuses an external metric and an external backend in a real pipeline
run before any socket opens, while local metrics run and provenance records the mode.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.recording_server import RecordingServer

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PII = ["Vanterpool", "ottoline.vanterpool@example.org", "7946 0958", "4111 1111 1111 1111", "GB82 WEST", "Quince",
       "203.0.113.77", "Vogelsang", "Hauptstraße", "Berlin"]
ROWS = [
    {"id": "s1", "question": "Patient Dr. Ottoline Vanterpool (ottoline.vanterpool@example.org, +44 20 7946 0958) asks whether "
                             "her card 4111 1111 1111 1111 was charged.", "answer": "Dr. Vanterpool was charged once."},
    {"id": "s2", "question": "Transfer from IBAN GB82 WEST 1234 5698 7654 32 signed by Bartholomew Quince from 203.0.113.77.",
     "answer": "Quince must confirm the transfer."},
    {"id": "s3", "question": "Frau Ingrid Vogelsang lives at Hauptstraße 12, 10115 Berlin. Where does she live?",
     "answer": "Ingrid Vogelsang lives in Berlin."},
]


def _write_spec(folder: Path, base_url: str) -> Path:
    import yaml

    data = folder / "sentinel.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    spec = {
        "name": "sentinel",
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "generation": {"temperature": 0.0, "max_tokens": 32},
        "models": {"remote": f"api:sentinel-model@{base_url}"},
        "runtime": {"api_key_env": "SENTINEL_PROVIDER_KEY"},
        "metrics": ["token_f1", "g_eval"],
        "metric_params": {"g_eval": {"judge": f"api:sentinel-judge@{base_url}"}},
        "privacy": {"anonymise": "rule_based", "references": True},
    }
    path = folder / "sentinel.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "facetlake"), *args], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def _hits(folder: Path, needle: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.slow
def test_sentinel_key_and_pii_never_leave_or_persist(tmp_path):
    key = f"sk-sentinel-{uuid.uuid4().hex}"
    server = RecordingServer(api_key=key).start()
    try:
        home = tmp_path / "dagster_home"
        home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
        lake = tmp_path / "lake"
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FACETLAKE_OFFLINE", "FACETLAKE_ANONYMISE_FORCE")}
        env.update(DAGSTER_HOME=str(home), FACETLAKE_LOG_LEVEL="DEBUG", OPENAI_LOG="debug", SENTINEL_PROVIDER_KEY=key,
                   FACETLAKE_JUDGE_API_KEY=key, HF_HUB_OFFLINE="1")
        spec = _write_spec(tmp_path, server.base_url)
        run = _cli(["run", str(spec), "--lake", str(lake)], env)
        logs = run.stdout + run.stderr
        assert run.returncode == 0, logs[-3000:]

        from resources.lake.resource import LakeStore

        store = LakeStore(root=str(lake))
        fp = store.read("evaluations")["fingerprint"][0]
        exports = []
        for fmt in ("json", "csv"):
            out = tmp_path / f"evidence-{fmt}"
            done = _cli(["export", "--fingerprint", fp, "--out", str(out), "--format", fmt, "--unsigned", "--lake", str(lake)], env)
            assert done.returncode == 0, done.stdout + done.stderr
            logs += done.stdout + done.stderr
            exports.append(out)

        # the key was really used (the server demanded it) ...
        assert f"Bearer {key}" in server.authorizations
        # ... and is nowhere we keep: lake, Dagster storage, captured logs, exports
        needle = key.encode()
        for folder in (lake, home, *exports):
            assert _hits(folder, needle) == [], f"key found under {folder}"
        assert key not in logs
        # the server got anonymised text only, and did get it
        received = server.texts()
        assert "[PERSON_1]" in received and "[CREDIT_CARD_1]" in received and "[IBAN_CODE_1]" in received
        leaked = [p for p in PII if p in received]
        assert leaked == []

        ledger = store.read("outbound_ledger")
        assert set(ledger["purpose"].to_list()) >= {"generation", "g_eval"}
        assert ledger["anonymised"].all() and ledger.filter(ledger["purpose"] == "generation").height == len(ROWS)
        assert set(ledger["host"].to_list()) == {"127.0.0.1"}
        scores = store.read("scores")
        assert set(scores.filter(scores["metric"] == "g_eval")["locality"].to_list()) == {"external"}
        # references were mapped like the prompts: the echoed output and the reference share placeholders
        f1 = scores.filter((scores["metric"] == "token_f1") & (scores["sample_id"] == "s2"))
        assert f1["status"][0] == "scored" and f1["value"][0] > 0
        detail = json.loads(store.read("runs").filter(store.read("runs")["asset"] == "generations")["provenance"][0])
        assert key not in json.dumps(detail)
    finally:
        server.stop()


@pytest.mark.slow
def test_offline_mode_blocks_external_metric_and_backend_before_any_socket(tmp_path, dagster_home, monkeypatch):
    import dagster as dg

    # an instance of our own, entered, so no instance state left by earlier tests is used
    with dg.DagsterInstance.get() as instance:
        _offline_checks(tmp_path, instance, monkeypatch)


def _offline_checks(tmp_path, instance, monkeypatch):
    from pipelines.runs.runner import materialize_model, materialize_samples, materialize_summary
    from pipelines.runs.register import register
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore
    from resources.privacy.outbound import OfflineModeError

    attempts: list = []

    def refuse(self, address):
        attempts.append(address)
        raise AssertionError(f"socket connect to {address} in offline mode")

    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = EvaluationSpec.from_mapping({
        "name": "offline-check",
        "dataset": {"kind": "sfres", "limit": 5},
        "models": {"sfres-system": "precomputed:column=system_output", "remote": "api:gpt-4o-mini@https://api.example.com/v1"},
        "metrics": ["token_f1", "g_eval"],
        "metric_params": {"g_eval": {"judge": "api:gpt-4o-mini@https://api.example.com/v1"}},
    })
    resolved = register(spec, lake, instance)
    monkeypatch.setenv("FACETLAKE_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    materialize_samples(resolved.fingerprint, lake, instance)
    materialize_model("sfres-system", resolved.fingerprint, lake, instance)
    with pytest.raises(OfflineModeError, match=r"backend 'api:gpt-4o-mini@https://api.example.com/v1' is external"):
        materialize_model("remote", resolved.fingerprint, lake, instance)
    materialize_summary(resolved.fingerprint, lake, instance)
    assert attempts == []

    scores = lake.read("scores", where={"fingerprint": resolved.fingerprint, "model": "sfres-system"})
    judged = scores.filter(scores["metric"] == "g_eval")
    assert judged.height == 5 and set(judged["status"].to_list()) == {"error"}
    assert set(judged["locality"].to_list()) == {"external"}
    assert "metric 'g_eval' is external" in judged["detail"][0]
    local = scores.filter(scores["metric"] == "token_f1")
    assert set(local["status"].to_list()) == {"scored"} and set(local["locality"].to_list()) == {"local"}
    runs = lake.read("runs", where={"fingerprint": resolved.fingerprint})
    assert set(runs["mode"].to_list()) == {"offline"}
    assert not lake.exists("outbound_ledger")  # nothing left the process
