"""The evaluation catalog: errors, keys, dataset/model source identities and every read.

Part of :mod:`resources.catalog` (the package face exports these names; its docstring
describes the tables).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from metric_ops.errors import FacetlakeError
from resources.catalog.spec import PIN_KEYS, EvaluationSpec, canonical_json
from resources.lake.resource import LakeStore
from resources.lake.tables import PerCommitCache


FP_PREFIX = 12


class CatalogError(FacetlakeError, LookupError):
    """A fingerprint, evaluation or model is not registered (the message lists what is)."""


class CatalogCollisionError(FacetlakeError, ValueError):
    """A registration would take over another evaluation's name or fingerprint; the
    message names both sides and the flag that allows it on purpose."""


class HistoryPartitionError(CatalogError):
    """A superseded (history) or archived partition was asked to be materialised."""


def utcnow() -> dt.datetime:
    """Timezone-aware now (UTC)."""
    return dt.datetime.now(dt.timezone.utc)


# ----------------------------------------------------------------------------- keys
def evaluation_key(name: str, fingerprint: str) -> str:
    """The evaluation partition key ``name@fp12`` (assets/partitions.py)."""
    return f"{name}@{fingerprint[:FP_PREFIX]}"


def pair_key(name: str, fingerprint: str, model: str) -> str:
    """The pair partition key ``name@fp12:model`` (assets/partitions.py)."""
    return f"{evaluation_key(name, fingerprint)}:{model}"


# ----------------------------------------------------------------------------- sources
def dataset_source(dataset: Mapping[str, Any]) -> str:
    """What names a dataset's *source* (kind, path, registry name...), as canonical JSON:
    the dataset config without the settings that only select or map its content
    (``limit``, ``mapping``, ``encoding``, ``sha256``). Content changes keep the source;
    another file or kind is another source."""
    keep = {k: v for k, v in dataset.items() if k not in ("limit", "mapping", "encoding", *PIN_KEYS)}
    if keep.get("kind") == "lm_eval":  # an lm-eval task: each run or import writes another results file
        keep = {"kind": "lm_eval", "task": keep.get("task")}
    if keep.get("path"):
        keep["path"] = str(Path(str(keep["path"])).expanduser().resolve())
    return canonical_json(keep)


def source_identity(spec: str) -> dict[str, Any]:
    """What identifies the outputs a model spec produces, computed cheaply at registration
    (no model is loaded): ``precomputed:FILE`` and ``lm_eval:RESULTS_FILE`` -> the file's SHA-256; ``column=`` -> the
    column (the dataset hash covers its content); ``hf:PATH`` -> the resolved folder,
    config.json's SHA-256 and the weight files' sizes (and the hub revision when the
    folder is a hub snapshot); ``api:MODEL@URL`` -> model and base URL; ``vllm:NAME`` ->
    the name; ``heuristic:NAME`` -> the name."""
    from resources.backends import parse_model_spec

    kind, target = parse_model_spec(spec)
    if kind in ("precomputed", "lm_eval"):  # lm_eval: an lm-eval results file (issue 18)
        if target.startswith("column="):
            return {"kind": kind, "column": target.split("=", 1)[1]}
        path = Path(target).expanduser()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        return {"kind": kind, "file": str(path.resolve()), "file_sha256": digest}
    if kind == "hf":
        path = Path(target).expanduser()
        ident: dict[str, Any] = {"kind": kind, "path": str(path.resolve()) if path.exists() else target}
        config = path / "config.json"
        if config.is_file():
            ident["config_sha256"] = hashlib.sha256(config.read_bytes()).hexdigest()
        if path.is_dir():
            ident["weights_bytes"] = {p.name: p.stat().st_size for p in sorted(path.glob("*.safetensors"))} or {
                p.name: p.stat().st_size for p in sorted(path.glob("*.bin"))}
            if path.parent.name == "snapshots":  # a hub cache snapshot folder is named by its commit
                ident["revision"] = path.name
        return ident
    if kind == "api":
        model, _, base_url = target.partition("@")
        return {"kind": kind, "model": model, "base_url": base_url.rstrip("/")}
    return {"kind": kind, "target": target}


def identity_sha256(spec: str, identity: Mapping[str, Any]) -> str:
    """SHA-256 of (spec string, identity): equal exactly when the source is the same."""
    return hashlib.sha256(canonical_json({"spec": spec, "identity": identity}).encode()).hexdigest()


# ----------------------------------------------------------------------------- reads
_FRAMES = PerCommitCache(16)  # the catalog tables read, per commit


def _read(lake: LakeStore, table: str) -> pl.DataFrame:
    """The whole catalog ``table`` (small: a row per evaluation or pair). A local table read
    at a commit already read in this process is served from memory (a run reads the
    ``evaluations`` table some 30 times between two commits); polars frames are immutable
    to these readers, so sharing one is safe."""
    stamp = lake.commit_stamp(table)
    if stamp is None:
        return lake.read(table)
    return _FRAMES.get_or_load(stamp, lambda: lake.read(table))


def _evaluations(lake: LakeStore) -> pl.DataFrame:
    frame = _read(lake, "evaluations")
    if "status" not in frame.columns:
        raise CatalogError(f"the lake under {lake.root} predates evaluation identity (its evaluations table has no status); "
                           f"run `facetlake migrate --lake {lake.root}` once (it rewrites only the catalog tables)")
    return frame


def _listing(frame: pl.DataFrame) -> str:
    current = frame.filter(pl.col("status") == "current") if frame.height else frame
    return ", ".join(f"{r['name']} ({r['fingerprint'][:FP_PREFIX]})" for r in current.sort("name").iter_rows(named=True)) or "none"


def evaluation_row(lake: LakeStore, ref: str) -> dict[str, Any]:
    """The ``evaluations`` row ``ref`` names.

    ``ref`` may be an evaluation name (its current fingerprint), a partition key
    (``name@fp12`` or ``name@fp12:model``), a full fingerprint, or a unique prefix of a
    name or a fingerprint. Raises :class:`CatalogError` listing the evaluations when
    nothing or more than one evaluation matches."""
    frame = _evaluations(lake)
    ref = str(ref or "").strip()
    if not ref:
        raise CatalogError(f"no evaluation named; evaluations: {_listing(frame)}")
    if frame.height == 0:
        raise CatalogError(f"evaluation {ref!r} is not registered (no evaluations under {lake.root}); run `facetlake run SPEC.yaml` first")

    def one(hits: pl.DataFrame) -> dict[str, Any] | None:
        if hits.height == 0:
            return None
        names = sorted(set(hits["name"].to_list()))
        if len(names) > 1 or hits.select("fingerprint").unique().height > 1:
            current = hits.filter(pl.col("status") == "current")
            if current.height == 1 and len(names) == 1:
                return current.row(0, named=True)
            shown = ", ".join(f"{r['name']}@{r['fingerprint'][:FP_PREFIX]}" for r in hits.iter_rows(named=True))
            raise CatalogError(f"{ref!r} is ambiguous: it matches {shown}; give the full name or more of the fingerprint")
        return hits.row(0, named=True)

    if "@" in ref:  # a partition key: name@fp[:model]
        name, _, rest = ref.partition("@")
        fp = rest.split(":", 1)[0]
        found = one(frame.filter((pl.col("name") == name) & pl.col("fingerprint").str.starts_with(fp)))
        if found:
            return found
        raise CatalogError(f"no fingerprint {fp!r} registered for evaluation {name!r}; evaluations: {_listing(frame)}")
    exact = frame.filter(pl.col("name") == ref)
    if exact.height:
        current = exact.filter(pl.col("status") == "current")
        return (current if current.height else exact.sort("registered_at")).row(-1, named=True)
    full = frame.filter(pl.col("fingerprint") == ref)
    if full.height:
        return full.row(0, named=True)
    by_name = frame.filter(pl.col("name").str.starts_with(ref) & (pl.col("status") == "current"))
    by_fp = frame.filter(pl.col("fingerprint").str.starts_with(ref)) if re.fullmatch(r"[0-9a-f]{4,64}", ref) else frame.clear()
    hits = pl.concat([by_name, by_fp]).unique(subset=["name", "fingerprint"], maintain_order=True)
    found = one(hits)
    if found:
        return found
    raise CatalogError(f"no evaluation matches {ref!r}; evaluations: {_listing(frame)}. "
                       "Name one by its name (or a unique prefix) or its fingerprint")


def find_evaluation(lake: LakeStore, name: str) -> dict[str, Any] | None:
    """The current row of the evaluation named exactly ``name`` (None if none or archived)."""
    frame = _evaluations(lake)
    if frame.height == 0:
        return None
    hits = frame.filter((pl.col("name") == name) & (pl.col("status") == "current") & ~pl.col("archived"))
    return hits.row(0, named=True) if hits.height else None


def _models(lake: LakeStore, evaluation: str | None = None) -> pl.DataFrame:
    frame = _read(lake, "evaluation_models")
    return frame.filter(pl.col("evaluation") == evaluation) if evaluation is not None and frame.height else frame


def current_models(lake: LakeStore, evaluation: str) -> dict[str, dict[str, Any]]:
    """model -> its latest ``evaluation_models`` row, for the active models of ``evaluation``."""
    frame = _models(lake, evaluation)
    if frame.height == 0:
        return {}
    latest = frame.sort("version").group_by("model", maintain_order=True).last()
    return {r["model"]: r for r in latest.filter(pl.col("active")).sort("model").iter_rows(named=True)}


def added_metrics(lake: LakeStore, evaluation: str) -> dict[str, dict[str, Any]]:
    """Metrics added to ``evaluation`` by ``facetlake score``: name -> parameters."""
    frame = _read(lake, "evaluation_metrics")
    if frame.height == 0:
        return {}
    frame = frame.filter(pl.col("evaluation") == evaluation).sort("added_at")
    return {r["metric"]: json.loads(r["params"] or "{}") for r in frame.iter_rows(named=True)}


_SPEC_CACHE: dict[tuple, EvaluationSpec] = {}
SPEC_TABLES = ("evaluations", "evaluation_models", "evaluation_metrics")


def evaluation_spec(lake: LakeStore, ref: str) -> EvaluationSpec:
    """The effective spec of the evaluation fingerprint ``ref`` names.

    For the current fingerprint: the registered spec with the evaluation's current models
    (spec and inbox models, latest versions) and its metrics (the spec's plus those added
    with ``facetlake score``, whose parameters win). A history fingerprint gives the spec
    as it was registered.

    Read and validated once per process for the catalog's table versions (issue 19: not
    three or four times per partition): the cache key holds the versions of
    ``evaluations``, ``evaluation_models`` and ``evaluation_metrics``, so any catalog write
    is seen. Callers get their own copy."""
    import copy

    key = (lake.uri("evaluations"), ref, *(lake.version(t) for t in SPEC_TABLES))
    if key not in _SPEC_CACHE:
        if len(_SPEC_CACHE) > 64:
            _SPEC_CACHE.clear()  # bounded
        _SPEC_CACHE[key] = _read_evaluation_spec(lake, ref)
    return copy.deepcopy(_SPEC_CACHE[key])


def _read_evaluation_spec(lake: LakeStore, ref: str) -> EvaluationSpec:
    row = evaluation_row(lake, ref)
    data = json.loads(row["spec"])
    if row["status"] == "current":
        models = current_models(lake, row["name"])
        if models:
            data["models"] = {m: r["spec"] for m, r in models.items()}
        extra = added_metrics(lake, row["name"])
        if extra:
            data["metrics"] = [*data.get("metrics", []), *[m for m in extra if m not in data.get("metrics", [])]]
            params = dict(data.get("metric_params") or {})
            for metric, p in extra.items():
                if p:
                    params[metric] = {**params.get(metric, {}), **p}
            data["metric_params"] = params
        if data.get("baseline") and data["baseline"] not in data["models"]:
            data.pop("baseline")
    data.pop("profile", None)  # its metrics are already in the stored list
    return EvaluationSpec.from_mapping(data, where=f"evaluation {row['name']}", check_secrets=False)  # a read, not a write


def model_spec(lake: LakeStore, model: str, fingerprint: str) -> str:
    """The source spec string of ``model`` in the evaluation fingerprint ``fingerprint`` names."""
    spec = evaluation_spec(lake, fingerprint)
    if model in spec.models:
        return spec.models[model]
    row = evaluation_row(lake, fingerprint)
    raise CatalogError(f"model {model!r} is not registered in evaluation {row['name']!r} "
                       f"(models: {', '.join(sorted(spec.models)) or 'none'}); add it under models: in its spec")


def pair_row(lake: LakeStore, key: str) -> dict[str, Any]:
    """The ``pairs`` row of a pair partition key (``name@fp12:model``); raises
    :class:`CatalogError` when it is not registered."""
    frame = _read(lake, "pairs")
    hits = frame.filter(pl.col("partition_key") == key) if frame.height else frame
    if hits.height == 0:
        raise CatalogError(f"partition {key!r} is not a registered (evaluation, model) pair; "
                           "`facetlake evaluations` lists them, `facetlake register SPEC.yaml` adds them")
    return hits.sort("registered_at").row(-1, named=True)


def pairs_of(lake: LakeStore, fingerprint: str, statuses: Iterable[str] = ("current",)) -> list[dict[str, Any]]:
    """The ``pairs`` rows under ``fingerprint`` (64 hex) with one of ``statuses``, by model."""
    frame = _read(lake, "pairs")
    if frame.height == 0:
        return []
    hits = frame.filter((pl.col("fingerprint") == fingerprint) & pl.col("status").is_in(list(statuses)))
    return hits.sort("model").to_dicts()


#: evaluation kinds with assets of their own (and partition sets of their own, assets/partitions.py)
KINDS = ("agent", "lm_eval")


def spec_kind(spec_json: str | None) -> str:
    """The kind of a stored evaluation spec (``evaluations.spec``, JSON): ``agent`` (dataset
    kind ``episodes``), ``lm_eval`` (an ``lm_eval:`` section) or ``generation``."""
    try:
        data = json.loads(spec_json or "{}")
    except ValueError:
        return "generation"
    if (data.get("dataset") or {}).get("kind") == "episodes":
        return "agent"
    return "lm_eval" if data.get("lm_eval") else "generation"


def _kinds(lake: LakeStore) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``evaluations`` table with a ``kind`` column (:func:`spec_kind`, each stored spec
    parsed once) and the ``pairs`` table."""
    evals = _evaluations(lake)
    if evals.height:
        evals = evals.with_columns(pl.Series("kind", [spec_kind(spec) for spec in evals["spec"]], dtype=pl.String))
    return evals, _read(lake, "pairs")


def _of_kind(evals: pl.DataFrame, pairs: pl.DataFrame, kind: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows of :func:`_kinds`'s tables that belong to evaluations of ``kind`` (None: all)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown evaluation kind {kind!r}; one of {', '.join(KINDS)} (or None for every kind)")
    if kind is None or not evals.height:
        return evals, pairs
    evals = evals.filter(pl.col("kind") == kind)
    return evals, pairs.filter(pl.col("fingerprint").is_in(evals["fingerprint"].implode())) if pairs.height else pairs


def _keys(evals: pl.DataFrame, pairs: pl.DataFrame) -> tuple[list[str], list[str], list[str], list[str]]:
    """(current evaluation keys, current pair keys, retired evaluation keys, retired pair keys)."""
    ekeys = sorted(evals.filter((pl.col("status") == "current") & ~pl.col("archived"))["partition_key"].to_list()) if evals.height else []
    pkeys = sorted(pairs.filter(pl.col("status") == "current")["partition_key"].to_list()) if pairs.height else []
    old_e = sorted(set(evals["partition_key"].to_list()) - set(ekeys)) if evals.height else []
    old_p = sorted(set(pairs["partition_key"].to_list()) - set(pkeys)) if pairs.height else []
    return ekeys, pkeys, old_e, old_p


def keys_by_kind(lake: LakeStore) -> dict[str | None, tuple[list[str], list[str], list[str], list[str]]]:
    """For every kind (None: every evaluation, then each of :data:`KINDS`): (current
    evaluation keys, current pair keys, retired evaluation keys, retired pair keys), from one
    read of the catalog (what :func:`current_keys` and :func:`retired_keys` return)."""
    evals, pairs = _kinds(lake)
    return {kind: _keys(*_of_kind(evals, pairs, kind)) for kind in (None, *KINDS)}


def current_keys(lake: LakeStore, kind: str | None = None) -> tuple[list[str], list[str]]:
    """(evaluation keys, pair keys) of the current fingerprints of active evaluations:
    the dynamic partitions Dagster should know. ``kind`` (one of :data:`KINDS`): only the
    evaluations of that kind (the partition sets of kind-specific assets); raises
    ``ValueError`` for another kind."""
    return _keys(*_of_kind(*_kinds(lake), kind))[:2]


def retired_keys(lake: LakeStore, kind: str | None = None) -> tuple[list[str], list[str]]:
    """(evaluation keys, pair keys) this lake knows as no longer current (history,
    retired, archived): the dynamic partitions to remove. Keys this lake does not know
    (another lake on the same Dagster instance) are never listed. ``kind``: as in
    :func:`current_keys`."""
    return _keys(*_of_kind(*_kinds(lake), kind))[2:]


def list_evaluations(lake: LakeStore, include_archived: bool = False, include_history: bool = False) -> pl.DataFrame:
    """One row per evaluation (its current fingerprint): name, fingerprint, status,
    dataset, models, schedule, registered_at, plus ``history`` (number of earlier
    fingerprints). ``include_history`` adds the history rows themselves."""
    frame = _evaluations(lake)
    if frame.height == 0:
        return frame
    if not include_archived:
        frame = frame.filter(~pl.col("archived"))
    history = frame.filter(pl.col("status") == "history").group_by("name").len().rename({"len": "history"})
    shown = frame if include_history else frame.filter(pl.col("status") == "current")
    pairs = _read(lake, "pairs")
    models = (
        pairs.filter(pl.col("status").is_in(["current", "history", "archived"]))
        .group_by("fingerprint").agg(pl.col("model").unique().sort().str.join(",").alias("models"))
        if pairs.height else pl.DataFrame(schema={"fingerprint": pl.String, "models": pl.String})
    )
    return (
        shown.join(models, on="fingerprint", how="left")
        .join(history, on="name", how="left")
        .with_columns(pl.col("history").fill_null(0).cast(pl.Int64))
        .sort(["name", "registered_at"])
    )
