"""The ``scores`` asset: one row per sample x metric score, per model x fingerprint partition.

With no run config it scores every metric of the evaluation (its spec's and those added
with ``facetlake score``) plus the dataset's human ratings (``human:<name>``), reusing a
metric whose stored rows were computed from identical inputs under the same signature. With ``metrics: [...]`` in the run
config (``facetlake score --metric NAME``, or the Launchpad) it computes only those
metrics and replaces only their rows: no other metric is recomputed and the
``generations`` table is only read.
"""


import hashlib
import json
from typing import Any, Sequence

import dagster as dg
import polars as pl
from tqdm.auto import tqdm

from assets.common import load_samples, markdown_table, partition_parts, record_run
from assets.declare import delta_asset, table_metadata
from metric_ops.identity import parse_signature
from metric_ops.registry import REGISTRY, check_params, merged_params
from metric_ops.scoring.rows import frame_of_rows, human_rating_rows
from metric_ops.scoring.frame import score_frame
from metric_ops.stats.trials import expand_trials, split_trial
from assets.partitions import SAME_KEY, pair_partitions
from resources.catalog import evaluation_row, evaluation_spec, model_spec, utcnow
from resources.catalog.spec import canonical_json
from metric_ops.judged.judging import repeated_judging
from resources.scoring.judges import MAX_BATCH_ROUNDS, batch_judging, judge_session
from resources.backends.batch import BatchPending
from resources.lake.resource import LakeStore
from resources.privacy.outbound import offline_mode
from resources.privacy.session import anonymised_references, offline_refusal_rows
from assets.outbound_scope import budget_group, outbound_scope
from metric_ops.errors import BudgetExhausted
from resources.backends.endpoints import run_spend
from resources.scoring.metric_inputs import MetricInputs
from resources.agents.episodes import episode_scoring_inputs

SCORES_COLUMNS = {
    "model": "model partition key",
    "fingerprint": "configuration fingerprint (64 hex)",
    "dataset": "dataset name",
    "sample_id": "sample id",
    "metric": "score name (human:<rating> for human ratings)",
    "value": "float; null unless status = scored",
    "direction": "maximize / minimize",
    "dimension": "baseline_grounding / epistemic / factual / process",
    "locality": "local / external",
    "status": "scored / unscored / error",
    "detail": "JSON: reasoning, per-claim verdicts, error message",
    "signature": "metric name, version, parameters, library versions",
    "params": 'JSON {"metric": registry name, "version", "params": {key: text}}: the signature\'s identity, structured',
}


CHECK_RANGE = "check_scores_in_declared_range"
CHECK_STATUS = "check_scores_status_counts"


def _range_of(score: str, identity_json: str | None) -> tuple[float, float] | None:
    """The declared (lo, hi) of score ``score`` for the metric and parameters its row's
    ``params`` identity names (BERTScore's range depends on a parameter); None for a score
    no registered metric emits (``human:*`` ratings, ``lm_eval:*`` values)."""
    try:
        identity = json.loads(identity_json) if identity_json else {}
    except ValueError:
        identity = {}
    name = identity.get("metric") or score
    try:
        cls = REGISTRY.get_class(name)
    except KeyError:  # UnknownMetricError is a KeyError
        return None
    try:
        return cls(**check_params(cls, dict(identity.get("params") or {}))).range_of(score)
    except Exception:  # noqa: BLE001 - parameters this version no longer takes: the class's declared range
        return cls.declared_range(score)


def score_checks(stored: pl.DataFrame) -> list[dg.AssetCheckResult]:
    """The two checks of a pair's stored ``scores`` (``stored``: its rows, columns
    ``metric``, ``status``, ``value``, ``params``):

    - every ``scored`` value lies inside its metric's declared range (the tolerance of
      :func:`metric_ops.base.range_slack`), severity ERROR, naming the offending scores;
    - rows per status, per metric, severity WARN: fails when any row is ``error`` (an
      ``unscored`` row means nothing to measure and passes)."""
    from metric_ops.base import range_slack

    outside: dict[str, int] = {}
    scored = stored.filter(pl.col("status") == "scored") if stored.height else stored
    for (metric, params), group in (scored.group_by(["metric", "params"]) if scored.height else []):
        bounds = _range_of(metric, params)
        if bounds is None:
            continue
        lo, hi = bounds
        values = group["value"]
        bad = int(((values < lo - range_slack(lo)) | (values > hi + range_slack(hi))).sum())
        if bad:
            outside[metric] = outside.get(metric, 0) + bad
    counts = {s: int((stored["status"] == s).sum()) if stored.height else 0 for s in ("scored", "unscored", "error")}
    per_metric = (stored.group_by("metric").agg(*((pl.col("status") == s).sum().alias(f"n_{s}") for s in ("scored", "unscored", "error")))
                  .sort("metric") if stored.height else pl.DataFrame())
    return [
        dg.AssetCheckResult(check_name=CHECK_RANGE, asset_key="scores", passed=not outside, severity=dg.AssetCheckSeverity.ERROR,
                            metadata={"n_outside": sum(outside.values()), "outside": dg.MetadataValue.json(outside),
                                      "n_checked": scored.height}),
        dg.AssetCheckResult(check_name=CHECK_STATUS, asset_key="scores", passed=counts["error"] == 0,
                            severity=dg.AssetCheckSeverity.WARN,
                            metadata={**{f"n_{s}": n for s, n in counts.items()},
                                      "per_metric": dg.MetadataValue.md(markdown_table(per_metric))}),
    ]


class MetricRequestConfig(dg.Config):
    """One metric to score, typed: its registry name and the parameters given at rescoring
    time (e.g. ``{judge: "api:gpt-4o-mini@https://api.openai.com/v1"}``), merged over the
    evaluation's ``metric_params``. The CLI resolves ``--metric``/``--param`` into these
    once (:func:`metric_ops.registry.metric_requests`)."""

    name: str
    params: dict[str, Any] = {}


class ScoresConfig(dg.Config):
    """Run config of ``scores``: ``metrics`` empty = every metric of the evaluation (with
    the spec's parameters); otherwise only those, e.g. ``metrics: [{name: chrf}]``."""

    metrics: list[MetricRequestConfig] = []
    # full runs keep a metric whose stored rows were computed from identical inputs under the same signature
    reuse: bool = True


def inputs_digest(samples: list, outputs: list[str | None], annotations: pl.DataFrame | None = None) -> str:
    """SHA-256 of everything a partition's scores are computed from besides the metric:
    each sample (id, input, references, context, ratings), its output (None for a failed
    generation) and its annotation values. Equal digests and an equal metric signature
    give equal scores, so a full re-run reuses them (content-addressed reuse)."""
    digest = hashlib.sha256()
    for sample, output in zip(samples, outputs):
        digest.update(canonical_json([sample.sample_id, sample.input, list(sample.references), list(sample.context),
                                      {k: (None if v != v else v) for k, v in sample.ratings.items()}, output]).encode())
    if annotations is not None and annotations.height:
        for row in annotations.select("annotator", "sample_id", "value", "matched").sort(["annotator", "sample_id"]).iter_rows():
            digest.update(canonical_json(list(row)).encode())
    return digest.hexdigest()


def reusable_signatures(lake: LakeStore, model: str, fingerprint: str, digest: str) -> set[str]:
    """Signatures whose stored rows in this partition were computed by a scores run over
    inputs with this ``digest`` (``runs`` provenance ``inputs_sha256`` and ``computed``)."""
    if not lake.exists("runs") or not lake.exists("scores"):
        return set()
    runs = lake.read("runs", where={"asset": "scores", "model": model, "fingerprint": fingerprint},
                     columns=["run_id", "provenance"])
    good_runs: dict[str, set[str]] = {}
    for r in runs.iter_rows(named=True):
        prov = json.loads(r["provenance"] or "{}")
        if prov.get("inputs_sha256") == digest:
            good_runs[r["run_id"]] = set(prov.get("computed") or [])
    if not good_runs:
        return set()
    stored = lake.read("scores", where={"model": model, "fingerprint": fingerprint}, columns=["signature", "run_id"]).unique()
    out = set()
    for sig, group in stored.group_by("signature"):
        run_ids = set(group["run_id"].to_list())
        if run_ids and all(rid in good_runs and sig[0] in good_runs[rid] for rid in run_ids):
            out.add(sig[0])
    return out


def _batch_rounds(metric: Any, samples: list, outputs: list, frame: pl.DataFrame, batches: Any, cache: Any
                  ) -> tuple[pl.DataFrame, set[str]]:
    """Judge calls queued for the Batch API (a judge endpoint in ``runtime.mode: batch``): send
    them, wait, and score the waiting samples again from the replies now in the judge cache,
    up to :data:`~resources.scoring.judges.MAX_BATCH_ROUNDS` rounds (G-Eval: its steps, then its
    ratings). Returns the frame with the re-scored rows and the samples still waiting (their
    batch not finished within ``runtime.batch_wait_s``; ``batches.pending`` says which)."""
    batches.pending = None
    for _ in range(MAX_BATCH_ROUNDS):
        waiting = set(getattr(metric, "deferred", None) or ())
        if not waiting:
            return frame, set()
        batches.pending = batches.send(cache)
        if batches.pending is not None:
            return frame, waiting
        metric.deferred = set()
        idx = [i for i, s in enumerate(samples) if s.sample_id in waiting]
        again = score_frame(metric, [samples[i] for i in idx], [outputs[i] for i in idx])
        frame = pl.concat([frame.filter(~pl.col("sample_id").is_in(sorted(waiting))), again], how="vertical")
    return frame, set(getattr(metric, "deferred", None) or ())


def score_partition(
    lake: LakeStore, model: str, fingerprint: str, metrics: Sequence[Any] | None, run_id: str, reuse: bool = True,
) -> tuple[pl.DataFrame, dict[str, Any] | None, dict[str, Any]]:
    """Score the stored generations of one partition.

    ``metrics``: requests (anything with ``name`` and ``params``: :class:`MetricRequestConfig`,
    :class:`metric_ops.registry.MetricRequest`) or plain names; None scores the evaluation's whole metric set (its spec's metrics, those
    added with ``facetlake score``, and the dataset's human ratings for a
    ``precomputed:column=`` model); with ``reuse`` a metric whose stored rows were computed
    from identical inputs under the same signature is kept, not recomputed. Returns the
    new score rows (a polars frame in the ``scores`` schema), the ``where`` clause whose rows they replace (None when nothing was
    recomputed) and a report ``{"computed": [signatures], "reused": [signatures],
    "inputs_sha256": digest}``. Raises
    :class:`~metric_ops.registry.UnknownMetricError` for an unknown metric name.
    """
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    samples = load_samples(lake, fingerprint)
    samples = anonymised_references(lake, samples, model, fingerprint, spec.privacy)  # privacy.references
    episodic = episode_scoring_inputs(lake, model, fingerprint, samples)  # agent episodes: one item per (task, trial), issue 17
    if episodic is not None:
        samples, outputs = episodic
    else:
        samples = expand_trials(samples, getattr(spec, "trials", 1))  # repeated trials: one item per <sample>#<trial> (issue 28)
        gens = lake.read("generations", where={"model": model, "fingerprint": fingerprint}, columns=["sample_id", "output", "status"])
        if gens.height == 0:
            raise dg.Failure(f"no generations stored for model {model!r} under fingerprint {fingerprint[:12]}; materialise generations first")
        outputs_by_id = dict(zip(gens["sample_id"].to_list(),
                                 gens.select(pl.when(pl.col("status") == "ok").then(pl.col("output"))).to_series().to_list()))
        # repeat: judging stores one output per sample; each of its trials is judged on it
        by_base = getattr(spec, "trial_repeat", "both") == "judging"
        outputs = [outputs_by_id.get(split_trial(s.sample_id)[0] if by_base else s.sample_id) for s in samples]
    metric_inputs = MetricInputs(lake, model, fingerprint, samples, outputs)
    requested = [(m, {}) if isinstance(m, str) else (m.name, dict(m.params)) for m in (metrics or spec.metrics)]
    overrides = {REGISTRY.resolve(name): params for name, params in requested}  # fail fast on unknown names, before any work
    names = list(overrides)
    annotations = lake.read("annotations", where={"model": model, "fingerprint": fingerprint}) if lake.exists("annotations") else None
    digest = inputs_digest(samples, outputs, annotations)
    reusable = reusable_signatures(lake, model, fingerprint, digest) if (reuse and not metrics) else set()
    frames: list[pl.DataFrame] = []  # one columnar frame per metric: no Python dict per score row
    emitted: list[str] = []
    report: dict[str, Any] = {"computed": [], "reused": [], "inputs_sha256": digest}
    # judged metrics read/write the lake's judge_cache (issue 4); with repeated judging each
    # trial's verdict has its own cache key, so trials are independent calls (issue 28)
    fresh = getattr(spec, "trials", 1) > 1 and getattr(spec, "trial_repeat", "both") != "generation"
    with judge_session(lake) as cache, repeated_judging(fresh), batch_judging(lake, fingerprint, model, run_id) as batches:
        for name in names:
            # annotation values / token log-probabilities where the metric asks for them (issue 7)
            metric, metric_samples, metric_outputs = metric_inputs.prepare(name, merged_params(spec.metric_params, name, overrides[name]))
            signature = metric.signature()
            if signature in reusable:
                report["reused"].append(signature)
                continue
            report["computed"].append(signature)
            emitted.extend(metric.emitted())
            if metric.locality == "external" and offline_mode():  # refused before any client or socket
                frames.append(frame_of_rows(offline_refusal_rows(metric, metric_samples)))
                continue
            with tqdm(total=len(samples), desc=f"{name} {model}", leave=False, disable=None) as bar:  # None: no bar in a CI log
                frame = score_frame(metric, metric_samples, metric_outputs, progress=bar.update)
            frame, waiting = _batch_rounds(metric, metric_samples, metric_outputs, frame, batches, cache)
            if waiting:  # judge calls still in a Batch API batch: no rows yet, the metric is not complete
                frame = frame.filter(~pl.col("sample_id").is_in(sorted(waiting)))
                report["computed"].remove(signature)
                report.setdefault("partial", []).append(signature)
                report.setdefault("waiting", {})[name] = len(waiting)
                report["batch_pending"] = report.get("batch_pending") or batches.pending
            unsent = getattr(metric, "unsent", None)
            if unsent:  # the run's budget refused these samples' judge calls: no rows (not errors), and
                # the metric is not complete, so a re-run computes it again (its paid calls from judge_cache)
                frame = frame.filter(~pl.col("sample_id").is_in(sorted(unsent)))
                report["computed"].remove(signature)
                report.setdefault("partial", []).append(signature)
                report.setdefault("unsent", {})[name] = len(unsent)
                report["budget_stop"] = metric.budget_stop
            frames.append(frame)
    # human ratings rate the dataset's own output: they are scores only of a model whose
    # outputs are that output (precomputed:column=...), never of a live or heuristic model (issue 8)
    if not metrics and model_spec(lake, model, fingerprint).startswith("precomputed:column="):
        human = human_rating_rows(samples)
        human_signatures = sorted({r["signature"] for r in human})
        if human_signatures and all(sig in reusable for sig in human_signatures):
            report["reused"].extend(human_signatures)
        else:
            frames.append(frame_of_rows(human))
            report["computed"].extend(human_signatures)
            emitted.extend(sorted({r["metric"] for r in human}))
    # lm-eval's own per-sample metric values, as lm_eval:<metric>[,<filter>] (issue 18)
    if not metrics and model_spec(lake, model, fingerprint).startswith("lm_eval:"):
        from resources.lm_eval.bridge import stored_score_rows

        lm_rows = stored_score_rows(lake, model, fingerprint)
        frames.append(frame_of_rows(lm_rows))
        report["computed"].extend(sorted({r["signature"] for r in lm_rows}))
        emitted.extend(sorted({r["metric"] for r in lm_rows}))
    now = utcnow()
    rows = (pl.concat(frames, how="vertical") if frames else frame_of_rows([])).with_columns(
        model=pl.lit(model, pl.String), fingerprint=pl.lit(fingerprint, pl.String), dataset=pl.lit(dataset, pl.String),
        run_id=pl.lit(run_id, pl.String), created_at=pl.lit(now, pl.Datetime("us", "UTC")),
    )
    report["calls_reused"] = cache.hits  # judge replies read from judge_cache instead of sent again
    report["batch_ids"] = batches.batch_ids
    where: dict[str, Any] | None = {"model": model, "fingerprint": fingerprint, "metric": sorted(set(emitted))} if emitted else None
    return rows, where, report


def score_metadata(stored: pl.DataFrame, rows: pl.DataFrame | list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of the rows the partition holds after the write (``dagster/row_count`` equals
    what is stored, not what this run wrote) and a per-metric Markdown table of this run's
    rows, for materialisation metadata."""
    if isinstance(rows, pl.DataFrame):
        frame = rows.select("metric", "value", "status")
    else:
        frame = pl.DataFrame(rows, schema_overrides={"value": pl.Float64}) if rows else pl.DataFrame({"metric": [], "value": [], "status": []})
    held = {s: int((stored["status"] == s).sum()) if stored.height else 0 for s in ("scored", "unscored", "error")}
    counts = {s: int((frame["status"] == s).sum()) if frame.height else 0 for s in ("scored", "unscored", "error")}
    table = (
        frame.group_by("metric")
        .agg(
            pl.col("value").mean().alias("mean"),
            (pl.col("status") == "scored").sum().alias("n_scored"),
            pl.len().alias("n_total"),
            (pl.col("status") == "error").sum().alias("n_error"),
        )
        .sort("metric")
        if frame.height
        else frame
    )
    return {
        "dagster/row_count": stored.height,
        "n_scored": held["scored"],
        "n_unscored": held["unscored"],
        "n_error": held["error"],
        "metrics_stored": stored["metric"].n_unique() if stored.height else 0,
        "written_scored": counts["scored"],
        "written_error": counts["error"],
        "per_metric": dg.MetadataValue.md(markdown_table(table)),
    }


@delta_asset(
    "scores",
    partitions_def=pair_partitions,
    deps=["generations", "annotations", dg.AssetDep("episodes", partition_mapping=SAME_KEY)],  # episodes: agent pairs only
    kinds={"polars"},
    columns=SCORES_COLUMNS,
    checks={
        CHECK_RANGE: "every scored value inside its metric's declared range (Metric.range_of)",
        CHECK_STATUS: "rows per status (scored / unscored / error) and metric; fails on any error row",
    },
)
@outbound_scope  # anonymiser + outbound ledger for judge calls (privacy issue)
def scores(context: dg.AssetExecutionContext, config: ScoresConfig, lake: LakeStore) -> dg.MaterializeResult:
    """Metric scores per sample (value, direction, dimension, status, detail, signature), partitioned by (evaluation, model) pair."""
    started = utcnow()
    model, fingerprint = partition_parts(context)
    generations_version = lake.version("generations")
    rows, where, report = score_partition(lake, model, fingerprint, config.metrics or None, context.run_id,
                                          reuse=config.reuse)
    version = lake.replace("scores", rows, where) if where else lake.version("scores")
    if report["reused"]:
        context.log.info(f"reused {len(report['reused'])} metric(s) computed from identical inputs: "
                         + ", ".join(parse_signature(sig)["metric"] for sig in report["reused"]))
    stored = lake.read("scores", where={"model": model, "fingerprint": fingerprint}, columns=["metric", "status", "value", "params"])
    spend = run_spend()
    stop = report.pop("budget_stop", None)
    pending = report.pop("batch_pending", None)
    record_run(
        lake, context, asset="scores", table="scores", version=version, rows=rows.height, started_at=started,
        model=model, fingerprint=fingerprint, dataset=evaluation_row(lake, fingerprint)["dataset"],
        provenance={"metrics": [m.name for m in config.metrics] or "all",
                    "params": {m.name: m.params for m in config.metrics if m.params}, "signatures": sorted(rows["signature"].unique().to_list()),
                    "computed": report["computed"], "reused": report["reused"], "inputs_sha256": report["inputs_sha256"],
                    "spend": spend, "budget_group": budget_group(context), "calls_reused": report["calls_reused"],
                    **({"partial": report["partial"], "unsent": report["unsent"], "budget_stop": str(stop)} if stop else {}),
                    **({"partial": report["partial"], "waiting": report["waiting"]} if report.get("waiting") else {}),
                    **({"batch_ids": report["batch_ids"]} if report["batch_ids"] else {}),
                    "read": {"generations": generations_version, "samples": lake.version("samples"),
                             **({"episodes": lake.version("episodes")} if lake.exists("episodes") else {})}},
    )
    if report.get("waiting"):  # after the finished rows and the run's provenance row are stored
        waiting = ", ".join(f"{n} sample(s) of {name}" for name, n in report["waiting"].items())
        raise BatchPending(f"{model}: judge calls wait in the Batch API for {waiting}. "
                           + (str(pending) if pending else f"(more than {MAX_BATCH_ROUNDS} rounds of judge calls)"))
    if stop is not None:  # after the finished rows and the run's provenance row are stored
        undone = ", ".join(f"{n} sample(s) of {name}" for name, n in report["unsent"].items())
        raise BudgetExhausted(
            f"{model}: {stop} — this run sent {spend['calls']} judge call(s) ({spend['tokens']:,} tokens, {spend['usd']} USD) "
            f"and reused {report['calls_reused']} stored repl{'y' if report['calls_reused'] == 1 else 'ies'}; not scored: {undone}. "
            "Re-run with a larger budget (--budget calls=N,tokens=N,usd=N or budget: in the spec): paid calls are not sent again",
            stop.spent, stop.limits)
    return dg.MaterializeResult(
        metadata={"fingerprint": fingerprint, "model": model, "delta_version": version,
                  "calls_sent": spend["calls"], "calls_reused": report["calls_reused"], "spend_tokens": spend["tokens"],
                  "spend_usd": spend["usd"],
                  "generations_version_read": generations_version,
                  "rows_written": rows.height, "metrics_computed": len(report["computed"]), "metrics_reused": len(report["reused"]),
                  "reused": ", ".join(parse_signature(sig)["metric"] for sig in report["reused"]) or "none",
                  **score_metadata(stored, rows), **table_metadata(lake, "scores", stored.height, version)},
        check_results=score_checks(stored),
    )
