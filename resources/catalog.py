"""The evaluation catalog: who owns which fingerprint, which model sources belong to
which evaluation, and which (fingerprint, model) pairs exist. Stored as Delta tables.

Identity (DESIGN.md, "Identity"):

- ``evaluations``: one row per (evaluation name, fingerprint). A name has exactly one
  ``current`` fingerprint; earlier ones are ``history`` (their rows stay queryable). A
  fingerprint belongs to one evaluation: another name reaching the same fingerprint is a
  collision, refused unless the user passes ``--take-over``. A name re-registered over
  another dataset source is refused unless ``--replace``.
- ``evaluation_models``: one row per (evaluation, model, version): the model's source
  (spec string) and identity (file content hash, weights files, API model and base URL).
  A model's source belongs to the pair (evaluation, model), never to the bare name;
  changing it adds a version (recorded, with a notice), never a silent re-point.
- ``pairs``: one row per (evaluation, fingerprint, model) with its Dagster partition key
  and status (``current``, ``history``, ``retired``, ``archived``). Only ``current``
  pairs are Dagster partitions (assets/partitions.py).
- ``evaluation_metrics``: metrics added to an evaluation with ``facetlake score`` (with
  their parameters): part of the evaluation from then on, so re-runs keep them.

Every lookup accepts an evaluation name, a unique prefix of a name or fingerprint, or a
partition key (``name@fp12``); hex is for machines.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from resources.evaluation import EVALUATION_NAME, EvaluationSpec, ResolvedEvaluation, SpecError, canonical_json
from resources.lake import LakeStore
from metric_ops.errors import FacetlakeError

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
    keep = {k: v for k, v in dataset.items() if k not in ("limit", "mapping", "encoding", "sha256")}
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
def _read(lake: LakeStore, table: str) -> pl.DataFrame:
    return lake.read(table)


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


def evaluation_spec(lake: LakeStore, ref: str) -> EvaluationSpec:
    """The effective spec of the evaluation fingerprint ``ref`` names.

    For the current fingerprint: the registered spec with the evaluation's current models
    (spec and inbox models, latest versions) and its metrics (the spec's plus those added
    with ``facetlake score``, whose parameters win). A history fingerprint gives the spec
    as it was registered."""
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
    return EvaluationSpec.from_mapping(data, where=f"evaluation {row['name']}")


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


def current_keys(lake: LakeStore) -> tuple[list[str], list[str]]:
    """(evaluation keys, pair keys) of the current fingerprints of active evaluations:
    the dynamic partitions Dagster should know."""
    evals = _evaluations(lake)
    pairs = _read(lake, "pairs")
    ekeys = sorted(evals.filter((pl.col("status") == "current") & ~pl.col("archived"))["partition_key"].to_list()) if evals.height else []
    pkeys = sorted(pairs.filter(pl.col("status") == "current")["partition_key"].to_list()) if pairs.height else []
    return ekeys, pkeys


def retired_keys(lake: LakeStore) -> tuple[list[str], list[str]]:
    """(evaluation keys, pair keys) this lake knows as no longer current (history,
    retired, archived): the dynamic partitions to remove. Keys this lake does not know
    (another lake on the same Dagster instance) are never listed."""
    evals = _evaluations(lake)
    pairs = _read(lake, "pairs")
    current_e, current_p = current_keys(lake)
    ekeys = sorted(set(evals["partition_key"].to_list()) - set(current_e)) if evals.height else []
    pkeys = sorted(set(pairs["partition_key"].to_list()) - set(current_p)) if pairs.height else []
    return ekeys, pkeys


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


# ----------------------------------------------------------------------------- writes
@dataclass
class Registration:
    """What :func:`register_evaluation` did: the fingerprint and partition keys, the
    previous fingerprint when the evaluation moved to a new one, model versions, and
    notices (one line each) to show the user and record in run metadata."""

    name: str
    fingerprint: str
    partition_key: str
    previous_fingerprint: str | None = None
    new_fingerprint: bool = False
    models: dict[str, int] = field(default_factory=dict)
    changed_models: list[str] = field(default_factory=list)
    pair_keys: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def _model_row(name: str, model: str, version: int, spec: str, identity: Mapping[str, Any], source: str, active: bool = True) -> dict[str, Any]:
    return {"evaluation": name, "model": model, "version": version, "spec": spec,
            "identity": canonical_json(identity), "identity_sha256": identity_sha256(spec, identity),
            "source": source, "active": active, "registered_at": utcnow()}


def _describe_source(spec: str, identity: Mapping[str, Any]) -> str:
    digest = identity.get("file_sha256") or identity.get("config_sha256")
    return f"{spec}" + (f" (sha256 {digest[:12]})" if digest else "")


def register_evaluation(lake: LakeStore, resolved: ResolvedEvaluation, *, take_over: bool = False,
                        replace: bool = False) -> Registration:
    """Record ``resolved`` under its name: its fingerprint (current; the previous one becomes
    history), its models (a changed source is a new version), its pairs.

    Raises :class:`CatalogCollisionError` when the fingerprint belongs to another
    evaluation (unless ``take_over``) or the name is registered over another dataset
    source (unless ``replace``), and :class:`SpecError` when the spec pins a dataset
    content hash (``dataset.sha256``) that the data no longer has."""
    spec = resolved.spec
    name, fp = spec.name, resolved.fingerprint
    if not EVALUATION_NAME.match(name):
        raise SpecError(f"evaluation name {name!r} must match [a-z0-9][a-z0-9._-]* (it names partitions)")
    pinned = spec.dataset.get("sha256")
    if pinned and str(pinned) != resolved.dataset_hash:
        raise SpecError(f"evaluation {name}: the spec pins dataset content sha256 {str(pinned)[:12]}…, but the data now hashes "
                        f"to {resolved.dataset_hash[:12]}…; restore the data, or update dataset.sha256 to accept the change")
    now = utcnow()
    frame = _evaluations(lake)
    reg = Registration(name=name, fingerprint=fp, partition_key=evaluation_key(name, fp))
    # --- the fingerprint's owner
    owners = frame.filter((pl.col("fingerprint") == fp) & (pl.col("name") != name)) if frame.height else frame
    if owners.height:
        owner = owners.row(0, named=True)
        if not take_over:
            raise CatalogCollisionError(
                f"fingerprint {fp[:FP_PREFIX]} already belongs to evaluation {owner['name']!r} (dataset {owner['dataset']}, "
                f"registered {owner['registered_at']:%Y-%m-%d %H:%M}); spec {name!r} has the same dataset content, adapter, "
                f"generation settings and annotators. Run it as `name: {owner['name']}`, or pass --take-over to move "
                f"the fingerprint and its stored results from {owner['name']!r} to {name!r}")
        _release_fingerprint(lake, owner["name"], fp)
        reg.notices.append(f"fingerprint {fp[:FP_PREFIX]} moved from evaluation {owner['name']!r} to {name!r} (--take-over)")
        frame = _evaluations(lake)
    mine = frame.filter(pl.col("name") == name) if frame.height else frame
    current = mine.filter(pl.col("status") == "current")
    source = dataset_source(spec.dataset)
    if current.height:
        cur = current.row(0, named=True)
        if cur["dataset_source"] != source and not replace:
            raise CatalogCollisionError(
                f"evaluation {name!r} is registered over dataset {cur['dataset']} ({_short_source(cur['dataset_source'])}); "
                f"this spec points it at {resolved.dataset_name} ({_short_source(source)}). Choose another name, or pass "
                f"--replace to redefine {name!r} (its earlier results stay as history)")
        if cur["fingerprint"] != fp:
            reg.previous_fingerprint = cur["fingerprint"]
            reg.new_fingerprint = True
            why = ("dataset content changed" if cur["dataset_hash"] != resolved.dataset_hash
                   else "adapter, generation settings or annotators changed")
            reg.notices.append(f"evaluation {name}: {why}; new fingerprint {fp[:FP_PREFIX]} (was {cur['fingerprint'][:FP_PREFIX]}, "
                               "kept as history: its results stay queryable)")
    else:
        reg.new_fingerprint = True
    archived = bool(mine["archived"].any()) if mine.height else False
    spec_json = canonical_json(spec.to_mapping())
    rows = []
    for r in mine.iter_rows(named=True):
        if r["fingerprint"] == fp:
            continue
        if r["status"] == "current":
            r = {**r, "status": "history", "superseded_at": now}
        rows.append(r)
    existing = mine.filter(pl.col("fingerprint") == fp)
    first_at = existing.item(0, "registered_at") if existing.height else now
    rows.append({
        "name": name, "fingerprint": fp, "partition_key": evaluation_key(name, fp), "status": "current", "archived": archived,
        "dataset": resolved.dataset_name, "dataset_source": source, "dataset_hash": resolved.dataset_hash,
        "n_samples": len(resolved.samples), "spec": spec_json,
        "fingerprint_inputs": canonical_json(resolved.fingerprint_inputs), "schedule": spec.schedule,
        "registered_at": first_at, "superseded_at": None,
    })
    if archived:
        reg.notices.append(f"evaluation {name} is archived: `facetlake evaluations restore {name}` shows it again")
    # --- models: a changed source is a new version, never a silent re-point
    known = _models(lake, name)
    latest = {r["model"]: r for r in known.sort("version").group_by("model", maintain_order=True).last().iter_rows(named=True)} if known.height else {}
    model_rows = known.to_dicts()
    for model, model_spec_string in sorted(spec.models.items()):
        identity = source_identity(model_spec_string)
        digest = identity_sha256(model_spec_string, identity)
        prev = latest.get(model)
        if prev is None:
            version = 1
        elif prev["identity_sha256"] == digest and prev["active"] and prev["source"] == "spec":
            reg.models[model] = prev["version"]
            continue
        else:
            version = prev["version"] + 1
            if prev["identity_sha256"] != digest:
                reg.changed_models.append(model)
                reg.notices.append(
                    f"model {model} of {name}: source changed from {_describe_source(prev['spec'], json.loads(prev['identity']))} to "
                    f"{_describe_source(model_spec_string, identity)} (version {version}); its outputs are regenerated, "
                    "the earlier ones stay reachable by Delta time travel")
        model_rows.append(_model_row(name, model, version, model_spec_string, identity, "spec"))
        reg.models[model] = version
    for model, prev in latest.items():
        if model in spec.models or not prev["active"]:
            continue
        if prev["source"] == "spec":  # dropped from the spec: retired (its rows stay)
            model_rows.append({**prev, "version": prev["version"] + 1, "active": False, "registered_at": now})
            reg.notices.append(f"model {model} is no longer in {name}'s spec: retired (its stored results stay)")
        else:  # added by the inbox or the CLI: stays part of the evaluation
            reg.models[model] = prev["version"]
    # --- pairs
    pair_rows = _pair_rows(lake, name, fp, sorted(reg.models), archived, now)
    reg.pair_keys = {r["model"]: r["partition_key"] for r in pair_rows if r["fingerprint"] == fp and r["status"] in ("current", "archived")}
    lake.replace("evaluations", rows, {"name": name})
    lake.replace("evaluation_models", model_rows, {"evaluation": name})
    lake.replace("pairs", pair_rows, {"evaluation": name})
    return reg


def _short_source(source_json: str) -> str:
    data = json.loads(source_json)
    return ", ".join(f"{k}={v}" for k, v in sorted(data.items()))


def _pair_rows(lake: LakeStore, name: str, fingerprint: str, models: list[str], archived: bool, now: dt.datetime) -> list[dict[str, Any]]:
    """The full ``pairs`` rows of evaluation ``name`` once ``fingerprint`` is current with
    ``models`` active: its pairs current (or archived), every other fingerprint's history,
    and this fingerprint's other models retired."""
    frame = _read(lake, "pairs")
    mine = frame.filter(pl.col("evaluation") == name).to_dicts() if frame.height else []
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in mine:
        status = r["status"]
        if r["fingerprint"] != fingerprint and status == "current":
            status = "history"
        elif r["fingerprint"] == fingerprint and r["model"] not in models:
            status = "retired"
        out[(r["fingerprint"], r["model"])] = {**r, "status": status}
    for model in models:
        prev = out.get((fingerprint, model))
        out[(fingerprint, model)] = {
            "evaluation": name, "fingerprint": fingerprint, "model": model, "partition_key": pair_key(name, fingerprint, model),
            "status": "archived" if archived else "current", "registered_at": prev["registered_at"] if prev else now,
        }
    return sorted(out.values(), key=lambda r: (r["fingerprint"], r["model"]))


def _release_fingerprint(lake: LakeStore, name: str, fingerprint: str) -> None:
    """Remove ``fingerprint`` from evaluation ``name`` (``--take-over``): its evaluations and
    pairs rows go; the evaluation keeps its other fingerprints (the latest becomes current)."""
    frame = _evaluations(lake).filter(pl.col("name") == name)
    rest = frame.filter(pl.col("fingerprint") != fingerprint)
    if rest.height and not (rest["status"] == "current").any():
        last = rest.sort("registered_at")["fingerprint"][-1]
        rest = rest.with_columns(
            pl.when(pl.col("fingerprint") == last).then(pl.lit("current")).otherwise(pl.col("status")).alias("status"))
    lake.replace("evaluations", rest, {"name": name})
    pairs = _read(lake, "pairs")
    if pairs.height:
        lake.replace("pairs", pairs.filter((pl.col("evaluation") == name) & (pl.col("fingerprint") != fingerprint)), {"evaluation": name})


def register_model(lake: LakeStore, evaluation: str, model: str, spec: str, source: str = "inbox") -> tuple[str, int, bool]:
    """Add (or re-point) ``model`` in ``evaluation`` (its current fingerprint), e.g. from an
    inbox file. Returns (pair partition key, version, whether the source changed or the
    model is new). Re-pointing records a new version; other evaluations are untouched."""
    row = find_evaluation(lake, evaluation)
    if row is None:
        raise CatalogError(f"evaluation {evaluation!r} is not registered (or is archived); evaluations: {_listing(_evaluations(lake))}")
    identity = source_identity(spec)
    digest = identity_sha256(spec, identity)
    known = _models(lake, evaluation)
    rows = known.to_dicts()
    prev = None
    if known.height:
        mine = known.filter(pl.col("model") == model).sort("version")
        prev = mine.row(-1, named=True) if mine.height else None
    changed = prev is None or prev["identity_sha256"] != digest or not prev["active"]
    version = prev["version"] if prev else 1
    if changed:
        version = (prev["version"] + 1) if prev else 1
        rows.append(_model_row(evaluation, model, version, spec, identity, prev["source"] if prev and prev["source"] == "spec" else source))
        lake.replace("evaluation_models", rows, {"evaluation": evaluation})
    models = sorted({*current_models(lake, evaluation), model})
    pair_rows = _pair_rows(lake, evaluation, row["fingerprint"], models, bool(row["archived"]), utcnow())
    lake.replace("pairs", pair_rows, {"evaluation": evaluation})
    return pair_key(evaluation, row["fingerprint"], model), version, changed


def add_metrics(lake: LakeStore, evaluation: str, metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Make ``metrics`` (name -> parameters) part of ``evaluation`` so re-runs keep them
    (``facetlake score``). A metric already added is replaced by the new parameters.
    Returns the names newly added or changed."""
    frame = _read(lake, "evaluation_metrics")
    mine = frame.filter(pl.col("evaluation") == evaluation).to_dicts() if frame.height else []
    by_name = {r["metric"]: r for r in mine}
    changed = []
    for metric, params in metrics.items():
        text = canonical_json(dict(params))
        if metric in by_name and by_name[metric]["params"] == text:
            continue
        by_name[metric] = {"evaluation": evaluation, "metric": metric, "params": text, "source": "score", "added_at": utcnow()}
        changed.append(metric)
    if changed:
        lake.replace("evaluation_metrics", list(by_name.values()), {"evaluation": evaluation})
    return changed


def set_archived(lake: LakeStore, name: str, archived: bool) -> int:
    """Archive (hide from listings, partitions and schedules; no data is deleted) or
    restore evaluation ``name``; returns the number of pairs affected."""
    frame = _evaluations(lake)
    mine = frame.filter(pl.col("name") == name) if frame.height else frame
    if mine.height == 0:
        raise CatalogError(f"no evaluation named {name!r}; evaluations: {_listing(frame)}")
    lake.replace("evaluations", mine.with_columns(pl.lit(archived).alias("archived")), {"name": name})
    pairs = _read(lake, "pairs")
    mine_pairs = pairs.filter(pl.col("evaluation") == name) if pairs.height else pairs
    current_fp = mine.filter(pl.col("status") == "current")["fingerprint"].to_list()
    if mine_pairs.height:
        if archived:
            updated = mine_pairs.with_columns(
                pl.when(pl.col("status") == "current").then(pl.lit("archived")).otherwise(pl.col("status")).alias("status"))
        else:
            updated = mine_pairs.with_columns(
                pl.when((pl.col("status") == "archived") & pl.col("fingerprint").is_in(current_fp))
                .then(pl.lit("current")).otherwise(pl.col("status")).alias("status"))
        lake.replace("pairs", updated, {"evaluation": name})
        return int((updated["status"] != mine_pairs["status"]).sum())
    return 0
