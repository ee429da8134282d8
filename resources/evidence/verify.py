"""Verifying an evidence folder (:func:`verify_evidence`): file hashes against the
manifest, the recomputed fingerprint, score rows against the summary and models, the
dataset content hash from samples, the Ed25519 signature against a trusted public key, and
the manifest's anchor in the lake.

Part of :mod:`resources.evidence` (the package face exports these names).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from resources.catalog.spec import fingerprint_of
from resources.evidence.keys import (
    FORMAT, KEY_FILE_ENV, MANIFEST, PUBLIC_KEY_FILE_ENV, SIGNATURE, public_key_id, sha256_file,
)


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
    # "\n" only (JSON Lines): U+2028/U+0085 may stand raw inside a JSON string
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


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
    if lake is not None and manifest.get("versions"):
        _check_versions(report, lake, manifest["versions"], str(manifest.get("fingerprint")), folder, listed)
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


def _score_digest(rows: Iterable[Mapping[str, Any]]) -> str:
    keys = sorted((str(r.get("model")), str(r.get("metric")), str(r.get("sample_id")),
                   None if r.get("value") in (None, "") else repr(round(float(r["value"]), 12))) for r in rows)
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()


def _check_versions(report: VerifyReport, lake: Any, versions: Mapping[str, Any], fingerprint: str, folder: Path,
                    listed: Mapping[str, Any]) -> None:
    """The manifest's table versions against the lake's history (issue 31): each version is
    still in the table's log, the evaluation's dataset content hash at that version of
    ``evaluations`` is the manifest's, and the scores at that version of ``scores`` are the
    exported rows."""
    tables = dict(versions.get("tables") or {})
    for table, version in sorted(tables.items()):
        if version is None:
            continue
        try:
            lake.delta(table, int(version))
        except Exception:  # noqa: BLE001 - any failure to load means the version is not there
            report.fail(f"{MANIFEST}: {table} version {version} is not in this lake's history (another lake, vacuumed, or edited)")
            tables[table] = None
    if tables.get("evaluations") is not None:
        rows = lake.read("evaluations", where={"fingerprint": fingerprint}, version=int(tables["evaluations"]))
        hashes = set(rows["dataset_hash"].to_list()) if rows.height else set()
        if versions.get("dataset_content_sha256") not in hashes:
            report.fail(f"{MANIFEST}: dataset content {str(versions.get('dataset_content_sha256'))[:16]}... is not what evaluations "
                        f"version {tables['evaluations']} holds for this fingerprint")
    scores_file = next((n for n in listed if n.startswith("scores.")), None)
    if tables.get("scores") is not None and scores_file and (folder / scores_file).is_file():
        stored = lake.read("scores", where={"fingerprint": fingerprint}, version=int(tables["scores"]))
        if _score_digest(stored.iter_rows(named=True)) != _score_digest(_read_table(folder / scores_file)):
            report.fail(f"{MANIFEST}: the scores at scores version {tables['scores']} are not the exported {scores_file} "
                        "(the version or the rows were changed)")


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
