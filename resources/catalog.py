"""The evaluation catalog: which fingerprints and models exist, stored as Delta tables.

``evaluations`` holds one row per fingerprint (the spec, the dataset hash, the inputs the
fingerprint was computed from); ``models`` one row per model partition key (its spec
string). The assets look a partition's configuration up here, so a partition
materialised from the Dagster UI needs no run config.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import polars as pl

from resources.evaluation import EvaluationSpec, ResolvedEvaluation, canonical_json
from resources.lake import LakeStore


class CatalogError(LookupError):
    """A fingerprint or model is not registered."""


def utcnow() -> dt.datetime:
    """Timezone-aware now (UTC)."""
    return dt.datetime.now(dt.timezone.utc)


def register_evaluation(lake: LakeStore, resolved: ResolvedEvaluation) -> None:
    """Record the evaluation's fingerprint row and its models (idempotent upserts)."""
    spec = resolved.spec
    lake.replace(
        "evaluations",
        [
            {
                "fingerprint": resolved.fingerprint,
                "name": spec.name,
                "dataset": resolved.dataset_name,
                "dataset_hash": resolved.dataset_hash,
                "n_samples": len(resolved.samples),
                "spec": canonical_json(spec.to_mapping()),
                "fingerprint_inputs": canonical_json(resolved.fingerprint_inputs),
                "registered_at": utcnow(),
            }
        ],
        {"fingerprint": resolved.fingerprint},
    )
    for model, model_spec in spec.models.items():
        register_model(lake, model, model_spec)


def register_model(lake: LakeStore, model: str, spec: str) -> None:
    """Record (or update) the spec string of model partition ``model``."""
    lake.replace("models", [{"model": model, "spec": spec, "registered_at": utcnow()}], {"model": model})


def evaluation_row(lake: LakeStore, fingerprint: str) -> dict[str, Any]:
    """The evaluations row for ``fingerprint`` (full 64 hex or a unique prefix)."""
    frame = lake.read("evaluations")
    hits = frame.filter(pl.col("fingerprint").str.starts_with(fingerprint))
    if hits.height == 0:
        known = ", ".join(f"{r['name']}={r['fingerprint'][:12]}" for r in frame.iter_rows(named=True)) or "none"
        raise CatalogError(f"fingerprint {fingerprint!r} is not registered (registered: {known}); run `facetlake run CONFIG` first")
    if hits.height > 1:
        raise CatalogError(f"fingerprint prefix {fingerprint!r} is ambiguous; give more characters")
    return hits.row(0, named=True)


def evaluation_spec(lake: LakeStore, fingerprint: str) -> EvaluationSpec:
    """The spec registered under ``fingerprint``."""
    return EvaluationSpec.from_mapping(json.loads(evaluation_row(lake, fingerprint)["spec"]))


def find_evaluation(lake: LakeStore, name: str) -> dict[str, Any] | None:
    """Most recently registered evaluations row named ``name`` (None if none)."""
    frame = lake.read("evaluations").filter(pl.col("name") == name).sort("registered_at", descending=True)
    return frame.row(0, named=True) if frame.height else None


def model_spec(lake: LakeStore, model: str, fingerprint: str | None = None) -> str:
    """The spec string of model partition ``model``: the models table, else the evaluation's."""
    frame = lake.read("models", where={"model": model})
    if frame.height:
        return frame.item(0, "spec")
    if fingerprint:
        spec = evaluation_spec(lake, fingerprint)
        if model in spec.models:
            return spec.models[model]
    raise CatalogError(f"model {model!r} is not registered; add it under models: in the evaluation config")
