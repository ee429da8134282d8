"""Outbound-ledger intents left open by a crashed run are settled by the partition's next
run (issue 26, fault 6: 302 of 686 rows stayed ``intent`` although their outputs were stored).

The crash is simulated in a real lake: a run's intents committed by the real durable
ledger writer, then the outputs that run stored before it was killed (some samples), and
no completion. The next ``run_evaluation`` (what ``facetlake run`` calls) settles them."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from conftest import small_spec

DEAD = "dead-run-0000"
MODEL = "sfres-system"


def _intent(sample_id: str | None, purpose: str = "generation") -> dict:
    return {"called_at": dt.datetime.now(dt.timezone.utc), "host": "api.example", "model": "gpt-x", "purpose": purpose,
            "sample_id": sample_id, "text_sha256": "ab" * 32, "n_chars": 10, "entity_counts": {}}


def _stored(fp: str, sample_id: str, ok: bool) -> dict:
    return {"model": MODEL, "fingerprint": fp, "dataset": "sfres", "sample_id": sample_id, "output": "an output" if ok else None,
            "status": "ok" if ok else "error", "error": None if ok else "HTTP 400 from the server", "backend": "api",
            "prompt": "p", "latency_s": 0.1, "tokens_in": 3, "tokens_out": 2 if ok else None, "run_id": DEAD,
            "created_at": dt.datetime(2026, 11, 30, 12, 0, int(sample_id[-1:]) if sample_id[-1:].isdigit() else 0, tzinfo=dt.timezone.utc)}


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_next_run_settles_intents_of_a_crashed_run_from_its_stored_outputs(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.evidence.export import export_evidence
    from resources.evidence.verify import verify_evidence
    from resources.lake.resource import LakeStore
    from resources.privacy.ledger import DurableLedger

    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = small_spec("ledger-reconcile", limit=12, metrics=("exact_match",))
    resolved = run_evaluation(spec, lake, instance)
    fp, ids = resolved.fingerprint, [s.sample_id for s in resolved.samples]

    # a finished run whose call completed normally: left as it is
    done = DurableLedger(lake, "finished-run", fp, MODEL)
    done.complete(done(_intent(ids[11])))
    done.flush()
    # the crashed run: 10 generation intents, a judge call and the model anonymiser's call, none completed
    dead = DurableLedger(lake, DEAD, fp, MODEL)
    calls = {sid: dead(_intent(sid)) for sid in ids[:10]}
    judge = dead(_intent(ids[0], purpose="faithfulness_judge"))
    anonymiser = dead(_intent(None, purpose="anonymiser:model"))
    # another partition's open intent (a run of another model, maybe still in flight)
    elsewhere = DurableLedger(lake, DEAD, fp, "other-model")(_intent(ids[0]))
    # what the crashed run stored before the kill: 6 outputs and 1 error reply; samples 7-9 nothing
    lake.append("generations", [_stored(fp, sid, ok=True) for sid in ids[:6]] + [_stored(fp, ids[6], ok=False)])
    assert lake.read("outbound_ledger").filter(pl.col("status") == "intent").height == 13

    run_evaluation(spec, lake, instance)  # the next run of the evaluation

    ledger = lake.read("outbound_ledger")
    status = dict(ledger.select("call_id", "status").iter_rows())
    assert [status[calls[sid]] for sid in ids[:10]] == ["completed"] * 6 + ["failed"] + ["abandoned"] * 3
    assert status[judge] == status[anonymiser] == status[elsewhere] == "intent"  # not settled from generations
    counts = dict(ledger.group_by("status").len().iter_rows())
    assert counts == {"completed": 7, "failed": 1, "abandoned": 3, "intent": 3}
    assert ledger.height == 14  # nothing deleted, nothing added: abandoned rows stay as evidence
    when = dict(ledger.select("call_id", "completed_at").iter_rows())
    assert [when[calls[sid]] for sid in ids[:7]] == [_stored(fp, sid, True)["created_at"] for sid in ids[:7]]  # when stored
    assert all(when[calls[sid]] is not None for sid in ids[7:10])

    # idempotent: a third run changes nothing
    before = lake.version("outbound_ledger")
    run_evaluation(spec, lake, instance)
    assert lake.version("outbound_ledger") == before

    # the audit trail still verifies: export the evidence and check it against the lake
    out = tmp_path / "evidence"
    export_evidence(lake, fp, out, "json")
    report = verify_evidence(out, lake=lake, allow_unsigned=True)
    assert report.ok, report.problems
    exported = [json.loads(line) for line in (out / "outbound_ledger.jsonl").read_text().splitlines()]
    assert sorted(r["status"] for r in exported if r["purpose"] == "generation" and r["model"] == MODEL) == (
        ["abandoned"] * 3 + ["completed"] * 7 + ["failed"])
