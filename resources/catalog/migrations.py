"""Explicit schema migrations of the lake (``facetlake migrate``).

Table schemas are contracts (resources/lake/schemas.py); a change is a migration, never a silent
merge. Two migrations exist:

``ledger-calls`` (issue 16) adds ``call_id``, ``status`` and ``completed_at`` to the
outbound ledger (:func:`migrate_ledger_calls`).

``catalog-identity`` (evaluation identity, issue 12). Lakes written before it hold an
``evaluations`` table keyed by fingerprint alone and a global ``models`` table (one spec
per model name, shared by every evaluation). The migration rewrites ``evaluations`` to
one row per (name, fingerprint) with its status (the latest fingerprint of each name is
current, earlier ones history), and derives ``evaluation_models`` (each evaluation's
models from its spec, plus inbox models that have generations under it) and ``pairs``
(every (fingerprint, model) with stored generations, and the current spec's models).
No row of samples, generations, scores or runs is touched; the old ``models`` table is
left in place (read-only history).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from metric_ops.errors import FacetlakeError
from resources.catalog.reads import dataset_source, evaluation_key, identity_sha256, pair_key, source_identity, utcnow
from resources.catalog.spec import slugify_model
from resources.lake.resource import LakeStore
from resources.lake.tables import to_arrow


class MigrationError(FacetlakeError, RuntimeError):
    """A migration cannot run (the message says why and what to do)."""


def pending(lake: LakeStore) -> list[str]:
    """Names of the migrations this lake still needs (empty when up to date)."""
    todo = []
    if lake.exists("evaluations") and "status" not in lake.delta("evaluations").schema().to_arrow().names:
        todo.append("catalog-identity")
    if lake.exists("outbound_ledger") and "call_id" not in lake.delta("outbound_ledger").schema().to_arrow().names:
        todo.append("ledger-calls")
    return todo


def migrate_ledger_calls(lake: LakeStore) -> dict[str, int]:
    """The ``ledger-calls`` migration (issue 16): give each ``outbound_ledger`` row written
    before durable intents a ``call_id`` (a new random id), ``status = 'completed'`` and
    ``completed_at = called_at`` (those rows were written after their calls returned).
    Idempotent."""
    import uuid

    if "ledger-calls" not in pending(lake):
        return {}
    old = pl.from_arrow(lake.delta("outbound_ledger").to_pyarrow_table())
    rows = [{**r, "call_id": uuid.uuid4().hex, "status": "completed", "completed_at": r["called_at"]} for r in old.to_dicts()]
    _overwrite(lake, "outbound_ledger", rows)
    return {"outbound_ledger": len(rows)}


def _overwrite(lake: LakeStore, table: str, rows: list[dict[str, Any]]) -> None:
    from deltalake import write_deltalake

    write_deltalake(lake.uri(table), to_arrow(table, rows), mode="overwrite", schema_mode="overwrite",
                    storage_options=lake._options())


def migrate_catalog_identity(lake: LakeStore) -> dict[str, int]:
    """Run the ``catalog-identity`` migration (see the module docstring); returns row counts
    written per table. Idempotent: a lake already migrated is left as it is."""
    if "catalog-identity" not in pending(lake):
        return migrate_ledger_calls(lake)
    old = pl.from_arrow(lake.delta("evaluations").to_pyarrow_table())
    global_models = pl.from_arrow(lake.delta("models").to_pyarrow_table()) if lake.exists("models") else pl.DataFrame()
    stored = (lake.read("generations", columns=["model", "fingerprint"]).unique() if lake.exists("generations")
              else pl.DataFrame(schema={"model": pl.String, "fingerprint": pl.String}))
    now = utcnow()
    evaluations, models, pairs = [], [], []
    for name, group in old.sort("registered_at").group_by("name", maintain_order=True):
        name = slugify_model(str(name[0]))
        rows = group.to_dicts()
        current_fp = rows[-1]["fingerprint"]
        for r in rows:
            spec = json.loads(r["spec"])
            is_current = r["fingerprint"] == current_fp
            evaluations.append({
                "name": name, "fingerprint": r["fingerprint"], "partition_key": evaluation_key(name, r["fingerprint"]),
                "status": "current" if is_current else "history", "archived": False, "dataset": r["dataset"],
                "dataset_source": dataset_source(spec.get("dataset") or {}), "dataset_hash": r["dataset_hash"],
                "n_samples": r["n_samples"], "spec": r["spec"], "fingerprint_inputs": r["fingerprint_inputs"],
                "schedule": spec.get("schedule"), "registered_at": r["registered_at"], "superseded_at": None if is_current else now,
            })
            with_outputs = set(stored.filter(pl.col("fingerprint") == r["fingerprint"])["model"].to_list())
            names = sorted(with_outputs | (set(spec.get("models") or {}) if is_current else set()))
            for model in names:
                pairs.append({"evaluation": name, "fingerprint": r["fingerprint"], "model": model,
                              "partition_key": pair_key(name, r["fingerprint"], model),
                              "status": "current" if is_current else "history", "registered_at": r["registered_at"]})
            if is_current:
                sources = dict(spec.get("models") or {})
                for model in names:
                    source = "spec"
                    if model not in sources:
                        hits = global_models.filter(pl.col("model") == model) if global_models.height else global_models
                        if hits.height == 0:
                            continue
                        sources[model], source = hits.sort("registered_at")["spec"][-1], "inbox"
                    try:
                        identity = source_identity(sources[model])
                    except Exception:  # noqa: BLE001 - a malformed legacy spec keeps its text, without identity
                        identity = {}
                    models.append({"evaluation": name, "model": model, "version": 1, "spec": sources[model],
                                   "identity": json.dumps(identity, sort_keys=True, separators=(",", ":")),
                                   "identity_sha256": identity_sha256(sources[model], identity), "source": source,
                                   "active": True, "registered_at": now})
    duplicates = pl.DataFrame(evaluations).group_by("fingerprint").len().filter(pl.col("len") > 1)
    if duplicates.height:
        raise MigrationError(f"fingerprints {duplicates['fingerprint'].to_list()[:3]} appear under several names; "
                             "fix the evaluations table by hand before migrating")
    _overwrite(lake, "evaluations", evaluations)
    _overwrite(lake, "evaluation_models", models)
    _overwrite(lake, "pairs", pairs)
    return {"evaluations": len(evaluations), "evaluation_models": len(models), "pairs": len(pairs), **migrate_ledger_calls(lake)}


__all__ = ["MigrationError", "migrate_catalog_identity", "migrate_ledger_calls", "pending"]
