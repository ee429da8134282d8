"""The evaluation catalog: registering evaluations and models, adding metrics, archiving.

Part of :mod:`resources.catalog` (the package face exports these names; its docstring
describes the tables).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

import polars as pl

from resources.catalog.spec import EVALUATION_NAME, PIN_KEYS, ResolvedEvaluation, SpecError, canonical_json, dataset_pin, refuse_spec_secrets
from resources.lake.resource import LakeStore
from resources.catalog.reads import (
    CatalogCollisionError,
    CatalogError,
    FP_PREFIX,
    _evaluations,
    _listing,
    _models,
    _read,
    current_models,
    dataset_source,
    evaluation_key,
    find_evaluation,
    identity_sha256,
    pair_key,
    source_identity,
    utcnow,
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


class PinnedDatasetChanged(SpecError):
    """A pinned evaluation (``dataset.pin`` / ``dataset.sha256``) whose source now holds other
    content (issue 31): nothing is registered or scored. ``pinned`` / ``found``: the content
    hashes; ``diff``: the :class:`resources.catalog.diff.SampleDiff` from the pinned samples
    to the source's (None when the pinned fingerprint's samples are not stored)."""

    def __init__(self, message: str, pinned: str, found: str, diff: Any = None) -> None:
        super().__init__(message)
        self.pinned, self.found, self.diff = pinned, found, diff


def check_pin(lake: LakeStore, resolved: ResolvedEvaluation, frame: pl.DataFrame) -> None:
    """Refuse to register a pinned evaluation whose source changed (:class:`PinnedDatasetChanged`,
    saying what changed: "pinned at H; the source changed (H2): N added, M removed, K changed
    samples"). ``pin: current`` pins the content of the evaluation's current fingerprint (the
    content being registered when it has none yet)."""
    from resources.catalog.diff import compare_samples, stored_samples

    spec = resolved.spec
    pin = dataset_pin(spec.dataset)
    if pin is None:
        return
    mine = frame.filter(pl.col("name") == spec.name) if frame.height else frame
    if pin == "current":
        current = mine.filter(pl.col("status") == "current") if mine.height else mine
        pin = current["dataset_hash"][0] if current.height else resolved.dataset_hash
    if pin == resolved.dataset_hash:
        return
    holders = mine.filter(pl.col("dataset_hash") == pin).sort("registered_at") if mine.height else mine
    diff = None
    if holders.height:
        fp = holders["fingerprint"][-1]
        try:
            old = stored_samples(lake, fp)
        except CatalogError:  # the pinned fingerprint's samples were never materialised here
            old = None
        if old is not None:
            diff = compare_samples(old, {s.sample_id: s for s in resolved.samples}, f"{spec.name}@{fp[:12]}", "source now")
    change = diff.summary() if diff is not None else "the pinned samples are not stored here to compare"
    raise PinnedDatasetChanged(
        f"evaluation {spec.name}: pinned at {pin[:12]}; the source changed ({resolved.dataset_hash[:12]}): {change}; "
        "nothing new is scored. Restore the data, or accept the change: `facetlake evaluations pin "
        f"{spec.name} --unpin` (or set dataset.pin to the new content) and run again", pin, resolved.dataset_hash, diff)


def register_evaluation(lake: LakeStore, resolved: ResolvedEvaluation, *, take_over: bool = False,
                        replace: bool = False) -> Registration:
    """Record ``resolved`` under its name: its fingerprint (current; the previous one becomes
    history), its models (a changed source is a new version), its pairs.

    Raises :class:`CatalogCollisionError` when the fingerprint belongs to another
    evaluation (unless ``take_over``) or the name is registered over another dataset
    source (unless ``replace``), and :class:`PinnedDatasetChanged` when the spec pins a
    dataset content hash (``dataset.pin`` / ``dataset.sha256``) that the data no longer has."""
    spec = resolved.spec
    name, fp = spec.name, resolved.fingerprint
    # the spec may have changed since it was parsed (--anonymise, --profile, lm-eval run records): check what is stored
    refuse_spec_secrets(spec.to_mapping(), f"evaluation {name}")
    if not EVALUATION_NAME.match(name):
        raise SpecError(f"evaluation name {name!r} must match [a-z0-9][a-z0-9._-]* (it names partitions)")
    now = utcnow()
    frame = _evaluations(lake)
    check_pin(lake, resolved, frame)
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
    model is new). Re-pointing records a new version; other evaluations are untouched.
    Raises :class:`SpecError` when ``spec`` looks like it holds a secret."""
    refuse_spec_secrets({"models": {model: spec}}, f"evaluation {evaluation}")
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
    Returns the names newly added or changed. Raises :class:`SpecError` when a parameter
    looks like a secret (nothing is written)."""
    refuse_spec_secrets({"metric_params": {str(k): dict(v) for k, v in metrics.items()}}, f"evaluation {evaluation}")
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


def set_pin(lake: LakeStore, name: str, pin: bool = True) -> str | None:
    """Pin evaluation ``name`` to the dataset content of its current fingerprint (its stored
    spec gains ``dataset.pin: <content SHA-256>``; scheduled and CLI runs then refuse a changed
    source, saying what changed), or unpin it (``pin=False``: ``pin`` and ``sha256`` removed).
    Returns the pinned hash (None when unpinned). The fingerprint does not change. Raises
    :class:`CatalogError` for an unknown name."""
    frame = _evaluations(lake)
    mine = frame.filter(pl.col("name") == name) if frame.height else frame
    current = mine.filter(pl.col("status") == "current") if mine.height else mine
    if current.height == 0:
        raise CatalogError(f"no evaluation named {name!r}; evaluations: {_listing(frame)}")
    row = current.row(0, named=True)
    spec = json.loads(row["spec"])
    dataset = {k: v for k, v in (spec.get("dataset") or {}).items() if k not in PIN_KEYS}
    value = row["dataset_hash"] if pin else None
    if value:
        dataset["pin"] = value
    spec["dataset"] = dataset
    updated = current.with_columns(pl.lit(canonical_json(spec)).alias("spec"))
    lake.replace("evaluations", updated, {"name": name, "fingerprint": row["fingerprint"]})
    return value
