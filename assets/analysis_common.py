"""Wiring shared by the ``comparisons`` and ``correlations`` assets: pinned reads with
their lineage, resource figures from ``generations`` and ``runs``, small text charts for
materialisation metadata. No assets are defined here."""


import hashlib
import json
import math
from typing import Any, Iterable, Mapping

import polars as pl

from assets.freshness import scores_marker
from resources.lake.resource import LakeStore
from resources.lake.score_params import fill_params

# the Delta tables an analysis row may depend on
READ_TABLES = ("evaluations", "samples", "generations", "scores", "runs")
# bump when the analysis code changes what it computes for unchanged scores: every stored
# analysis row is then recomputed once
ANALYSIS_VERSION = "3"  # 3: tie groups, difference intervals, detectable effects, clusters (issue 28)


def pinned_versions(lake: LakeStore, tables: Iterable[str] = READ_TABLES) -> dict[str, int | None]:
    """Current Delta version of each table (None when absent); read at these versions."""
    return {t: lake.version(t) for t in tables}


def read_pinned(lake: LakeStore, table: str, versions: Mapping[str, int | None], where: Mapping[str, Any]) -> pl.DataFrame:
    """``table`` rows matching ``where`` at the pinned version (empty frame when absent);
    ``scores`` through :func:`read_scores`."""
    version = versions.get(table)
    if table == "scores":
        return read_scores(lake, where, version)
    if version is None:
        return lake.read(table, where=where)
    return lake.read(table, where=where, version=version)


def read_scores(lake: LakeStore, where: Mapping[str, Any], version: int | None = None) -> pl.DataFrame:
    """``scores`` rows matching ``where`` for the analysis: every column, but ``detail``
    only where the analysis reads it, on corpus-level rows (``sample_id`` null: their
    sufficient statistics); per-sample rows carry a null ``detail``. The per-sample
    details (JSON strings, the bulk of the table's bytes) are never decoded, so a read of
    a million score rows moves a fraction of the data."""
    if not lake.exists("scores"):
        return lake.read("scores", where=where)
    scan = lake.native_scan("scores", version)
    if scan is not None:  # a local lake: polars reads the files (resources/lake/tables.py)
        for column, value in where.items():
            scan = scan.filter(pl.col(column).is_in([value] if isinstance(value, str) else list(value)))
        names = scan.collect_schema().names()
        rows, corpus = pl.collect_all([
            scan.filter(pl.col("sample_id").is_not_null()).select([c for c in names if c != "detail"]),
            scan.filter(pl.col("sample_id").is_null()),
        ])
        rows = rows.with_columns(pl.lit(None, pl.String).alias("detail")).select(corpus.columns)
        return fill_params(pl.concat([rows, corpus], how="vertical"))
    import pyarrow.dataset as ds

    dataset = lake.arrow_dataset("scores", version)
    expr = None
    for column, value in where.items():
        term = ds.field(column).isin([value] if isinstance(value, str) else list(value))
        expr = term if expr is None else expr & term
    per_sample = ds.field("sample_id").is_valid()
    columns = [c for c in dataset.schema.names if c != "detail"]
    rows = pl.from_arrow(dataset.to_table(filter=per_sample if expr is None else expr & per_sample, columns=columns))
    corpus = pl.from_arrow(dataset.to_table(filter=~per_sample if expr is None else expr & ~per_sample))
    rows = rows.with_columns(pl.lit(None, pl.String).alias("detail")).select(corpus.columns)
    return fill_params(pl.concat([rows, corpus], how="vertical"))  # params of older rows from their signature


def reads_record(fingerprint: str, versions: Mapping[str, int | None], scores: pl.DataFrame) -> dict[str, Any]:
    """What an analysis read: each table's Delta version, the models whose ``scores`` it
    read, and per model and metric signature the scores run(s) (Dagster run ids) that
    wrote the rows it read: every verdict traces to every run behind it. ``scores_marker``
    (:func:`assets.freshness.scores_marker`) says which scores the verdict summarises: it is
    fresh while the stored scores have the same marker."""
    models = sorted(set(scores["model"].to_list())) if scores.height else []
    runs: dict[str, list[str]] = {}
    by_signature: dict[str, dict[str, list[str]]] = {}
    if "run_id" in scores.columns and scores.height:
        for (model, signature), group in scores.group_by(["model", "signature"]):
            ids = sorted(set(group["run_id"].drop_nulls().to_list()))
            by_signature.setdefault(model, {})[signature] = ids
            runs[model] = sorted({*runs.get(model, []), *ids})
    return {
        "fingerprint": fingerprint,
        "table_versions": dict(versions),
        "models": models,
        "scores_run_ids": runs,
        "scores_runs_by_signature": {m: dict(sorted(v.items())) for m, v in sorted(by_signature.items())},
        "scores_marker": scores_marker(scores) if scores.height else None,
    }


# ----------------------------------------------------------------------------- incremental analysis
def metric_input_keys(scores: pl.DataFrame, context: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Per score name: a SHA-256 of everything its analysis rows depend on.

    That is, per model, the scores runs (``run_id``) and signatures that wrote the
    score's rows, their number and status counts and the rounded sum of their values,
    plus ``context`` (the analysis settings, the baseline, the model set...) and
    :data:`ANALYSIS_VERSION`. A rescore of one metric changes only that metric's keys:
    the summary, comparisons and correlations assets recompute only the score names
    whose key changed since their last run (the keys are kept in the ``runs`` table's
    provenance) and leave every other row, ``run_id`` included, as it was.
    """
    if scores.height == 0:
        return {}
    cols = scores.columns
    run_id = pl.col("run_id").fill_null("") if "run_id" in cols else pl.lit("")
    signature = pl.col("signature").fill_null("") if "signature" in cols else pl.lit("")
    per_model = (
        scores.with_columns(run_id.alias("_run"), signature.alias("_sig"))
        .group_by(["metric", "model"])
        .agg(
            pl.col("_run").unique().sort().str.join(",").alias("runs"),
            pl.col("_sig").unique().sort().str.join(",").alias("signatures"),
            pl.len().alias("n"),
            (pl.col("status") == "scored").sum().alias("n_scored"),
            (pl.col("status") == "error").sum().alias("n_error"),
            pl.col("value").filter(pl.col("value").is_finite()).sum().round(9).alias("value_sum"),
            pl.col("sample_id").is_null().sum().alias("n_corpus"),
        )
        .sort(["metric", "model"])
    )
    base = json.dumps({"analysis_version": ANALYSIS_VERSION, **dict(context or {})}, sort_keys=True, default=str)
    keys: dict[str, str] = {}
    for (metric,), part in per_model.partition_by("metric", as_dict=True, maintain_order=True).items():
        payload = json.dumps(part.drop("metric").to_dicts(), sort_keys=True, default=str)
        keys[metric] = hashlib.sha256((base + "|" + payload).encode()).hexdigest()
    return keys


def previous_metric_keys(lake: LakeStore, asset: str, fingerprint: str) -> dict[str, str]:
    """The per-score keys (:func:`metric_input_keys`) recorded by ``asset``'s latest run
    for ``fingerprint`` in the ``runs`` table; empty when there is none."""
    if not lake.exists("runs"):
        return {}
    runs = lake.read("runs", where={"fingerprint": fingerprint, "asset": asset}, columns=["finished_at", "provenance"])
    if runs.height == 0:
        return {}
    try:
        prov = json.loads(runs.sort("finished_at")["provenance"][-1] or "{}")
    except (TypeError, ValueError):
        return {}
    keys = prov.get("metric_keys")
    return dict(keys) if isinstance(keys, dict) else {}


def plan_recompute(
    keys_now: Mapping[str, str], keys_before: Mapping[str, str], stored: Iterable[str], incremental: bool = True
) -> tuple[set[str], set[str]]:
    """(score names to recompute, score names whose stored rows to drop).

    Recompute a score whose key is new or changed since the last run; drop the rows of
    a score no longer in the scores. Everything is recomputed with ``incremental=False``,
    and when the analysis table holds no row of this evaluation (first run, or its rows
    were removed)."""
    stored = set(stored)
    if not incremental or not stored:
        return set(keys_now), stored - set(keys_now)
    changed = {m for m, k in keys_now.items() if keys_before.get(m) != k}
    return changed, stored - set(keys_now)


_COST_KEYS = ("cost_usd", "total_cost_usd")
_SIZE_KEYS = ("model_parameters", "n_parameters", "num_parameters")
_BYTES_KEYS = ("size_bytes", "model_size_bytes")


def _find_number(obj: Any, keys: tuple[str, ...]) -> float | None:
    if isinstance(obj, Mapping):
        for key in keys:
            value = obj.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        for value in obj.values():
            found = _find_number(value, keys)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for value in obj:
            found = _find_number(value, keys)
            if found is not None:
                return found
    return None


def _cost(prov: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """(total, currency) from ``performance.cost`` (live backends, docs/backends.md), else a
    bare ``cost_usd``-like number anywhere in the provenance."""
    cost = (prov.get("performance") or {}).get("cost") if isinstance(prov.get("performance"), Mapping) else None
    if isinstance(cost, Mapping) and isinstance(cost.get("total"), (int, float)):
        return float(cost["total"]), cost.get("currency")
    found = _find_number(prov, _COST_KEYS)
    return found, ("USD" if found is not None else None)


def resource_figures(
    lake: LakeStore, fingerprint: str, models: Iterable[str], versions: Mapping[str, int | None]
) -> dict[str, dict[str, Any]]:
    """Per model: mean latency (s/sample), mean tokens in/out per sample from
    ``generations``; wall time, cost (``performance.cost.total`` with its currency) and
    size (parameters, else bytes) from the latest ``generations`` run's provenance in
    ``runs``. Missing figures are None (a precomputed or heuristic system has no cost)."""
    gens = read_pinned(lake, "generations", versions, {"fingerprint": fingerprint})
    runs = read_pinned(lake, "runs", versions, {"fingerprint": fingerprint})
    if runs.height:
        runs = runs.filter(pl.col("asset") == "generations").sort("finished_at")
    out: dict[str, dict[str, Any]] = {}
    for model in models:
        g = gens.filter(pl.col("model") == model) if gens.height else gens
        ok = g.filter(pl.col("status") == "ok") if g.height else g

        def mean(col: str) -> float | None:
            if ok.height == 0 or col not in ok.columns:
                return None
            value = ok[col].drop_nulls().mean()
            return None if value is None else float(value)

        prov: dict[str, Any] = {}
        r = runs.filter(pl.col("model") == model) if runs.height else runs
        if r.height:
            prov = json.loads(r["provenance"][-1] or "{}")
        size = _find_number(prov, _SIZE_KEYS)
        cost, currency = _cost(prov)
        out[model] = {
            "latency_s": mean("latency_s"),
            "tokens_in": mean("tokens_in"),
            "tokens_out": mean("tokens_out"),
            "cost": cost,
            "cost_currency": currency,
            "size": size if size is not None else _find_number(prov, _BYTES_KEYS),
            "size_unit": "parameters" if size is not None else ("bytes" if _find_number(prov, _BYTES_KEYS) is not None else None),
            "wall_s": _find_number(prov, ("wall_s",)),
            "n_generations": g.height,
            "n_errors": int((g["status"] == "error").sum()) if g.height else 0,
        }
    return out


BAR = "█"


def text_bars(items: list[tuple[str, float | None]], width: int = 20, digits: int = 3) -> str:
    """A Markdown code block of horizontal bars, scaled to the largest absolute value."""
    values = [abs(v) for _, v in items if v is not None and math.isfinite(v)]
    top = max(values) if values else 0.0
    label_w = max((len(k) for k, _ in items), default=0)
    lines = []
    for label, value in items:
        if value is None or not math.isfinite(value):
            lines.append(f"{label.ljust(label_w)} | (not scored)")
            continue
        n = 0 if top == 0 else round(width * abs(value) / top)
        lines.append(f"{label.ljust(label_w)} | {BAR * n}{' ' * (width - n)} {value:.{digits}f}")
    return "```\n" + "\n".join(lines) + "\n```"
