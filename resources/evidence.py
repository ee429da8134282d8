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
``samples.jsonl``            (``--include-samples``) the samples, so the dataset hash can be rechecked
``MANIFEST.json``            SHA-256 and size of every file above
===========================  ===============================================================

:func:`verify_evidence` recomputes every file's SHA-256, refuses files the manifest does
not list, recomputes the fingerprint from ``evaluation.json``'s inputs
(:func:`resources.evaluation.fingerprint_of`), checks every score row belongs to it, and,
with samples, recomputes the dataset content hash. It needs nothing but the folder.
CSV files are UTF-8 with a header row (they open in a spreadsheet); nested values are JSON text.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from resources.catalog import evaluation_row, pairs_of
from resources.evaluation import fingerprint_of

FORMAT = "facetlake-evidence/1"
MANIFEST = "MANIFEST.json"
JUDGE_DETAIL_KEYS = ("reasoning", "claims", "verdicts", "votes", "jurors", "judges", "raw_reply", "raw", "steps", "sentences")


class EvidenceError(RuntimeError):
    """The export cannot be written (unknown fingerprint, existing non-empty folder, ...)."""


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


def export_evidence(lake: Any, fingerprint: str, out: str | Path, fmt: str = "json", include_samples: bool = False) -> dict[str, Any]:
    """Write the evidence folder for ``fingerprint`` (64 hex or a unique prefix) into ``out``.

    ``fmt``: ``json`` (tables as JSON lines) or ``csv``. Returns the manifest. Raises
    :class:`EvidenceError` when ``out`` exists and is not empty, or nothing is scored, and
    :class:`resources.catalog.CatalogError` for an unknown fingerprint.
    """
    from assets.common import package_versions

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
    # every model of this evaluation fingerprint (spec and inbox), with its catalog version and source
    catalog_models = lake.read("evaluation_models", where={"evaluation": ev["name"]}) if lake.exists("evaluation_models") else pl.DataFrame()
    pair_models = sorted({p["model"] for p in pairs_of(lake, fp, ("current", "history", "archived", "retired"))}) or sorted(spec.get("models") or {})
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

    if include_samples:
        from assets.common import samples_from_frame
        from resources.datasets import sample_to_record

        samples = samples_from_frame(lake.read("samples", where={"fingerprint": fp}))
        path = out / "samples.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(sample_to_record(s), ensure_ascii=False, sort_keys=True, default=str) + "\n")
        files.append(path)

    manifest = {"format": FORMAT, "fingerprint": fp, "table_format": fmt,
                "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
                "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files}}
    _write_json(out / MANIFEST, manifest)
    return manifest


@dataclass
class VerifyReport:
    """Result of :func:`verify_evidence`: ``ok`` and the list of problems found."""

    folder: str
    ok: bool = True
    fingerprint: str | None = None
    recomputed_fingerprint: str | None = None
    manifest_sha256: str | None = None
    files_checked: int = 0
    problems: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.ok = False
        self.problems.append(message)


def _read_table(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def verify_evidence(folder: str | Path) -> VerifyReport:
    """Check an evidence folder from its content alone (see the module docstring)."""
    from metric_ops.base import Sample
    from resources.datasets import content_hash

    folder = Path(folder)
    report = VerifyReport(str(folder))
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        report.fail(f"{MANIFEST} is missing: not a facetlake evidence folder")
        return report
    report.manifest_sha256 = sha256_file(manifest_path)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed: dict[str, Mapping[str, Any]] = dict(manifest["files"])
    except (ValueError, KeyError, TypeError) as exc:
        report.fail(f"{MANIFEST} is unreadable ({type(exc).__name__}); it may have been edited")
        return report
    if manifest.get("format") != FORMAT:
        report.fail(f"{MANIFEST}: format {manifest.get('format')!r} is not {FORMAT}")
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST}
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
    for name in listed:
        if name.startswith("scores.") and (folder / name).is_file():
            foreign = {r.get("fingerprint") for r in _read_table(folder / name)} - {report.fingerprint}
            if foreign:
                report.fail(f"{name} holds rows of another fingerprint: {sorted(map(str, foreign))[:3]}")
    if "samples.jsonl" in listed and (folder / "samples.jsonl").is_file():
        records = _read_table(folder / "samples.jsonl")
        samples = [Sample(sample_id=r["sample_id"], input=r["input"], references=tuple(r["references"]), context=tuple(r["context"]),
                          metadata=r["metadata"], ratings={k: (float("nan") if v is None else v) for k, v in r["ratings"].items()})
                   for r in records]
        digest = content_hash(samples)
        if digest != inputs_hash:
            report.fail(f"samples.jsonl hashes to {digest[:16]}..., not the dataset content hash {str(inputs_hash)[:16]}...")
    return report


def manifest_files(folder: str | Path) -> Iterable[str]:
    """Names of the files a manifest lists."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))["files"].keys()
