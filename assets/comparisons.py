"""The ``comparisons`` asset: N-model verdicts with honest statistics, one partition per
fingerprint, and the regression alert (asset check ``check_comparisons_no_regression``).

The statistics are :func:`metric_ops.compare.compare_models` (per-metric mean, median,
95% interval, winner by declared direction; pairwise delta, relative change, retention,
paired test with Holm correction, effect size; regressed / improved / still-wrong
samples; trade-off against latency, tokens, cost and size). Every row carries ``reads``:
the Delta table versions and partitions it was computed from; the materialisation
metadata carries the same, the headline table and a small chart.

Comparing different fingerprints is refused unless forced: :func:`require_comparable`
names the fingerprint inputs that differ.
"""


import json
from dataclasses import dataclass, field
from typing import Any, Collection

import dagster as dg
import polars as pl

from assets.declare import delta_asset, table_metadata
from assets.analysis_common import (
    metric_input_keys,
    pinned_versions,
    plan_recompute,
    previous_metric_keys,
    read_pinned,
    reads_record,
    resource_figures,
    text_bars,
)
from assets.common import evaluation_fingerprint, markdown_table, record_run
from metric_ops.compare import ALPHA, compare_models, detail_json
from metric_ops.gates import GateRules, evaluate_gates, row_detail
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from resources.catalog import evaluation_row, evaluation_spec, utcnow
from resources.datasets import default_cluster
from resources.lake.schemas import SCHEMAS
from resources.lake.resource import LakeStore
from metric_ops.errors import FacetlakeError

CHECK_REGRESSION = "check_comparisons_no_regression"


class IncomparableError(FacetlakeError, ValueError):
    """Two fingerprints differ in what defines an evaluation; the message lists the differences."""


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def fingerprint_differences(lake: LakeStore, a: str, b: str) -> dict[str, tuple[Any, Any]]:
    """Fingerprint inputs (dotted keys, e.g. ``generation.max_tokens``) whose values differ
    between the evaluations registered under ``a`` and ``b`` (prefixes accepted)."""
    ra, rb = evaluation_row(lake, a), evaluation_row(lake, b)
    fa = _flatten(json.loads(ra["fingerprint_inputs"] or "{}"))
    fb = _flatten(json.loads(rb["fingerprint_inputs"] or "{}"))
    return {k: (fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}


def require_comparable(lake: LakeStore, fingerprints: list[str], force: bool = False) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Refuse (:class:`IncomparableError`) to compare runs under different fingerprints
    unless ``force``; returns the differences per other fingerprint either way."""
    first = evaluation_row(lake, fingerprints[0])["fingerprint"]
    diffs: dict[str, dict[str, tuple[Any, Any]]] = {}
    for fp in fingerprints[1:]:
        full = evaluation_row(lake, fp)["fingerprint"]
        if full == first:
            continue
        diffs[full] = fingerprint_differences(lake, first, full)
    if diffs and not force:
        lines = []
        for fp, d in diffs.items():
            items = "; ".join(f"{k}: {_short(v[0])} vs {_short(v[1])}" for k, v in d.items()) or "(inputs equal, fingerprint differs)"
            lines.append(f"{first[:12]} vs {fp[:12]}: {items}")
        raise IncomparableError(
            "refusing to compare runs under different fingerprints (their scores are not over the same evaluation): "
            + " | ".join(lines) + ". Pass --force to compare anyway."
        )
    return diffs


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_ranges(metrics: list[str]) -> dict[str, tuple[float, float]]:
    """Declared value range per score name (from the metric registry; unknown names skipped)."""
    from metric_ops.registry import REGISTRY

    out = {}
    for name in metrics:
        try:
            rng = REGISTRY.get_class(name).declared_range(name)
        except Exception:  # noqa: BLE001 - human ratings and retired metrics have no class
            continue
        if rng is not None:
            out[name] = (float(rng[0]), float(rng[1]))
    return out


class ComparisonsConfig(dg.Config):
    """Run config of ``comparisons``: significance level, resamples and seed;
    ``incremental`` recomputes only the score names whose scores changed since the last
    run (False: every score name)."""

    alpha: float = ALPHA
    n_resamples: int = 2000
    n_permutations: int = 9999
    seed: int = 0
    max_samples: int = 10
    incremental: bool = True


def _statistics_settings(config: ComparisonsConfig) -> dict[str, Any]:
    return {k: getattr(config, k) for k in ("alpha", "n_resamples", "n_permutations", "seed", "max_samples")}


def comparison_rows(
    lake: LakeStore, fingerprint: str, run_id: str, config: ComparisonsConfig | None = None,
    metrics: Collection[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """The ``comparisons`` rows of one fingerprint (of the score names in ``metrics``
    only, when given), the ``reads`` record and the baseline."""
    config = config or ComparisonsConfig()
    inputs = _comparison_inputs(lake, fingerprint)
    return _rows_for(inputs, run_id, config, metrics), inputs["reads"], inputs["baseline"]


def _comparison_inputs(lake: LakeStore, fingerprint: str) -> dict[str, Any]:
    row = evaluation_row(lake, fingerprint)
    fingerprint = row["fingerprint"]
    spec = evaluation_spec(lake, fingerprint)
    versions = pinned_versions(lake)
    scores = read_pinned(lake, "scores", versions, {"fingerprint": fingerprint})
    if scores.height == 0:
        raise dg.Failure(f"no scores stored under fingerprint {fingerprint[:12]}; materialise scores for its models first")
    models = sorted(set(scores["model"].to_list()))
    configured = getattr(spec, "baseline", None)
    baseline = configured if configured in models else None
    reads = reads_record(fingerprint, versions, scores)
    reads["baseline"] = configured
    field_name = getattr(spec, "cluster", None) or default_cluster((getattr(spec, "dataset", None) or {}).get("kind"))
    clusters = sample_clusters(read_pinned(lake, "samples", versions, {"fingerprint": fingerprint}), field_name) if field_name else None
    trials = int(getattr(spec, "trials", 1) or 1)
    if trials > 1:  # trials of one sample are not independent items: the sample (or its declared cluster) is the cluster
        from metric_ops.stats.trials import split_trial

        declared = clusters or {}
        bases = {sid: split_trial(sid)[0] for sid in set(scores["sample_id"].drop_nulls().to_list())}
        clusters = {sid: declared.get(base, base) for sid, base in bases.items()}
        field_name = field_name or "sample (repeated trials)"
    reads["cluster"] = field_name
    # what the verdict rests on: dataset content and samples version, adapter and template hashes,
    # metric (judge prompt) versions (issue 31; `facetlake evaluations show` lists the same)
    from resources.catalog.versions import rests_on, samples_versions

    reads["rests_on"] = rests_on(row, samples_versions(lake, fingerprint).get(fingerprint))
    reads["gate"] = dict(getattr(spec, "gate", None) or {})
    return {"row": row, "fingerprint": fingerprint, "scores": scores, "models": models, "baseline": baseline,
            "resources": resource_figures(lake, fingerprint, models, versions), "reads": reads, "clusters": clusters,
            "cluster": field_name, "trials": trials}


def sample_clusters(samples: pl.DataFrame, field_name: str) -> dict[str, str]:
    """sample id -> cluster label from the ``samples`` rows of one fingerprint.

    ``field_name``: ``input`` or ``context`` (the samples columns; context passages joined),
    else a key of each sample's metadata. A sample without the field is its own cluster.
    Raises :class:`dagster.Failure` when no sample has the field (a typo in ``cluster:``),
    naming the metadata keys that exist."""
    out: dict[str, str] = {}
    keys: set[str] = set()
    for row in samples.iter_rows(named=True):
        if field_name == "input":
            value = row["input"]
        elif field_name == "context":
            value = "\n".join(row["context"] or []) or None
        else:
            meta = json.loads(row["metadata"]) if row.get("metadata") else {}
            keys.update(meta)
            value = meta.get(field_name)
        if value is not None and value != "":
            out[str(row["sample_id"])] = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    if samples.height and not out:
        raise dg.Failure(f"cluster field {field_name!r} is in no sample of this evaluation; name a metadata key "
                         f"({', '.join(sorted(keys)) or 'the samples have no metadata'}) or input/context in `cluster:`")
    return out


def _rows_for(inputs: dict[str, Any], run_id: str, config: ComparisonsConfig, metrics: Collection[str] | None) -> list[dict[str, Any]]:
    scores = inputs["scores"]
    rows = compare_models(
        scores, baseline=inputs["baseline"], resources=inputs["resources"], alpha=config.alpha,
        value_ranges=value_ranges(sorted(set(scores["metric"].to_list()))), max_samples=config.max_samples,
        n_resamples=config.n_resamples, n_permutations=config.n_permutations, seed=config.seed, metrics=metrics,
        clusters=inputs.get("clusters"),
    )
    if inputs.get("trials", 1) > 1:  # per-sample flip rates, pass@k / pass^k of binary scores (issue 28)
        from metric_ops.stats.trials import trial_rows

        rows += trial_rows(scores, metrics=metrics, n_resamples=config.n_resamples, seed=config.seed)
    reads_json = json.dumps(inputs["reads"], sort_keys=True)
    now = utcnow()
    names = SCHEMAS["comparisons"].names
    out = []
    for r in rows:
        full = {n: None for n in names}
        full.update({k: v for k, v in r.items() if k in names})
        full.update(
            fingerprint=inputs["fingerprint"], dataset=inputs["row"]["dataset"], detail=detail_json(r.get("detail") or {}),
            reads=reads_json, run_id=run_id, created_at=now,
        )
        out.append(full)
    return out


@dataclass
class ComparisonUpdate:
    """What one ``comparisons`` materialisation computes and writes.

    ``rows``: every comparisons row of the fingerprint after the update (kept + new);
    ``written``: the new rows; ``where``: the rows they replace (None: nothing to write);
    ``recomputed`` / ``dropped`` / ``kept``: score names; ``metric_keys``: the per-score
    input keys recorded in the run's provenance (:func:`assets.analysis_common.metric_input_keys`)."""

    fingerprint: str
    rows: list[dict[str, Any]]
    written: list[dict[str, Any]]
    where: dict[str, Any] | None
    reads: dict[str, Any]
    baseline: str | None
    metric_keys: dict[str, str]
    recomputed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def comparison_update(lake: LakeStore, fingerprint: str, run_id: str, config: ComparisonsConfig | None = None) -> ComparisonUpdate:
    """Recompute the comparisons rows of the score names whose scores (or the settings,
    baseline, model set or resource figures) changed since the last ``comparisons`` run
    of this fingerprint; every other row is kept as stored (same ``run_id``)."""
    from metric_ops.compare import HUMAN_PREFIX

    config = config or ComparisonsConfig()
    inputs = _comparison_inputs(lake, fingerprint)
    fp = inputs["fingerprint"]
    scores = inputs["scores"].filter(~pl.col("metric").str.starts_with(HUMAN_PREFIX))
    context = {"settings": _statistics_settings(config), "baseline": inputs["baseline"], "models": inputs["models"],
               "resources": inputs["resources"], "cluster": inputs["cluster"]}
    keys = metric_input_keys(scores, context)
    stored = lake.read("comparisons", where={"fingerprint": fp}) if lake.exists("comparisons") else pl.DataFrame()
    stored_metrics = set(stored["metric"].drop_nulls().to_list()) if stored.height else set()
    changed, dropped = plan_recompute(keys, previous_metric_keys(lake, "comparisons", fp), stored_metrics, config.incremental)
    written = _rows_for(inputs, run_id, config, changed) if changed else []
    touched = changed | dropped
    kept = [r for r in stored.iter_rows(named=True) if r["metric"] not in touched] if stored.height else []
    return ComparisonUpdate(
        fingerprint=fp, rows=kept + written, written=written,
        where={"fingerprint": fp, "metric": sorted(touched)} if touched else None,
        reads=inputs["reads"], baseline=inputs["baseline"], metric_keys=keys, recomputed=sorted(changed),
        dropped=sorted(dropped), kept=sorted({r["metric"] for r in kept}),
    )


def headline(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """model x metric: mean [95% interval] with the winner starred, for metadata and the CLI."""
    stats = [r for r in rows if r["kind"] == "model_metric"]
    out = []
    for r in stats:
        mean = "∅" if r["mean"] is None else f"{r['mean']:.4g}"
        ci = "" if r["ci_low"] is None else f" [{r['ci_low']:.4g}, {r['ci_high']:.4g}]"
        group = row_detail(r).get("tie_group")
        out.append({"metric": r["metric"], "direction": r["direction"], "model": r["model"],
                    "mean [95% CI]": ("★ " if r["is_winner"] else "") + mean + ci, "n": f"{r['n_scored']}/{r['n_total']}",
                    "tie group": "" if group is None else str(group)})
    return pl.DataFrame(out) if out else pl.DataFrame({"metric": []})


def trials_table(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Repeated trials (``trials: k``), one row per model x score: trials per sample, the
    score's mean with its hierarchical 95% interval, the mean flip rate, samples whose trials
    disagree, and pass@k / pass^k at the largest k for a binary score (empty without trials)."""
    trials = [r for r in rows if r["kind"] == "trials"]
    passk: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if r["kind"] == "pass_k":
            key = (r["model"], r["metric"])
            if row_detail(r).get("k", 0) >= row_detail(passk.get(key, {})).get("k", 0):
                passk[key] = r
    out = []
    for r in sorted(trials, key=lambda r: (r["metric"], r["model"])):
        det, top = row_detail(r), passk.get((r["model"], r["metric"]))
        mean = det.get("score_mean")
        out.append({"metric": r["metric"], "model": r["model"], "k": det.get("k"),
                    "mean [95% CI, trials]": "" if mean is None else f"{mean:.4g} [{r['ci_low']:.4g}, {r['ci_high']:.4g}]",
                    "flip rate": None if r["mean"] is None else round(r["mean"], 4),
                    "unstable": f"{det.get('unstable', 0)}/{r['n_total']}",
                    "pass@k": None if top is None or row_detail(top).get("pass_at_k") is None else round(row_detail(top)["pass_at_k"], 4),
                    "pass^k": None if top is None or top["mean"] is None else round(top["mean"], 4)})
    return pl.DataFrame(out) if out else pl.DataFrame({"metric": []})


def difference_text(row: dict[str, Any]) -> str:
    """A pairwise row as "+2.1 [+0.4, +3.8]": the paired difference (candidate - baseline)
    in the metric's units with its 95% interval ("" when there is no difference)."""
    if row.get("delta") is None:
        return ""
    det = row_detail(row)
    low, high = det.get("delta_ci_low"), det.get("delta_ci_high")
    ci = f" [{low:+.4g}, {high:+.4g}]" if low is not None and high is not None else ""
    return f"{row['delta']:+.4g}{ci}"


def pairwise_table(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The pairwise verdicts (baseline, candidate, metric, delta, p, Holm p, effect, verdict)."""
    pw = [r for r in rows if r["kind"] == "pairwise"]
    return pl.DataFrame(
        [{"baseline": r["baseline"], "candidate": r["model"], "metric": r["metric"], "delta": r["delta"],
          "delta [95% CI]": difference_text(r),
          "detectable": None if row_detail(r).get("mde") is None else float(f"{row_detail(r)['mde']:.4g}"),
          "retention": r["retention"], "test": r["test"], "p": r["p_value"], "p_holm": r["p_holm"],
          "effect": r["effect_size"], "verdict": r["verdict"]} for r in pw],
        schema_overrides={"delta": pl.Float64, "detectable": pl.Float64, "retention": pl.Float64, "p": pl.Float64,
                          "p_holm": pl.Float64, "effect": pl.Float64},
    ) if pw else pl.DataFrame({"metric": []})


def regression_check(
    rows: list[dict[str, Any]], baseline: str | None, fingerprint: str, rules: GateRules | None = None,
    evaluation: str | None = None,
) -> dg.AssetCheckResult:
    """The release gate as an asset check: the same rule as ``facetlake compare
    --fail-on-regression`` (:func:`metric_ops.gates.evaluate_gates`). Fails (severity ERROR)
    when a model is significantly worse than the configured baseline on some metric
    (Holm-adjusted p < alpha, delta in the wrong direction) or a ``gate:`` rule of the spec
    fires (margin, min, max, max_severity, min_trials_passed), naming the gate, the metric, the delta and the
    worst samples; passes otherwise. A configured baseline with no scores under the
    fingerprint fails with severity WARN (the alert cannot run).

    Numeric metadata the UI plots across check executions is keyed per evaluation, model and
    score (``delta · EVALUATION · MODEL · METRIC``), so no plot mixes evaluations or units
    (issue 26, fault 12); ``evaluation`` is the evaluation's name (default the fingerprint prefix)."""
    models = sorted({r["model"] for r in rows if r["kind"] == "model_metric"})
    if baseline is not None and baseline not in models:
        return dg.AssetCheckResult(
            check_name=CHECK_REGRESSION, asset_key="comparisons", passed=False, severity=dg.AssetCheckSeverity.WARN,
            description=f"configured baseline {baseline!r} has no scores under {fingerprint[:12]} (models: {', '.join(models)}); "
                        "materialise its generations and scores, or fix `baseline:` in the spec",
            metadata={"fingerprint": fingerprint, "baseline": baseline},
        )
    if baseline is None:
        return dg.AssetCheckResult(
            check_name=CHECK_REGRESSION, asset_key="comparisons", passed=True,
            description="no baseline configured for this evaluation; add `baseline: MODEL` to its spec to enable the alert",
            metadata={"fingerprint": fingerprint, "baseline": "none"},
        )
    verdict = evaluate_gates(rows, baseline, rules)
    gates = ", ".join(sorted((rules or GateRules()).to_mapping())) or "none declared"
    if verdict.passed:
        return dg.AssetCheckResult(
            check_name=CHECK_REGRESSION, asset_key="comparisons", passed=True,
            description=f"no significant regression against baseline {baseline} over {len(verdict.checked)} model x metric "
                        f"comparisons; gate rules: {gates}",
            metadata={"fingerprint": fingerprint, "baseline": baseline, "comparisons_checked": len(verdict.checked),
                      "gate_rules": gates},
        )
    worst: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r["kind"] == "sample_change" and r["verdict"] == "regressed" and r["baseline"] == baseline:
            worst.setdefault((r["model"], r["metric"]), []).append(
                f"{r['sample_id']} ({r['baseline_mean']:.4g} → {r['mean']:.4g})"
            )
    table = pl.DataFrame(
        [{"gate": f.gate, "model": f.model, "metric": f.metric, "delta": f.delta, "ci_low": f.ci[0], "ci_high": f.ci[1],
          "detectable": f.mde, "p_holm": f.p_holm, "worst samples": ", ".join(worst.get((f.model, f.metric), [])[:5])}
         for f in verdict.fired],
        schema_overrides={"delta": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "detectable": pl.Float64,
                          "p_holm": pl.Float64},
    )
    first = verdict.fired[0]
    regressions = [f for f in verdict.fired if f.gate == "regression"]
    fired_gates = sorted({f.gate for f in verdict.fired})
    summary = "; ".join(f"{f.gate}: {f.message}" for f in verdict.fired[:5])
    return dg.AssetCheckResult(
        check_name=CHECK_REGRESSION, asset_key="comparisons", passed=False, severity=dg.AssetCheckSeverity.ERROR,
        description=(f"{len(regressions)} significant regression(s) against baseline {baseline}; " if regressions else "")
                    + f"gates fired ({', '.join(fired_gates)}): {summary}",
        metadata={
            "fingerprint": fingerprint,
            "baseline": baseline,
            "n_regressions": len(regressions),
            "gates_fired": ", ".join(fired_gates),
            "metric": first.metric,
            **{f"delta · {evaluation or fingerprint[:12]} · {f.model} · {f.metric}": float(f.delta)
               for f in verdict.fired if f.delta is not None},
            "worst_samples": dg.MetadataValue.json({f"{m}|{k}": v for (m, k), v in worst.items()}),
            "regressions": dg.MetadataValue.md(markdown_table(table)),
        },
    )


@delta_asset(
    "comparisons",
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("scores", partition_mapping=EVALUATION_EDGE), dg.AssetDep("generations", partition_mapping=EVALUATION_EDGE)],
    kinds={"polars", "scipy"},
    checks={CHECK_REGRESSION: "the release gate: no model significantly worse than the evaluation's configured baseline "
                              "(Holm-corrected paired test) and no `gate:` rule of its spec breached "
                              "(the rule of `facetlake compare --fail-on-regression`)"},
)
def comparisons(context: dg.AssetExecutionContext, config: ComparisonsConfig, lake: LakeStore):
    """N-model comparison per fingerprint: per-metric mean/median/95% CI and winner, pairwise paired tests (Holm), sample changes, trade-off."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    update = comparison_update(lake, fingerprint, context.run_id, config)
    rows, reads = update.rows, update.reads
    baseline = reads["baseline"]
    fingerprint = reads["fingerprint"]
    dataset = rows[0]["dataset"] if rows else None
    # only the recomputed score names' rows are replaced; the others keep their run_id
    version = lake.replace("comparisons", update.written, update.where) if update.where else lake.version("comparisons")
    stats_rows = [r for r in rows if r["kind"] == "model_metric"]
    winners = [(f"{r['metric']}: {r['model']}", r["mean"]) for r in stats_rows if r["is_winner"]]
    chart = text_bars([(f"{r['metric']} {r['model']}", r["mean"]) for r in stats_rows])
    kinds = {k: sum(r["kind"] == k for r in rows) for k in ("model_metric", "pairwise", "sample_change", "tradeoff", "trials", "pass_k")}
    yield dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint,
            "dataset": dataset,
            "baseline": baseline or "none",
            **table_metadata(lake, "comparisons", len(rows), version),
            "rows_written": len(update.written),
            "recomputed": ", ".join(update.recomputed) or "none (no score changed)",
            **{f"n_{k}": v for k, v in kinds.items()},
            "headline": dg.MetadataValue.md(markdown_table(headline(rows))),
            "pairwise": dg.MetadataValue.md(markdown_table(pairwise_table(rows))),
            "chart": dg.MetadataValue.md("Mean per metric x model (bars scaled per table; ★ winners: "
                                         + (", ".join(w for w, _ in winners) or "n/a, one model") + ")\n\n" + chart),
            "reads": dg.MetadataValue.json(reads),
            **{f"{t}_version_read": v for t, v in reads["table_versions"].items() if v is not None},
        }
    )
    yield regression_check(rows, baseline, fingerprint, GateRules.from_mapping(reads.get("gate")),
                           evaluation=context.partition_key.split("@")[0] if context.has_partition_key else None)
    # the runs row last, once the table, the materialisation and the regression check are stored: its
    # scores marker is what makes these verdicts fresh (assets/freshness.py), so a run killed before it
    # leaves them stale and the next `run` / `score` / the analysis sensor computes them again
    record_run(
        lake, context, asset="comparisons", table="comparisons", version=version, rows=len(update.written), started_at=started,
        fingerprint=fingerprint, dataset=dataset,
        provenance={"read": reads["table_versions"], "reads": reads, "baseline": baseline, "metric_keys": update.metric_keys,
                    "recomputed": update.recomputed, "dropped": update.dropped, "kept": update.kept},
    )
