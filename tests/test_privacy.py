"""Anonymisation, the outbound path, the ledger, keys and offline mode (privacy issue)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
import json
import socket
import warnings

import openai
import polars as pl
import pytest

from resources.privacy import outbound
from resources.privacy.anonymise import (
    AnonymisationError,
    Anonymiser,
    ModelNER,
    PresidioNER,
    build_anonymiser,
    iban_valid,
    luhn_valid,
)
from resources.privacy.keys import redact, register_secret
from resources.lake.resource import LakeStore
from resources.privacy.session import LedgerWriter, outbound_session
from resources.privacy.policy import resolve_policy
from tests.support.recording_server import RecordingServer


@pytest.fixture(scope="module")
def server():
    srv = RecordingServer(ner=lambda text: [{"type": "PERSON", "text": n} for n in ("Zorba Klitschko",) if n in text]).start()
    yield srv
    srv.stop()


@pytest.fixture
def no_sockets(monkeypatch):
    """Any outbound connection attempt fails the test."""
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise AssertionError(f"a socket tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


# ------------------------------------------------------------------ stage 1
def test_checksums():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and not iban_valid("DE88 3704 0044 0532 0130 00")


def test_deterministic_recognisers_find_each_type_and_leave_numbers_alone():
    text = ("mail a.b@example.org, call +44 20 7946 0958, card 4111-1111-1111-1111 (not 4111-1111-1111-1112), "
            "IBAN GB82 WEST 1234 5698 7654 32, hosts 10.0.0.7 and fe80::1. Version 1.2.3 on 2024-03-15, order 20240315.")
    found = {(e.type, e.text) for e in Anonymiser().find(text)}  # stage 1 with overlaps resolved
    assert found == {
        ("EMAIL_ADDRESS", "a.b@example.org"), ("PHONE_NUMBER", "+44 20 7946 0958"), ("CREDIT_CARD", "4111-1111-1111-1111"),
        ("IBAN_CODE", "GB82 WEST 1234 5698 7654 32"), ("IP_ADDRESS", "10.0.0.7"), ("IP_ADDRESS", "fe80::1"),
    }


# ------------------------------------------------------------------ placeholders
def test_consistent_numbered_placeholders_across_forms_and_texts():
    anon = build_anonymiser(["rule_based"])
    r = anon.anonymise("Dr. Maria Schmidt met Jonas Becker in Berlin. Later Schmidt (M. Schmidt) wrote to maria@example.de.")
    assert r.text == "Dr. [PERSON_1] met [PERSON_2] in [LOCATION_1]. Later [PERSON_1] ([PERSON_1]) wrote to [EMAIL_ADDRESS_1]."
    assert r.counts == {"PERSON": 4, "LOCATION": 1, "EMAIL_ADDRESS": 1}
    # the same map applied to a reference: like is compared with like
    ref = anon.anonymise("Becker and Maria Schmidt stayed in Berlin; Anna Weber joined.", r.mapping)
    assert ref.text == "[PERSON_2] and [PERSON_1] stayed in [LOCATION_1]; [PERSON_3] joined."
    assert "Schmidt" not in repr(r.mapping)


def test_existing_placeholders_are_kept_and_numbering_continues():
    anon = build_anonymiser(["rule_based"])
    out, counts, _ = anon.anonymise_many(["[PERSON_1] said hello", "Anna Weber replied"])
    assert out == ["[PERSON_1] said hello", "[PERSON_2] replied"] and counts == {"PERSON": 1}


def test_presidio_strategy_runs_with_no_network(no_sockets):
    pytest.importorskip("presidio_analyzer", reason="the presidio strategy needs the privacy extra: pip install -e '.[privacy]'")
    found = {(e.type, e.text) for e in PresidioNER().find("Write to jane.roe@example.com or 192.168.4.2.")}
    assert ("EMAIL_ADDRESS", "jane.roe@example.com") in found and ("IP_ADDRESS", "192.168.4.2") in found
    assert no_sockets == []


# ------------------------------------------------------------------ policy
def test_forced_strategy_cannot_be_weakened(monkeypatch):
    monkeypatch.setenv("FACETLAKE_ANONYMISE_FORCE", "rule_based")
    with pytest.warns(UserWarning, match="forced by the administrator"):
        policy = resolve_policy({"anonymise": "off", "entities": ["EMAIL_ADDRESS"]})
    assert policy.strategies == ("rule_based",) and policy.active
    assert set(policy.entities) == {"EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS", "CREDIT_CARD", "IBAN_CODE", "PERSON", "LOCATION", "ORGANIZATION"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stronger = resolve_policy({"anonymise": ["rule_based", "presidio"]})
    assert stronger.strategies == ("rule_based", "presidio")
    monkeypatch.delenv("FACETLAKE_ANONYMISE_FORCE")
    assert not resolve_policy({"anonymise": "off"}).active
    with pytest.raises(ValueError, match="unknown anonymisation strategy"):
        resolve_policy({"anonymise": "magic"})


def test_forced_strategy_applies_outside_any_session(monkeypatch, server):
    monkeypatch.setenv("FACETLAKE_ANONYMISE_FORCE", "rule_based")
    client = openai.OpenAI(base_url=server.base_url, api_key="unused-key-123", max_retries=0)
    before = len(server.received)
    reply = outbound.chat_completion(client, outbound.CallContext("probe"), model="m",
                                     messages=[{"role": "user", "content": "Patient Helga Brandt, helga@example.de"}])
    sent = json.loads(server.received[before])
    assert sent["messages"][0]["content"] == "Patient [PERSON_1], [EMAIL_ADDRESS_1]"
    assert "[PERSON_1]" in reply.choices[0].message.content


# ------------------------------------------------------------------ outbound path + ledger
def test_session_anonymises_and_ledger_holds_hashes_only(tmp_path, server):
    from resources.sql import query

    lake = LakeStore(root=str(tmp_path / "lake"))
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-ledger-test-0001", max_retries=0)
    before = len(server.received)
    with outbound_session(lake, run_id="r1", fingerprint="f" * 64, model="m1", privacy={"anonymise": "rule_based"}):
        outbound.chat_completion(client, outbound.CallContext("g_eval", sample_id="s1", model="judge"), messages=[
            {"role": "system", "content": "Judge the answer about Ottilie Marchetti."},
            {"role": "user", "content": "Patient Ottilie Marchetti lives in Vienna. Marchetti's phone is +43 1 234 5678."}])
        outbound.completion(client, outbound.CallContext("generation", sample_id="s1", model="gen"), prompt="Ask Marchetti.")
    sent = [json.loads(b) for b in server.received[before:]]
    assert sent[0]["messages"][0]["content"] == "Judge the answer about [PERSON_1]."
    assert sent[0]["messages"][1]["content"] == "Patient [PERSON_1] lives in [LOCATION_1]. [PERSON_1]'s phone is [PHONE_NUMBER_1]."
    assert sent[1]["prompt"] == "Ask [PERSON_1]."  # same sample, same map across calls
    ledger = query(lake, "select purpose, sample_id, host, anonymised, strategy, entity_counts, n_entities, text_sha256 "
                         "from outbound_ledger order by called_at")
    assert ledger["purpose"].to_list() == ["g_eval", "generation"]
    assert ledger["host"].to_list() == ["127.0.0.1"] * 2 and ledger["anonymised"].to_list() == [True, True]
    assert json.loads(ledger["entity_counts"][0]) == {"LOCATION": 1, "PERSON": 3, "PHONE_NUMBER": 1}
    assert ledger["text_sha256"][1] == hashlib.sha256("Ask [PERSON_1].".encode()).hexdigest()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "lake").rglob("*") if p.is_file())
    assert b"Marchetti" not in raw and b"Ask [PERSON_1]" not in raw and b"sk-ledger-test-0001" not in raw


def test_ledger_commits_each_intent_before_returning_and_completes_in_batches(tmp_path):
    """Issue 16 item 5: every call's intent row is durable when the writer returns (before
    the call is sent); completions are merged in batches onto the same rows."""
    import datetime as dt

    lake = LakeStore(root=str(tmp_path / "lake"))
    writer = LedgerWriter(lake, "r", "f", "m", flush_every=2)
    row = {"called_at": dt.datetime.now(dt.timezone.utc), "host": "h", "text_sha256": "0" * 64, "entity_counts": {"PERSON": 2}}
    first = writer(row)
    assert lake.read("outbound_ledger")["status"].to_list() == ["intent"]
    second, third = writer(row), writer(row)
    assert lake.read("outbound_ledger").height == 3 and writer.commits == 3
    writer.complete(first)
    writer.complete(second, ok=False)  # the second completion fills a batch: merged by the background thread
    writer.wait()
    status = dict(lake.read("outbound_ledger").select("call_id", "status").iter_rows())
    assert status == {first: "completed", second: "failed", third: "intent"}
    writer.complete(third)
    writer.flush()
    ledger = lake.read("outbound_ledger")
    assert ledger.height == 3 and ledger["n_entities"].to_list() == [2, 2, 2]
    assert set(ledger["status"]) == {"completed", "failed"} and ledger["completed_at"].null_count() == 0


def test_ledger_group_commit_shares_commits_between_concurrent_calls(tmp_path):
    """Concurrent callers' intents are committed together (fewer commits than calls), and
    none returns before its row is stored."""
    import datetime as dt
    from concurrent.futures import ThreadPoolExecutor

    lake = LakeStore(root=str(tmp_path / "lake"))
    writer = LedgerWriter(lake, "r", "f", "m")
    row = {"called_at": dt.datetime.now(dt.timezone.utc), "host": "h", "text_sha256": "0" * 64}

    def call(_: int) -> bool:
        call_id = writer(row)
        return call_id in set(lake.read("outbound_ledger", columns=["call_id"])["call_id"].to_list())

    with ThreadPoolExecutor(8) as pool:
        durable = list(pool.map(call, range(24)))
    assert all(durable)
    assert lake.read("outbound_ledger").height == 24 and lake.read("outbound_ledger")["call_id"].n_unique() == 24
    assert writer.commits < 24


def test_model_strategy_uses_json_entities_and_fails_closed(tmp_path, server):
    lake = LakeStore(root=str(tmp_path / "lake"))
    privacy = {"anonymise": "model", "model": {"base_url": server.base_url, "model": "ner"}}
    client = openai.OpenAI(base_url=server.base_url, api_key="x" * 12, max_retries=0)
    before = len(server.received)
    with outbound_session(lake, run_id="r", fingerprint="f", model="m", privacy=privacy):
        outbound.chat_completion(client, outbound.CallContext("judge"), model="j",
                                 messages=[{"role": "user", "content": "Zorba Klitschko paid."}])
    ner_call, main_call = (json.loads(b) for b in server.received[before:])
    assert ner_call["temperature"] == 0 and main_call["messages"][0]["content"] == "[PERSON_1] paid."
    assert lake.read("outbound_ledger").sort("called_at")["purpose"].to_list() == ["anonymiser:model", "judge"]  # read order is not call order
    # an unparseable NER reply: the call is not made at all
    bad = RecordingServer(ner_reply="Sure! Zorba is a person.").start()
    try:
        privacy["model"]["base_url"] = bad.base_url
        client_bad = openai.OpenAI(base_url=bad.base_url, api_key="x" * 12, max_retries=0)
        with outbound_session(lake, run_id="r", fingerprint="f", model="m", privacy=privacy):
            with pytest.raises(AnonymisationError, match="not JSON"):
                outbound.chat_completion(client_bad, outbound.CallContext("judge"), model="j",
                                         messages=[{"role": "user", "content": "Zorba Klitschko paid."}])
        assert len(bad.received) == 1  # only the NER call; the raw text never went to the judge
    finally:
        bad.stop()
    with pytest.raises(AnonymisationError, match="local endpoint"):
        ModelNER(base_url="https://api.example.com/v1", model="m")


# ------------------------------------------------------------------ keys
def test_key_is_scrubbed_from_client_errors(server):
    key = "sk-sentinel-scrub-9f8e7d6c5b4a"
    secured = RecordingServer(api_key="another-key-entirely").start()
    try:
        client = openai.OpenAI(base_url=secured.base_url, api_key=key, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as info:
            outbound.chat_completion(client, outbound.CallContext("probe"), model="m", messages=[{"role": "user", "content": f"echo {key}"}])
        assert key not in str(info.value)
    finally:
        secured.stop()
    register_secret(key)
    assert redact(f"Bearer {key} failed") == "Bearer [REDACTED] failed"


# ------------------------------------------------------------------ offline mode
def test_offline_guard_refuses_before_any_socket(monkeypatch, no_sockets):
    monkeypatch.setenv("FACETLAKE_OFFLINE", "1")
    client = openai.OpenAI(base_url="https://api.example.com/v1", api_key="k" * 10, max_retries=0)
    with pytest.raises(outbound.OfflineModeError, match="api.example.com"):
        outbound.chat_completion(client, outbound.CallContext("g_eval"), model="m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(outbound.OfflineModeError, match="'g_eval' is external"):
        outbound.refuse_if_offline("metric", "g_eval", "external")
    outbound.refuse_if_offline("metric", "bleu", "local")  # local is fine
    assert no_sockets == []


def test_write_ahead_intents_of_a_killed_writer_are_folded_by_the_next_reader(tmp_path):
    """Issue 30: on a local lake an intent is durable once fsync'd to the writer's
    write-ahead file. A live writer's file (held by its flock) is left alone by other
    processes; once the writer is killed, the next read of the ledger folds its intents in
    (every call it could have sent) and removes the file; reading again adds nothing."""
    import signal
    import subprocess
    import sys
    import time

    lake_dir = tmp_path / "lake"
    script = (
        "import datetime as dt, sys, time\n"
        "from resources.lake.resource import LakeStore\n"
        "from resources.privacy.session import LedgerWriter\n"
        f"w = LedgerWriter(LakeStore(root={str(lake_dir)!r}), 'killed', 'f', 'm')\n"
        "for i in range(3):\n"
        "    w({'called_at': dt.datetime.now(dt.timezone.utc), 'host': 'h', 'text_sha256': str(i) * 64, 'sample_id': f's{i}'})\n"
        "print('written', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert proc.stdout.readline().strip() == "written"
        lake = LakeStore(root=str(lake_dir))
        wal = list((lake_dir / "_wal" / "outbound_ledger").glob("*.jsonl"))
        assert len(wal) == 1 and len(wal[0].read_text().splitlines()) == 3
        assert lake.read("outbound_ledger").height == 0  # a live writer's intents are its own to fold
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.1)
    ledger = lake.read("outbound_ledger")
    assert sorted(ledger["sample_id"].to_list()) == ["s0", "s1", "s2"] and set(ledger["status"]) == {"intent"}
    assert ledger["called_at"].dtype == pl.Datetime("us", "UTC") and set(ledger["run_id"]) == {"killed"}
    assert not list((lake_dir / "_wal" / "outbound_ledger").glob("*.jsonl"))
    assert lake.read("outbound_ledger").height == 3
