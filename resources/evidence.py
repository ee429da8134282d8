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
(:func:`resources.evaluation.fingerprint_of`), checks every score row belongs to it,
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
import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from resources.catalog import evaluation_row, pairs_of
from resources.evaluation import fingerprint_of
from metric_ops.errors import FacetlakeError

FORMAT = "facetlake-evidence/1"
MANIFEST = "MANIFEST.json"
SIGNATURE = "MANIFEST.json.sig"
SIGNATURE_FORMAT = "facetlake-evidence-signature/1"
KEY_ENV = "FACETLAKE_EVIDENCE_KEY"  # the private key itself (PEM text)
KEY_FILE_ENV = "FACETLAKE_EVIDENCE_KEY_FILE"  # a file holding it (PEM)
PASSPHRASE_ENV = "FACETLAKE_EVIDENCE_KEY_PASSPHRASE"  # for an encrypted PEM
PUBLIC_KEY_ENV = "FACETLAKE_EVIDENCE_PUBLIC_KEY"  # the public key (PEM text)
PUBLIC_KEY_FILE_ENV = "FACETLAKE_EVIDENCE_PUBLIC_KEY_FILE"
JUDGE_DETAIL_KEYS = ("reasoning", "claims", "verdicts", "votes", "jurors", "judges", "raw_reply", "raw", "steps", "sentences")


class EvidenceError(FacetlakeError, RuntimeError):
    """The export cannot be written (unknown fingerprint, existing non-empty folder, a
    signing key that cannot be read or lies inside the lake, ...)."""


# --------------------------------------------------------------------------- keys
def public_key_id(public_key: Any) -> str:
    """SHA-256 (hex) of an Ed25519 public key's 32 raw bytes: the key's id."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_keypair(folder: str | Path, name: str = "facetlake-evidence", passphrase: str | None = None) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair: ``NAME.key`` (PKCS#8 PEM, mode 0600, encrypted when
    ``passphrase``) and ``NAME.pub`` (SubjectPublicKeyInfo PEM) in ``folder``.

    Returns (private path, public path, key id). Raises :class:`EvidenceError` when either
    file exists (a key is never overwritten)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    private_path, public_path = folder / f"{name}.key", folder / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise EvidenceError(f"{path} exists; a key is never overwritten (move it away or choose another --name)")
    key = Ed25519PrivateKey.generate()
    encryption = (serialization.BestAvailableEncryption(passphrase.encode()) if passphrase else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public_path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path, public_key_id(key.public_key())


def _inside(path: Path, root: str | None) -> bool:
    if not root or "://" in root:
        return False
    try:
        return path.resolve().is_relative_to(Path(root).expanduser().resolve())
    except OSError:
        return False


def load_signing_key(key_file: str | Path | None = None, lake_root: str | None = None) -> Any | None:
    """The Ed25519 private key for signing: ``key_file``, else ``$FACETLAKE_EVIDENCE_KEY``
    (PEM text), else the file named by ``$FACETLAKE_EVIDENCE_KEY_FILE``; None when none is
    set. An encrypted PEM takes its passphrase from ``$FACETLAKE_EVIDENCE_KEY_PASSPHRASE``.

    Raises :class:`EvidenceError` for a key file inside the lake (``lake_root``), an
    unreadable key, or a key that is not Ed25519."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    source, data = None, None
    path = Path(key_file) if key_file else (Path(os.environ[KEY_FILE_ENV]) if not os.environ.get(KEY_ENV) and os.environ.get(KEY_FILE_ENV) else None)
    if path is not None:
        path = path.expanduser()
        if _inside(path, lake_root):
            raise EvidenceError(f"the signing key {path} lies inside the lake {lake_root}; keep it outside the lake (anyone who can read the lake could sign)")
        try:
            data, source = path.read_bytes(), str(path)
        except OSError as exc:
            raise EvidenceError(f"cannot read the signing key {path} ({exc.strerror}); create one with `facetlake keygen`") from None
    elif os.environ.get(KEY_ENV):
        data, source = os.environ[KEY_ENV].encode(), f"${KEY_ENV}"
    if data is None:
        return None
    passphrase = os.environ.get(PASSPHRASE_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase.encode() if passphrase else None)
    except (ValueError, TypeError) as exc:
        hint = f" (set {PASSPHRASE_ENV} for an encrypted key)" if "encrypt" in str(exc).lower() or "password" in str(exc).lower() else ""
        raise EvidenceError(f"the signing key from {source} is not a readable PEM private key{hint}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise EvidenceError(f"the signing key from {source} is {type(key).__name__.replace('_', '')}, not Ed25519; create one with `facetlake keygen`")
    return key


def load_public_key(public_key: str | Path | None = None) -> Any | None:
    """The Ed25519 public key that verification trusts: the PEM file ``public_key``, else
    ``$FACETLAKE_EVIDENCE_PUBLIC_KEY`` (PEM text), else the file named by
    ``$FACETLAKE_EVIDENCE_PUBLIC_KEY_FILE``; None when none is set. Raises
    :class:`EvidenceError` for an unreadable or non-Ed25519 key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    source = None
    if public_key:
        source = Path(public_key).expanduser()
    elif os.environ.get(PUBLIC_KEY_ENV):
        data, label = os.environ[PUBLIC_KEY_ENV].encode(), f"${PUBLIC_KEY_ENV}"
    elif os.environ.get(PUBLIC_KEY_FILE_ENV):
        source = Path(os.environ[PUBLIC_KEY_FILE_ENV]).expanduser()
    else:
        return None
    if source is not None:
        try:
            data, label = source.read_bytes(), str(source)
        except OSError as exc:
            raise EvidenceError(f"cannot read the public key {source} ({exc.strerror})") from None
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise EvidenceError(f"the public key from {label} is not a PEM public key (the .pub file `facetlake keygen` wrote)") from None
    if not isinstance(key, Ed25519PublicKey):
        raise EvidenceError(f"the public key from {label} is not Ed25519")
    return key


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def export_evidence(
    lake: Any, fingerprint: str, out: str | Path, fmt: str = "json", include_samples: bool = False, signing_key: Any | None = None,
) -> dict[str, Any]:
    """Write the evidence folder for ``fingerprint`` (64 hex or a unique prefix) into ``out``.

    ``fmt``: ``json`` (tables as JSON lines) or ``csv``. ``signing_key``: an Ed25519
    private key (:func:`load_signing_key`); with it ``MANIFEST.json.sig`` holds the
    signature over the manifest's bytes. The manifest's SHA-256 is appended to the lake's
    ``evidence_exports`` table (the anchor). Returns the manifest with
    ``manifest_sha256`` added. Raises :class:`EvidenceError` when ``out`` exists and is
    not empty, or nothing is scored, and :class:`resources.catalog.CatalogError` for an
    unknown fingerprint.
    """
    from resources.sample_codec import package_versions

    if fmt not in ("json", "csv"):
        raise EvidenceError(f"format {fmt!r} is not supported; use json or csv")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise EvidenceError(f"{out} exists and is not empty; give a new folder for the evidence export")
    ev = evaluation_row(lake, fingerprint)
    if not lake.exists("scores") or lake.read("scores", where={"fingerprint": ev["fingerprint"]}, columns=["metric"]).height == 0:
        raise EvidenceError(f"no scores stored for fingerprint {ev['fingerprint'][:12]}; run the evaluation before exporting")
    out.mkdir(parents=True, exist_ok=True)
    fp = ev["fingerprint"]
    spec = json.loads(ev["spec"])
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
    for row in scores.select("metric", "signature", "direction", "dimension", "locality").unique().sort("metric", "signature").iter_rows(named=True):
        base = row["signature"].split("|", 1)[0]
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
    from resources.lake import SCHEMAS

    files.append(_write_rows(out / "outbound_ledger", _frame_rows(ledger), SCHEMAS["outbound_ledger"].names, fmt))

    _write_json(out / "environment.json", {"packages": package_versions(), "platform": platform.platform(),
                                           "exported_at": dt.datetime.now(dt.timezone.utc).isoformat()})
    files.append(out / "environment.json")

    samples_kind = None
    if include_samples:
        from resources.sample_codec import samples_from_frame
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


def summary_mismatches(summary: list[Mapping[str, Any]], scores: list[Mapping[str, Any]]) -> list[str]:
    """Where the summary rows disagree with the score rows they summarise (counts per
    status, and the mean of scored values within 1e-9 relative): one line each, at most 5.
    Values may be numbers or their text (CSV)."""

    def num(value: Any) -> float | None:
        if value in (None, "", "None", "null"):
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            return None

    counts: dict[tuple[str, str], dict[str, Any]] = {}
    for row in scores:
        entry = counts.setdefault((str(row.get("model")), str(row.get("metric"))), {"scored": 0, "unscored": 0, "error": 0, "total": 0, "sum": 0.0})
        entry["total"] += 1
        status = str(row.get("status"))
        if status in ("scored", "unscored", "error"):
            entry[status] += 1
        if status == "scored" and num(row.get("value")) is not None:
            entry["sum"] += num(row.get("value"))  # type: ignore[operator]
    problems = []
    seen = set()
    for row in summary:
        key = (str(row.get("model")), str(row.get("metric")))
        seen.add(key)
        entry = counts.get(key)
        if entry is None:
            problems.append(f"summary has {key[0]} x {key[1]} but scores hold no such rows")
            continue
        for column, have in (("n_total", entry["total"]), ("n_scored", entry["scored"]), ("n_unscored", entry["unscored"]), ("n_error", entry["error"])):
            want = num(row.get(column))
            if want is not None and int(want) != have:
                problems.append(f"summary {column} of {key[0]} x {key[1]} is {int(want)} but scores hold {have}")
        mean = num(row.get("mean"))
        if mean is not None and entry["scored"] and not math.isclose(mean, entry["sum"] / entry["scored"], rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"summary mean of {key[0]} x {key[1]} is {mean} but the scored rows average {entry['sum'] / entry['scored']}")
    for key in sorted(set(counts) - seen):
        problems.append(f"scores hold {key[0]} x {key[1]} but the summary has no row for it")
    return problems[:5]


@dataclass
class VerifyReport:
    """Result of :func:`verify_evidence`: ``ok`` and the list of problems found.

    ``signed``: a signature file is present; ``signature_ok``: it verified against the
    trusted public key (None when not checked); ``key_id``: the signing key's id;
    ``anchored``: the manifest hash is in the lake's ``evidence_exports`` (None without a lake).
    """

    folder: str
    ok: bool = True
    fingerprint: str | None = None
    recomputed_fingerprint: str | None = None
    manifest_sha256: str | None = None
    files_checked: int = 0
    signed: bool = False
    signature_ok: bool | None = None
    key_id: str | None = None
    anchored: bool | None = None
    problems: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.ok = False
        self.problems.append(message)


def _read_table(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _check_signature(report: VerifyReport, folder: Path, manifest: Mapping[str, Any], manifest_bytes: bytes,
                     public_key: Any | None, allow_unsigned: bool) -> None:
    from cryptography.exceptions import InvalidSignature

    declared = (manifest.get("signing") or {}).get("public_key_sha256") if isinstance(manifest.get("signing"), Mapping) else None
    sig_path = folder / SIGNATURE
    if not sig_path.is_file():
        if declared:
            report.fail(f"{MANIFEST} says it was signed (key {declared[:16]}...) but {SIGNATURE} is missing")
        elif not allow_unsigned:
            report.fail(f"the export is not signed, so its hashes prove nothing against a consistent rewrite; export it with a "
                        f"signing key (`facetlake keygen`, then {KEY_FILE_ENV}), or pass --allow-unsigned to check consistency only")
        return
    report.signed = True
    try:
        sig = json.loads(sig_path.read_text(encoding="utf-8"))
        signature = base64.b64decode(sig["signature"], validate=True)
        report.key_id = str(sig.get("public_key_sha256"))
    except (ValueError, KeyError, TypeError):
        report.fail(f"{SIGNATURE} is unreadable; it may have been edited")
        report.signature_ok = False
        return
    if declared != report.key_id:
        report.fail(f"{MANIFEST} names signing key {str(declared)[:16]}... but {SIGNATURE} names {report.key_id[:16]}...")
    if public_key is None:
        report.fail(f"the export is signed (key {report.key_id[:16]}...) but no public key was given to check it: pass "
                    f"--public-key FILE or set {PUBLIC_KEY_FILE_ENV} (a key inside the folder proves nothing)")
        return
    trusted = public_key_id(public_key)
    if trusted != report.key_id:
        report.signature_ok = False
        report.fail(f"signed by key {report.key_id[:16]}..., not by the trusted public key {trusted[:16]}...")
        return
    try:
        public_key.verify(signature, manifest_bytes)
        report.signature_ok = True
    except InvalidSignature:
        report.signature_ok = False
        report.fail(f"the Ed25519 signature does not match {MANIFEST}: the manifest was changed after it was signed")


def verify_evidence(folder: str | Path, public_key: Any | None = None, lake: Any | None = None, allow_unsigned: bool = False) -> VerifyReport:
    """Check an evidence folder (see the module docstring).

    ``public_key``: the trusted Ed25519 public key (:func:`load_public_key`); without it a
    signed export is not accepted. ``lake``: also check that the manifest's SHA-256 is
    anchored in its ``evidence_exports`` table. ``allow_unsigned``: accept an unsigned
    export (consistency checks only). Never raises for a bad folder: problems are listed.
    """
    from metric_ops.base import Sample
    from resources.datasets import content_hash

    folder = Path(folder)
    report = VerifyReport(str(folder))
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        report.fail(f"{MANIFEST} is missing: not a facetlake evidence folder")
        return report
    manifest_bytes = manifest_path.read_bytes()
    report.manifest_sha256 = hashlib.sha256(manifest_bytes).hexdigest()
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
        listed: dict[str, Mapping[str, Any]] = dict(manifest["files"])
    except (ValueError, KeyError, TypeError) as exc:
        report.fail(f"{MANIFEST} is unreadable ({type(exc).__name__}); it may have been edited")
        return report
    _check_signature(report, folder, manifest, manifest_bytes, public_key, allow_unsigned)
    if lake is not None:
        anchors = lake.read("evidence_exports", columns=["manifest_sha256", "fingerprint"]) if lake.exists("evidence_exports") else None
        report.anchored = anchors is not None and report.manifest_sha256 in set(anchors["manifest_sha256"].to_list())
        if not report.anchored:
            report.fail(f"{MANIFEST} (SHA-256 {report.manifest_sha256[:16]}...) is not anchored in the lake's evidence_exports: "
                        "this lake never exported this manifest")
    if manifest.get("format") != FORMAT:
        report.fail(f"{MANIFEST}: format {manifest.get('format')!r} is not {FORMAT}")
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name not in (MANIFEST, SIGNATURE)}
    for name in sorted(present - set(listed)):
        report.fail(f"{name} is not listed in the manifest (added after export)")
    for name, entry in sorted(listed.items()):
        path = folder / name
        if not path.is_file():
            report.fail(f"{name} is listed in the manifest but missing")
            continue
        report.files_checked += 1
        actual = sha256_file(path)
        if actual != entry.get("sha256"):
            report.fail(f"{name}: SHA-256 {actual[:16]}... does not match the manifest's {str(entry.get('sha256'))[:16]}... (modified)")
    try:
        evaluation = json.loads((folder / "evaluation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        report.fail(f"evaluation.json is unreadable ({type(exc).__name__})")
        return report
    report.fingerprint = evaluation.get("fingerprint")
    report.recomputed_fingerprint = fingerprint_of(evaluation.get("fingerprint_inputs") or {})
    if report.recomputed_fingerprint != report.fingerprint:
        report.fail(f"the fingerprint recomputed from fingerprint_inputs ({report.recomputed_fingerprint[:16]}...) "
                    f"differs from the recorded one ({str(report.fingerprint)[:16]}...)")
    if manifest.get("fingerprint") != report.fingerprint:
        report.fail("the manifest names another fingerprint than evaluation.json")
    inputs_hash = (evaluation.get("fingerprint_inputs") or {}).get("dataset_content_sha256")
    if inputs_hash != evaluation.get("dataset_content_sha256"):
        report.fail("dataset_content_sha256 differs between evaluation.json and its fingerprint inputs")
    score_rows: list[dict[str, Any]] = []
    for name in listed:
        if name.startswith("scores.") and (folder / name).is_file():
            score_rows = _read_table(folder / name)
            foreign = {r.get("fingerprint") for r in score_rows} - {report.fingerprint}
            if foreign:
                report.fail(f"{name} holds rows of another fingerprint: {sorted(map(str, foreign))[:3]}")
    _check_models_and_summary(report, folder, listed, manifest, score_rows)
    if "samples.jsonl" in listed and (folder / "samples.jsonl").is_file() and manifest.get("samples", "raw") == "raw":
        records = _read_table(folder / "samples.jsonl")
        samples = [Sample(sample_id=r["sample_id"], input=r["input"], references=tuple(r["references"]), context=tuple(r["context"]),
                          metadata=r["metadata"], ratings={k: (float("nan") if v is None else v) for k, v in r["ratings"].items()})
                   for r in records]
        digest = content_hash(samples)
        if digest != inputs_hash:
            report.fail(f"samples.jsonl hashes to {digest[:16]}..., not the dataset content hash {str(inputs_hash)[:16]}...")
    return report


def _check_models_and_summary(report: VerifyReport, folder: Path, listed: Mapping[str, Any], manifest: Mapping[str, Any],
                              score_rows: list[dict[str, Any]]) -> None:
    """Every model of models.json has score rows and every score row's model is listed;
    the summary agrees with the score rows when it did at export time."""
    try:
        entries = json.loads((folder / "models.json").read_text(encoding="utf-8"))
        expected = {str(m["model"]): m.get("n_score_rows") for m in entries}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report.fail(f"models.json is unreadable ({type(exc).__name__})")
        return
    have: dict[str, int] = {}
    for row in score_rows:
        have[str(row.get("model"))] = have.get(str(row.get("model")), 0) + 1
    for model, n in sorted(expected.items()):
        if n is not None and int(n) != have.get(model, 0):
            report.fail(f"model {model}: models.json records {n} score rows but the scores hold {have.get(model, 0)} (rows deleted or added?)")
    for model in sorted(set(have) - set(expected)):
        report.fail(f"the scores hold rows of model {model}, which models.json does not list")
    if manifest.get("summary_matches_scores"):
        summary_name = next((n for n in listed if n.startswith("summary.")), None)
        if summary_name and (folder / summary_name).is_file():
            for problem in summary_mismatches(_read_table(folder / summary_name), score_rows):
                report.fail(problem)


def manifest_files(folder: str | Path) -> Iterable[str]:
    """Names of the files a manifest lists."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))["files"].keys()
