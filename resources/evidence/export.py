"""Portable evidence export and its verification (LLM-FACETS' audit artifact).

:func:`export_evidence` writes one folder per fingerprint:

===========================  ===============================================================
``evaluation.json``          fingerprint, the inputs it is computed from, the spec, dataset
                             name / content hash / size
``models.json``              each model's spec string and identity (checkpoint, endpoint, file hash)
``metrics.json``             each metric signature with direction, dimension, locality, parameters
``scores.(jsonl|csv)``       per-sample scores with status, value, signature and detail
``judge_details.(jsonl|csv)`` judged rows only: reasoning chains, per-claim verdicts, jurors' votes
``summary.(jsonl|csv)``      mean / n scored / n total per model x metric
``runs.(jsonl|csv)``         provenance rows (mode online/offline, table versions, packages)
``outbound_ledger.(jsonl|csv)`` every call that left the process (hashes, never text or keys)
``environment.json``         package versions at export time
``samples.jsonl``            (``--include-samples``) the samples as the lake holds them, so the dataset
                             hash can be rechecked (not when the evaluation anonymises them)
``MANIFEST.json``            SHA-256 and size of every file above, the signing key's id
``MANIFEST.json.sig``        Ed25519 signature over the bytes of MANIFEST.json (when signed)
===========================  ===============================================================

Authenticity: the manifest is signed with an Ed25519 private key (RFC 8032, through the
``cryptography`` package) that comes from the environment or a file, never from the lake
(:func:`load_signing_key`; ``facetlake keygen`` makes a pair). Each export also appends
the manifest's SHA-256 to the lake's ``evidence_exports`` table, so the lake keeps an
anchor of what it exported.

:func:`verify_evidence` recomputes every file's SHA-256, refuses files the manifest does
not list, recomputes the fingerprint from ``evaluation.json``'s inputs
(:func:`resources.catalog.spec.fingerprint_of`), checks every score row belongs to it,
checks the summary against the score rows and every model of ``models.json`` against
them, with samples recomputes the dataset content hash, and checks the signature against
a public key given from outside the folder (a key shipped inside it proves nothing) and,
with a lake, that the manifest hash is anchored there. Hashes alone cannot catch a
consistent rewrite (edit a score, recompute every hash); the signature and the anchor do.
CSV files are UTF-8 with a header row (they open in a spreadsheet); nested values are JSON text.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import hashlib
import json
import platform
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from resources.catalog import evaluation_row, pairs_of
from resources.evidence.keys import (
    FORMAT,
    MANIFEST,
    SIGNATURE,
    SIGNATURE_FORMAT,
    EvidenceError,
    public_key_id,
    sha256_file,
)
from resources.evidence.verify import summary_mismatches

JUDGE_DETAIL_KEYS = ("reasoning", "claims", "verdicts", "votes", "jurors", "judges", "raw_reply", "raw", "steps", "sentences")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return value


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def _write_rows(path_stem: Path, rows: list[dict[str, Any]], columns: list[str], fmt: str) -> Path:
    if fmt == "csv":
        path = path_stem.with_suffix(".csv")
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: (json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, (list, dict)) else _jsonable(v))
                                 for k, v in row.items()})
        return path
    path = path_stem.with_suffix(".jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({k: _jsonable(row.get(k)) for k in columns}, ensure_ascii=False, sort_keys=True, default=str) + "\n")
    return path


def _frame_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dicts()


def _parse(detail: str | None) -> Any:
    try:
        return json.loads(detail) if detail else {}
    except ValueError:
        return {"unparsed": detail}


def _refuse_stored_secrets(lake: Any, name: str, spec: Any) -> None:
    """Refuse to export a spec (or model spec) that looks like it holds a key: a lake written
    before facetlake refused secrets (issue 26) may hold one, and an export is shared."""
    from metric_ops.secrets import find_secrets, secret_message
    from resources.catalog import current_models

    models = {m: r["spec"] for m, r in current_models(lake, name).items()}
    findings = find_secrets(spec) + find_secrets({"models": models})
    if findings:
        raise EvidenceError(secret_message(
            findings, f"evaluation {name} (stored before facetlake refused keys)",
            "re-register the evaluation from a spec without it, the key in an environment variable named by "
            "runtime.api_key_env (`facetlake register SPEC.yaml`), then export again; rotate the key"))


#: the tables whose Delta versions the manifest records (``versions.tables``)
VERSIONED_TABLES = ("evaluations", "samples", "scores", "summary", "runs", "outbound_ledger", "reviews")


def export_evidence(
    lake: Any, fingerprint: str, out: str | Path, fmt: str = "json", include_samples: bool = False, signing_key: Any | None = None,
) -> dict[str, Any]:
    """Write the evidence folder for ``fingerprint`` (64 hex or a unique prefix) into ``out``.

    ``fmt``: ``json`` (tables as JSON lines) or ``csv``. ``signing_key``: an Ed25519
    private key (:func:`load_signing_key`); with it ``MANIFEST.json.sig`` holds the
    signature over the manifest's bytes. The manifest's SHA-256 is appended to the lake's
    ``evidence_exports`` table (the anchor). Returns the manifest with
    ``manifest_sha256`` added. Raises :class:`EvidenceError` when ``out`` exists and is
    not empty, nothing is scored, or the stored spec holds something that looks like a key
    (nothing is written), and :class:`resources.catalog.CatalogError` for an unknown
    fingerprint.
    """
    from resources.lake.sample_codec import package_versions

    if fmt not in ("json", "csv"):
        raise EvidenceError(f"format {fmt!r} is not supported; use json or csv")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise EvidenceError(f"{out} exists and is not empty; give a new folder for the evidence export")
    ev = evaluation_row(lake, fingerprint)
    if not lake.exists("scores") or lake.read("scores", where={"fingerprint": ev["fingerprint"]}, columns=["metric"]).height == 0:
        raise EvidenceError(f"no scores stored for fingerprint {ev['fingerprint'][:12]}; run the evaluation before exporting")
    fp = ev["fingerprint"]
    spec = json.loads(ev["spec"])
    _refuse_stored_secrets(lake, ev["name"], spec)
    # the Delta versions this export reads (issue 31): verify --lake re-reads them from the lake's history
    from resources.catalog.versions import samples_versions

    versions = {"dataset_content_sha256": ev["dataset_hash"], "samples_version": samples_versions(lake, fp).get(fp),
                "tables": {t: lake.version(t) for t in VERSIONED_TABLES if lake.exists(t)}}
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []

    evaluation = {"fingerprint": fp, "name": ev["name"], "dataset": ev["dataset"], "dataset_content_sha256": ev["dataset_hash"],
                  "n_samples": ev["n_samples"], "registered_at": _jsonable(ev["registered_at"]),
                  "fingerprint_inputs": json.loads(ev["fingerprint_inputs"]), "spec": spec}
    _write_json(out / "evaluation.json", evaluation)
    files.append(out / "evaluation.json")

    runs = lake.read("runs").filter(pl.col("fingerprint") == fp).sort("started_at") if lake.exists("runs") else pl.DataFrame()
    models = []
    # every model of this evaluation fingerprint (spec and inbox) and every model with score rows here
    catalog_models = lake.read("evaluation_models", where={"evaluation": ev["name"]}) if lake.exists("evaluation_models") else pl.DataFrame()
    pair_models = sorted({p["model"] for p in pairs_of(lake, fp, ("current", "history", "archived", "retired"))} | set(lake.read("scores", where={"fingerprint": fp}, columns=["model"])["model"].to_list())) or sorted(spec.get("models") or {})
    for model in pair_models:
        identity, model_spec, version = None, (spec.get("models") or {}).get(model), None
        if catalog_models.height:
            mine = catalog_models.filter(pl.col("model") == model).sort("version")
            if mine.height:
                last = mine.row(-1, named=True)
                model_spec, version = last["spec"], last["version"]
        if runs.height:
            gen = runs.filter((pl.col("asset") == "generations") & (pl.col("model") == model))
            if gen.height:
                prov = json.loads(gen.row(-1, named=True)["provenance"] or "{}")
                identity = prov.get("model_identity")
                model_spec = prov.get("model_spec") or model_spec  # what actually produced the stored outputs
        models.append({"model": model, "spec": model_spec, "version": version, "identity": identity})
    _write_json(out / "models.json", models)
    files.append(out / "models.json")

    scores = lake.read("scores", where={"fingerprint": fp}) if lake.exists("scores") else pl.DataFrame()
    if scores.height == 0:
        raise EvidenceError(f"no scores stored for fingerprint {fp[:12]}; run the evaluation before exporting")
    scores = scores.sort("model", "metric", "sample_id")
    per_model = dict(scores.group_by("model").len().iter_rows())
    for entry in models:  # verify counts each model's rows: a deleted model shows
        entry["n_score_rows"] = int(per_model.get(entry["model"], 0))
    _write_json(out / "models.json", models)
    files.append(out / "models.json")
    params = spec.get("metric_params") or {}
    metrics = []
    for row in (scores.select("metric", "signature", "direction", "dimension", "locality", "params").unique()
                .sort("metric", "signature").iter_rows(named=True)):
        base = json.loads(row.pop("params"))["metric"]  # the registry name (metric_ops/identity.py)
        metrics.append({**row, "parameters": params.get(base) or params.get(row["metric"]) or {}})
    _write_json(out / "metrics.json", metrics)
    files.append(out / "metrics.json")

    score_cols = ["fingerprint", "model", "dataset", "sample_id", "metric", "value", "status", "direction", "dimension",
                  "locality", "signature", "detail", "run_id", "created_at"]
    files.append(_write_rows(out / "scores", _frame_rows(scores), score_cols, fmt))

    judged = []
    for row in scores.iter_rows(named=True):
        detail = _parse(row["detail"])
        if isinstance(detail, Mapping) and any(k in detail for k in JUDGE_DETAIL_KEYS):
            judged.append({"model": row["model"], "sample_id": row["sample_id"], "metric": row["metric"], "status": row["status"],
                           "value": row["value"], "signature": row["signature"], "detail": detail})
    files.append(_write_rows(out / "judge_details", judged, ["model", "sample_id", "metric", "status", "value", "signature", "detail"], fmt))

    summary = lake.read("summary").filter(pl.col("fingerprint") == fp) if lake.exists("summary") else pl.DataFrame()
    summary_cols = ["fingerprint", "dataset", "model", "metric", "direction", "mean", "n_scored", "n_unscored", "n_error", "n_total", "run_id"]
    files.append(_write_rows(out / "summary", _frame_rows(summary), summary_cols, fmt))

    run_cols = ["run_id", "asset", "model", "fingerprint", "dataset", "table_name", "table_version", "rows", "started_at",
                "finished_at", "mode", "provenance"]
    files.append(_write_rows(out / "runs", _frame_rows(runs), run_cols, fmt))

    ledger = lake.read("outbound_ledger").filter(pl.col("fingerprint") == fp).sort("called_at") if lake.exists("outbound_ledger") else pl.DataFrame()
    from resources.lake.schemas import SCHEMAS

    files.append(_write_rows(out / "outbound_ledger", _frame_rows(ledger), SCHEMAS["outbound_ledger"].names, fmt))
    # human reviews with their reviewer ids (issue 29): what the human:<rubric> score rows were derived from
    reviews = lake.read("reviews", where={"fingerprint": fp}).sort("created_at", "review_id") if lake.exists("reviews") else pl.DataFrame()
    files.append(_write_rows(out / "reviews", _frame_rows(reviews), SCHEMAS["reviews"].names, fmt))

    _write_json(out / "environment.json", {"packages": package_versions(), "platform": platform.platform(),
                                           "exported_at": dt.datetime.now(dt.timezone.utc).isoformat()})
    files.append(out / "environment.json")

    samples_kind = None
    if include_samples:
        from resources.lake.sample_codec import samples_from_frame
        from resources.datasets import content_hash, sample_to_record

        samples = samples_from_frame(lake.read("samples", where={"fingerprint": fp}))
        # the samples table holds anonymised text when the evaluation anonymises (issue 16):
        # then the dataset hash cannot be rechecked from it, and the manifest says so
        samples_kind = "raw" if content_hash(samples) == ev["dataset_hash"] else "anonymised"
        path = out / "samples.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(sample_to_record(s), ensure_ascii=False, sort_keys=True, default=str) + "\n")
        files.append(path)

    key_id = public_key_id(signing_key.public_key()) if signing_key is not None else None
    manifest = {"format": FORMAT, "fingerprint": fp, "table_format": fmt,
                "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
                # the summary matched the score rows at export time: verify may hold it to that
                "summary_matches_scores": not summary_mismatches(_frame_rows(summary), _frame_rows(scores)),
                "samples": samples_kind,
                "versions": versions,
                "signing": {"algorithm": "Ed25519", "public_key_sha256": key_id} if key_id else None,
                "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files}}
    _write_json(out / MANIFEST, manifest)
    manifest_bytes = (out / MANIFEST).read_bytes()
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    if signing_key is not None:
        from cryptography.hazmat.primitives import serialization

        raw_public = signing_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        _write_json(out / SIGNATURE, {
            "format": SIGNATURE_FORMAT, "algorithm": "Ed25519", "signed_file": MANIFEST, "manifest_sha256": digest,
            "public_key_sha256": key_id, "public_key": base64.b64encode(raw_public).decode(),
            "signature": base64.b64encode(signing_key.sign(manifest_bytes)).decode(),
        })
    lake.append("evidence_exports", [{
        "exported_at": dt.datetime.now(dt.timezone.utc), "fingerprint": fp, "evaluation": ev["name"],
        "manifest_sha256": digest, "public_key_sha256": key_id, "signed": key_id is not None, "table_format": fmt,
        "n_files": len(files), "folder": str(out.resolve()),
    }])
    return {**manifest, "manifest_sha256": digest}
