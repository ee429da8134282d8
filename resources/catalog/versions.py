"""What each fingerprint of an evaluation rests on (issue 31, ``facetlake evaluations show``
and the ``reads`` record of every comparisons row): the dataset content hash and the
``samples`` table version that stored it, the adapter and its prompt template hashes, the
generation settings and the version of every metric (a judged metric's version changes with
its judge prompt).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import polars as pl

from resources.catalog.reads import evaluation_row
from resources.catalog.spec import dataset_pin
from resources.lake.resource import LakeStore


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


def metric_versions(metrics: Any) -> dict[str, str]:
    """``{metric: version}`` for the registered metric names in ``metrics`` (unknown names,
    e.g. retired metrics, map to ``"unknown"``)."""
    from metric_ops.registry import REGISTRY

    out = {}
    for name in metrics or []:
        try:
            out[str(name)] = str(REGISTRY.get_class(REGISTRY.resolve(str(name))).version)
        except Exception:  # noqa: BLE001 - a retired or mistyped name is reported, not fatal
            out[str(name)] = "unknown"
    return out


def rests_on(row: Mapping[str, Any], samples_version: int | None = None) -> dict[str, Any]:
    """What one ``evaluations`` row's fingerprint rests on: ``dataset_sha256``,
    ``samples_version`` (given), ``adapter`` kind, ``adapter_sha256`` (the whole adapter
    mapping), ``template_sha256`` (its prompt template(s)), ``generation`` settings,
    ``metric_versions`` and the dataset ``pin`` (None when unpinned)."""
    spec = json.loads(row.get("spec") or "{}")
    adapter = dict(spec.get("adapter") or {})
    templates = {k: v for k, v in adapter.items() if "template" in k or k in ("system", "instructions")}
    dataset = dict(spec.get("dataset") or {})
    return {
        "dataset_sha256": row.get("dataset_hash"),
        "samples_version": samples_version,
        "adapter": adapter.get("kind", "generation"),
        "adapter_sha256": _sha(adapter),
        "template_sha256": _sha(templates) if templates else None,
        "generation": dict(spec.get("generation") or {}),
        "metric_versions": metric_versions(spec.get("metrics")),
        "pin": dataset_pin(dataset),
    }


def samples_versions(lake: LakeStore, fingerprint: str | None = None) -> dict[str, int]:
    """fingerprint -> the ``samples`` table version its samples were last written at (``runs``);
    only ``fingerprint``'s entry when given (one evaluation's verdict reads only its own)."""
    if not lake.exists("runs"):
        return {}
    where = {"asset": "samples", **({"fingerprint": fingerprint} if fingerprint else {})}
    runs = lake.read("runs", where=where).filter(pl.col("table_version").is_not_null() & (pl.col("rows") > 0))
    out: dict[str, int] = {}
    for r in runs.sort("finished_at").iter_rows(named=True):
        out[r["fingerprint"]] = int(r["table_version"])  # the last write of that fingerprint's samples
    return out


def evaluation_versions(lake: LakeStore, evaluation: str) -> list[dict[str, Any]]:
    """One entry per fingerprint the evaluation has had (newest first): ``fingerprint``,
    ``status``, ``registered_at``, ``dataset`` and :func:`rests_on`'s fields. Raises
    :class:`resources.catalog.CatalogError` for an unknown evaluation."""
    name = evaluation_row(lake, evaluation)["name"]
    rows = lake.read("evaluations", where={"name": name}).sort("registered_at", descending=True).to_dicts()
    written = samples_versions(lake)
    return [{"fingerprint": r["fingerprint"], "status": r["status"], "registered_at": r["registered_at"], "dataset": r["dataset"],
             **rests_on(r, written.get(r["fingerprint"]))} for r in rows]


__all__ = ["evaluation_versions", "metric_versions", "rests_on", "samples_versions"]
