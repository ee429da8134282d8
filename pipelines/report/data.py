"""What the report reads: :class:`ReportData` for one fingerprint, loaded from the lake
(:func:`load_report_data`), the multi-run entries, and the value scaling the charts share.

When the ``comparisons``/``correlations`` tables hold nothing for the fingerprint, the same
statistics are computed in memory by :func:`metric_ops.compare.compare_models` and
:func:`metric_ops.compare.meta_eval.correlation_rows` (the functions the assets call), and the
report says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import polars as pl

from resources.lake.tables import LakeTables
from metric_ops.errors import FacetlakeError

MAX_RUNS = 5
HALLUCINATION_FLAG = 0.7
PAGE_SIZE = 50
TRIAD = ("faithfulness", "answer_relevance", "context_relevance")
BERTSCORE = ("bertscore_precision", "bertscore_recall", "bertscore_f1")
# confidence tiers of a generated token by its probability p = exp(logprob)
TIERS = (("high", 0.9), ("medium", 0.5), ("low", 0.0))
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


class ReportError(FacetlakeError, ValueError):
    """The report cannot be built (unknown fingerprint, nothing scored); the message says what to run."""


@dataclass
class ReportData:
    """Everything one report reads, already filtered to its fingerprint(s)."""

    fingerprint: str
    evaluation: dict[str, Any]
    samples: pl.DataFrame
    generations: pl.DataFrame
    scores: pl.DataFrame
    comparisons: list[dict[str, Any]]
    comparisons_source: str
    correlations: list[dict[str, Any]]
    correlations_source: str
    token_logprobs: pl.DataFrame
    runs: list[dict[str, Any]]  # multi-run entries: label, fingerprint, model, run_id, means {metric: mean}
    compare_differences: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, int | None] = field(default_factory=dict)
    baseline: str | None = None
    agents: dict[str, Any] | None = None  # agent episodes (issue 17): pipelines/report/agents.py
    spend: list[dict[str, Any]] = field(default_factory=list)  # calls and spend per run step (issue 30): spend_rows


# ----------------------------------------------------------------------------- loading
def _read(lake: LakeTables, table: str, where: dict[str, Any]) -> pl.DataFrame:
    if not lake.exists(table):
        return pl.DataFrame()
    return lake.read(table, where=where)


def _is_rescore(provenance: str | None) -> bool:
    """Whether a ``scores`` run scored a subset of metrics (``facetlake score -m``): its
    provenance names them, where a full run says ``"metrics": "all"``."""
    try:
        metrics = json.loads(provenance or "{}").get("metrics", "all")
    except ValueError:
        return False
    return metrics not in ("all", None, [])


def run_groups(runs: pl.DataFrame) -> list[dict[str, Any]]:
    """Evaluation runs from ``runs`` rows of asset ``scores``, newest first.

    A full scoring run of a (fingerprint, model) partition starts a run; a rescoring event
    (a subset of metrics, ``facetlake score -m``) belongs to the run before it: the run is
    read at the scores version its last rescore wrote, so it shows the added metrics, and
    the rescore is never a run of its own. A full run that wrote no score row (every score
    reused: a re-run that changed nothing, issue 26 fault 10) is not a run either: it is
    listed in the entry it repeated as ``unchanged_by``. Each entry: ``fingerprint, model,
    run_id`` (of the full run), ``finished_at``, ``scores_version``, ``rescored_by`` and
    ``unchanged_by`` (run ids, oldest first) and ``last_unchanged_at``."""
    groups: list[dict[str, Any]] = []
    current: dict[tuple[str, str], dict[str, Any]] = {}
    for r in runs.sort("finished_at", nulls_last=False).iter_rows(named=True):
        if r["table_version"] is None:
            continue
        key = (r["fingerprint"], r["model"])
        entry = current.get(key)
        if entry is not None and _is_rescore(r.get("provenance")):
            entry["scores_version"] = max(entry["scores_version"], int(r["table_version"]))
            entry["rescored_by"].append(r["run_id"])
            continue
        if entry is not None and entry["run_id"] == r["run_id"]:
            continue  # the same Dagster run recorded twice
        if entry is not None and r.get("rows") == 0:
            unchanged(entry, r["run_id"], r["finished_at"])
            continue
        entry = {"fingerprint": r["fingerprint"], "model": r["model"], "run_id": r["run_id"], "finished_at": r["finished_at"],
                 "scores_version": int(r["table_version"]), "rescored_by": [], "unchanged_by": [], "last_unchanged_at": None}
        current[key] = entry
        groups.append(entry)
    return groups[::-1]


def unchanged(entry: dict[str, Any], run_id: str, finished_at: Any, also: Sequence[str] = ()) -> None:
    """Record ``run_id`` (and the runs in ``also``) as re-runs of ``entry`` that changed no score."""
    entry.setdefault("unchanged_by", []).extend([run_id, *also])
    entry["last_unchanged_at"] = finished_at


def _same_means(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-12 for k in a)


def unchanged_text(entry: dict[str, Any]) -> str:
    """The multi-run table's note on re-runs that changed nothing ("-" when none)."""
    later = entry.get("unchanged_by") or []
    if not later:
        return "-"
    when = entry.get("last_unchanged_at")
    when = f", {when.strftime('%Y-%m-%d %H:%M')}" if hasattr(when, "strftime") else ""
    return f"unchanged since this run: {len(later)} re-run{'s' if len(later) != 1 else ''} (last {later[-1][:8]}{when})"


def _run_entries(lake: LakeTables, fingerprints: Sequence[str], max_runs: int) -> list[dict[str, Any]]:
    """Up to ``max_runs`` evaluation runs (model x full scoring run, see :func:`run_groups`),
    newest first, with their means per score name.

    Each run's rows are read by Delta time travel at the scores version that run (or its
    last rescore) wrote, so earlier runs of the same partition stay comparable after a
    re-run replaced them.
    """
    if not lake.exists("runs"):
        return []
    runs = lake.read("runs", where={"asset": "scores"}).filter(pl.col("fingerprint").is_in(list(fingerprints)))
    entries: list[dict[str, Any]] = []
    for g in run_groups(runs)[: 4 * max_runs]:  # newest first; re-runs with equal means merge below
        try:
            frame = lake.read("scores", where={"fingerprint": g["fingerprint"], "model": g["model"]}, version=g["scores_version"])
        except Exception:  # noqa: BLE001 - a vacuumed version is skipped, not fatal
            continue
        frame = frame.filter((pl.col("status") == "scored") & pl.col("value").is_finite() & ~pl.col("metric").str.starts_with("human:"))
        if frame.height == 0:
            continue
        means = dict(frame.group_by("metric").agg(pl.col("value").mean()).iter_rows())
        when = g["finished_at"].strftime("%Y-%m-%d %H:%M") if g["finished_at"] else ""
        entries.append({"label": f"{g['model']} @ {g['fingerprint'][:8]} · {g['run_id'][:8]} ({when})",
                        "fingerprint": g["fingerprint"], "model": g["model"], "run_id": g["run_id"], "means": means,
                        "scores_version": g["scores_version"], "rescored_by": g["rescored_by"],
                        "unchanged_by": list(g.get("unchanged_by", [])), "last_unchanged_at": g.get("last_unchanged_at"),
                        "finished_at": g["finished_at"]})
    # a run whose means equal the previous run of its partition changed nothing: it joins that run
    kept: list[dict[str, Any]] = []
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for e in reversed(entries):  # oldest first
        key = (e["fingerprint"], e["model"])
        prev = last.get(key)
        if prev is not None and _same_means(prev["means"], e["means"]):
            unchanged(prev, e["run_id"], e["last_unchanged_at"] or e["finished_at"], e["unchanged_by"])
            continue
        last[key] = e
        kept.append(e)
    return kept[::-1][:max_runs]


def load_report_data(
    lake: LakeTables, fingerprint: str, compare: Sequence[str] = (), force: bool = False, max_runs: int = MAX_RUNS
) -> ReportData:
    """Read what the report needs for ``fingerprint`` (a unique prefix is enough).

    ``compare``: other fingerprints whose runs join the multi-run comparison; refused
    (:class:`assets.comparisons.IncomparableError`, naming the differing inputs) when
    their fingerprint inputs differ, unless ``force``. Raises :class:`ReportError` when
    the fingerprint has no scores.
    """
    from assets.comparisons import require_comparable
    from resources.catalog import evaluation_row, evaluation_spec

    evaluation = evaluation_row(lake, fingerprint)
    fp = evaluation["fingerprint"]
    others = [evaluation_row(lake, c)["fingerprint"] for c in compare]
    diffs = require_comparable(lake, [fp, *others], force=force) if others else {}
    scores = _read(lake, "scores", {"fingerprint": fp})
    if scores.height == 0:
        raise ReportError(f"no scores under fingerprint {fp[:12]} ({evaluation['name']}); run `facetlake run CONFIG` first")
    comps = _read(lake, "comparisons", {"fingerprint": fp})
    if comps.height:
        comparisons = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in comps.iter_rows(named=True)]
        comparisons_source = f"comparisons table, run {comps['run_id'][0][:8]}"
    else:
        comparisons = recompute_comparisons(scores, getattr(evaluation_spec(lake, fp), "baseline", None))
        comparisons_source = "computed for this report (the comparisons asset has not been materialised for this fingerprint)"
    corr = _read(lake, "correlations", {"fingerprint": fp})
    if corr.height:
        correlations = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in corr.iter_rows(named=True)]
        correlations_source = f"correlations table, run {corr['run_id'][0][:8]}"
    else:
        correlations = recompute_correlations(lake, fp, scores)
        correlations_source = "computed for this report (the correlations asset has not been materialised for this fingerprint)"
    spec = evaluation_spec(lake, fp)
    return ReportData(
        fingerprint=fp,
        evaluation=evaluation,
        samples=_read(lake, "samples", {"fingerprint": fp}),
        generations=_read(lake, "generations", {"fingerprint": fp}),
        scores=scores,
        comparisons=comparisons,
        comparisons_source=comparisons_source,
        correlations=correlations,
        correlations_source=correlations_source,
        token_logprobs=_read(lake, "token_logprobs", {"fingerprint": fp}),
        runs=_run_entries(lake, [fp, *others], max_runs),
        compare_differences={k: {kk: list(vv) for kk, vv in v.items()} for k, v in diffs.items()},
        versions={t: lake.version(t) for t in ("samples", "generations", "scores", "comparisons", "correlations", "token_logprobs", "runs")},
        baseline=getattr(spec, "baseline", None),
        spend=spend_rows(lake, fp),
    )


def spend_rows(lake: LakeTables, fingerprint: str) -> list[dict[str, Any]]:
    """One row per ``generations`` / ``scores`` step of ``fingerprint`` that sent or reused
    model or judge calls (``runs`` provenance ``spend``, ``calls_reused``, ``budget_stop``,
    ``batches``), oldest first; empty when none did."""
    runs = _read(lake, "runs", {"fingerprint": fingerprint})
    out = []
    if runs.height == 0:
        return out
    for r in runs.sort("finished_at").iter_rows(named=True):
        prov = json.loads(r["provenance"] or "{}")
        spend = prov.get("spend") or {}
        if r["asset"] not in ("generations", "scores") or not (spend.get("calls") or prov.get("calls_reused")):
            continue
        batches = prov.get("batches") or {}
        stop = prov.get("budget_stop") or ("waiting for a batch" if prov.get("waiting") else "")
        out.append({"finished": str(r["finished_at"])[:19], "run": str(r["run_id"])[:8], "step": r["asset"], "model": r["model"],
                    "calls sent": int(spend.get("calls") or 0), "calls reused": int(prov.get("calls_reused") or 0),
                    "tokens": int(spend.get("tokens") or 0), "USD": round(float(spend.get("usd") or 0.0), 6),
                    "batches": ", ".join(batches.get("submitted") or []) or "-", "stopped": stop or "-"})
    return out


def _with_columns(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """``rows`` with every column of the lake table ``table`` (None where a row lacks it),
    as the stored rows have them; ``detail`` stays a dict."""
    from resources.lake.schemas import SCHEMAS

    names = SCHEMAS[table].names
    return [{**{n: None for n in names}, **r, "detail": r.get("detail") or {}} for r in rows]


def recompute_comparisons(scores: pl.DataFrame, baseline: str | None) -> list[dict[str, Any]]:
    """The comparisons rows of one fingerprint's ``scores``, computed in memory by
    :func:`metric_ops.compare.compare_models` (as the comparisons asset does; without the
    resource figures, so no trade-off rows). ``baseline`` is used when it has scores."""
    from metric_ops.compare import compare_models

    models = set(scores["model"].to_list())
    metrics = sorted(set(scores["metric"].to_list()))
    rows = compare_models(scores, baseline=baseline if baseline in models else None, value_ranges=declared_ranges(metrics))
    return _with_columns(rows, "comparisons")


def recompute_correlations(lake: LakeTables, fingerprint: str, scores: pl.DataFrame) -> list[dict[str, Any]]:
    """The correlations rows of one fingerprint, computed in memory by
    :func:`metric_ops.compare.meta_eval.correlation_rows` per model (as the correlations asset
    does): corpus-level scores left out, human ratings only for a model whose outputs are
    the rated dataset column (``precomputed:column=NAME``)."""
    from metric_ops.compare import corpus_metrics, legacy_corpus_metrics
    from metric_ops.compare.meta_eval import correlation_rows
    from resources.catalog import CatalogError, model_spec

    per_sample = scores.filter(~pl.col("metric").is_in(sorted(corpus_metrics(scores) | legacy_corpus_metrics(scores))))
    out = []
    for model in sorted(set(per_sample["model"].to_list())):
        try:
            rated = model_spec(lake, model, fingerprint).startswith("precomputed:column=")
        except CatalogError:
            rated = False
        for r in correlation_rows(per_sample.filter(pl.col("model") == model), include_human=rated):
            out.append({**r, "model": model, "fingerprint": fingerprint})
    return _with_columns(out, "correlations")


def declared_ranges(metrics: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Declared value range per score name (the metric registry's ``value_range``; names
    without a class, e.g. human ratings, or without a range are left out)."""
    from metric_ops.registry import REGISTRY

    out = {}
    for name in metrics:
        try:
            rng = REGISTRY.get_class(name).value_range
        except Exception:  # noqa: BLE001 - human ratings and retired metrics have no class
            continue
        if rng is not None:
            out[name] = (float(rng[0]), float(rng[1]))
    return out


# ----------------------------------------------------------------------------- scaling
def _scored(scores: pl.DataFrame) -> pl.DataFrame:
    """Scored per-sample rows. Corpus rows (``sample_id`` null: one corpus-level value per
    model, e.g. corpus BLEU) are not per-sample values and stay out of the per-sample
    views; the headline shows them with their resampled interval."""
    return scores.filter((pl.col("status") == "scored") & pl.col("value").is_not_null() & pl.col("value").is_finite()
                         & pl.col("sample_id").is_not_null())


def _metric_ranges(scores: pl.DataFrame) -> dict[str, tuple[float, float, str]]:
    """Per score name: (low, high, direction) used to scale values to [0, 1] (declared
    value range, else the observed range)."""
    ok = _scored(scores)
    declared = declared_ranges(sorted(set(ok["metric"].to_list())))
    out = {}
    for metric, lo, hi, direction in ok.group_by("metric").agg(
        pl.col("value").min().alias("lo"), pl.col("value").max().alias("hi"), pl.col("direction").first()
    ).iter_rows():
        low, high = declared.get(metric, (lo, hi))
        if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
            low, high = lo, hi
        out[metric] = (float(low), float(high), direction)
    return out


def _scale(value: float | None, rng: tuple[float, float, str]) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    low, high, direction = rng
    s = 0.5 if high == low else min(1.0, max(0.0, (value - low) / (high - low)))
    return s if direction == "maximize" else 1.0 - s
