"""The ``generations`` asset: model outputs per model x fingerprint partition.

Live backends (hf, vllm, api) write finished outputs in batches and resume: see
resources/backends/planning.py. One multi-asset writes three tables for the same pair
partition: ``generations``, ``token_logprobs`` (live backends with log-probabilities) and
``lm_eval_responses`` (lm-eval models); each is materialised on every run with its true row
count (0 for a backend that writes none). Cost and performance go to the ``runs`` provenance
row and the materialisation metadata. Asset checks: the error rate, and every registered
sample present.
"""


import time

import dagster as dg
from tqdm.auto import tqdm

from assets.common import load_samples, partition_parts, record_run
from assets.declare import delta_multi_asset, delta_spec, table_metadata
from assets.partitions import EVALUATION_EDGE, pair_partitions
from resources.prompting.adapters import AdapterError, make_adapter
from resources.backends import BackendError, GenerationRequest, GenerationResult, ModelBackends
from resources.backends.batch import BatchCalls, BatchPending
from metric_ops.errors import BudgetExhausted
from resources.backends.endpoints import batch_price, run_spend
from resources.catalog import evaluation_row, evaluation_spec, model_spec, utcnow
from resources.backends.planning import compact_partition, load_prices, performance, plan_generation, price_for
from resources.lake.resource import LakeStore
from resources.privacy.ledger import reconcile_intents
from resources.privacy.outbound import refuse_if_offline
from assets.outbound_scope import budget_group, outbound_scope
from assets.lease_scope import lease_scope
from resources.backends.logprobs import table_rows
from metric_ops.stats.trials import expand_trials

GENERATIONS_COLUMNS = {
    "model": "model partition key",
    "fingerprint": "configuration fingerprint",
    "sample_id": "sample id",
    "output": "raw model output (null on error)",
    "status": "ok / error",
    "error": "error message",
    "backend": "backend kind",
    "prompt": "prompt sent",
    "latency_s": "seconds the request waited (batch wall time for batched backends)",
    "tokens_in": "prompt tokens",
    "tokens_out": "generated tokens",
}


class GenerationsConfig(dg.Config):
    """Run config of ``generations``: by default stored outputs are kept and only missing
    (and failed) samples are generated."""

    regenerate: bool = False
    retry_errors: bool = True


def _frame(pending: list, model: str, fingerprint: str, dataset: str, backend: str, run_id: str):
    """``generations`` rows of (request, result) pairs as a polars frame, column by column."""
    import polars as pl

    n = len(pending)
    results = [r for _, r in pending]
    return pl.DataFrame({
        "model": [model] * n, "fingerprint": [fingerprint] * n, "dataset": [dataset] * n,
        "sample_id": [r.sample_id for r in results], "output": [r.output for r in results],
        "status": [r.status for r in results], "error": [r.error for r in results], "backend": [backend] * n,
        "prompt": [q.prompt for q, _ in pending], "latency_s": [r.latency_s for r in results],
        "tokens_in": [r.tokens_in for r in results], "tokens_out": [r.tokens_out for r in results],
        "run_id": [run_id] * n, "created_at": [utcnow()] * n,
    }, schema_overrides={"output": pl.String, "error": pl.String, "latency_s": pl.Float64, "tokens_in": pl.Int64,
                         "tokens_out": pl.Int64, "created_at": pl.Datetime("us", "UTC")})


# the tables the generations step writes beside its own, for the same pair partition
SIDE_TABLES = {
    "token_logprobs": "Per generated token: text, log-probability, character span, top alternatives (live backends).",
    "lm_eval_responses": "lm-eval's raw and filtered responses, filter, log-likelihoods per doc (lm-eval models).",
}
CHECK_ERROR_RATE = "check_generations_error_rate"
CHECK_COMPLETE = "check_generations_every_sample"


@delta_multi_asset(
    "generations",
    partitions_def=pair_partitions,
    specs=[
        delta_spec("generations", description="Model outputs, one row per sample, partitioned by model x fingerprint "
                   "(precomputed or live backends).", columns=GENERATIONS_COLUMNS,
                   deps=[dg.AssetDep("samples", partition_mapping=EVALUATION_EDGE), "evaluation_models"]),
        *(delta_spec(table, description=text, deps=["generations"]) for table, text in SIDE_TABLES.items()),
    ],
    checks={
        CHECK_ERROR_RATE: "share of samples whose generation failed, at most runtime.max_error_rate (default 0)",
        CHECK_COMPLETE: "every registered sample (x trial) has a row: an output or an error",
    },
)
@lease_scope  # one live writer per (fingerprint, model): a second run waits, then reuses (issue 16)
@outbound_scope  # anonymiser + outbound ledger for API calls (privacy issue)
def generations(
    context: dg.AssetExecutionContext, config: GenerationsConfig, lake: LakeStore, backends: ModelBackends
):
    """Model outputs, one row per sample, partitioned by model x fingerprint (precomputed or live backends)."""
    started = utcnow()
    t_start = time.perf_counter()
    model, fingerprint = partition_parts(context)
    # intents an earlier (crashed) run of this partition left open, settled from what it stored;
    # the lease is held, so no other run of the partition is sending (issue 26, fault 6)
    reconciled = reconcile_intents(lake, fingerprint, model)
    if reconciled:
        context.log.info(f"{model}: outbound ledger intents of earlier runs settled: "
                         + ", ".join(f"{n} {status}" for status, n in sorted(reconciled.items())))
    ledger_meta = {f"ledger_reconciled_{status}": n for status, n in reconciled.items()}
    spec = evaluation_spec(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    spec_string = model_spec(lake, model, fingerprint)
    backend = backends.backend_for(spec_string, spec.runtime)
    refuse_if_offline("backend", spec_string, backend.locality)  # before any client or socket
    samples = load_samples(lake, fingerprint)
    ids = _check_output_ids(context, backend, model, samples)
    adapter = make_adapter(spec.adapter, samples)
    if getattr(spec, "trial_repeat", "both") != "judging":  # k requests per sample, ids <sample>#<trial> (issue 28)
        samples = expand_trials(samples, getattr(spec, "trials", 1))
    requests, failed = [], []
    for sample in samples:
        try:
            requests.append(adapter.request(sample))
        except AdapterError as exc:  # this sample does not fit the adapter: an error row, the run goes on
            failed.append((GenerationRequest(sample=sample, prompt=""), GenerationResult(sample.sample_id, None, "error", str(exc))))
    live = backend.live
    if not live and not config.regenerate:
        reused = _unchanged_outputs(lake, model, fingerprint, spec_string, backend.identity(), len(samples))
        if reused is not None:  # content-addressed reuse: same source, same samples -> same rows
            context.log.info(f"{model}: outputs unchanged since run {reused['run_id'][:8]} (same source and samples); reused")
            return _results(lake, model, fingerprint, samples, spec.runtime, _stored(lake, model, fingerprint), {
                "fingerprint": fingerprint, "model": model, "backend": backend.kind, "reused": True,
                "reused_from_run": reused["run_id"], **table_metadata(lake, "generations", reused["rows"]), "n_error": reused["n_error"],
                "n_ok": reused["rows"] - reused["n_error"], "n_generated": 0,
                "model_identity": dg.MetadataValue.json(backend.identity()), **ids, **ledger_meta,
            })
    plan = plan_generation(lake, model, fingerprint, spec_string, live, requests, config.regenerate, config.retry_errors)
    batch_size = max(1, int(spec.runtime.get("write_batch_size", 16))) if live else max(1, len(requests))

    def row(request: GenerationRequest, result: GenerationResult) -> dict:
        return {
            "model": model, "fingerprint": fingerprint, "dataset": dataset, "sample_id": result.sample_id,
            "output": result.output, "status": result.status, "error": result.error, "backend": backend.kind,
            "prompt": request.prompt, "latency_s": result.latency_s, "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out, "run_id": context.run_id, "created_at": utcnow(),
        }

    if plan.reused:
        lake.append("generations", [{**r, "fingerprint": fingerprint} for r in plan.reused.values()])
        if plan.reused_tokens:
            lake.append("token_logprobs", plan.reused_tokens)
    generated: list[GenerationResult] = []
    generate_s = 0.0
    pending: list[tuple[GenerationRequest, GenerationResult]] = list(failed)
    loglik = [r for r in plan.todo if r.continuations]
    gen = [r for r in plan.todo if not r.continuations]
    stopped: BudgetExhausted | BatchPending | None = None  # the budget refused a call / a batch is still running (issue 30)
    streams = bool(getattr(backend, "streams", False))  # results arrive while later requests are in flight
    batched = BatchCalls(lake, backend, fingerprint, model, context.run_id) if getattr(backend, "batch_mode", False) else None
    with tqdm(total=len(plan.todo), desc=f"generate {model}", leave=False, disable=None) as bar:
        for group, scoring in ((gen, False), (loglik, True)):
            # a streaming backend gets the whole group (its endpoint keeps `concurrency` calls in
            # flight, no barrier per batch); rows are still written every batch_size results
            step = max(1, len(group)) if streams and not scoring else batch_size
            for start in range(0 if stopped is None else len(group), len(group), step):
                batch = group[start : start + step]
                by_id = {r.sample.sample_id: r for r in batch}
                t0 = time.perf_counter()
                try:
                    if scoring:
                        results = backend.loglikelihood(batch, spec.generation)
                    elif batched is not None:  # the Batch API: resume open batches, submit the rest, collect
                        results = (c.result for c in batched.generations(batch, spec.generation))
                    else:
                        results = backend.generate(batch, spec.generation)
                    for i, result in enumerate(results):
                        request = by_id.get(result.sample_id) or batch[i]
                        result = adapter.finalize(request, result)
                        generated.append(result)
                        pending.append((request, result))
                        bar.update(1)
                        if live and len(pending) >= batch_size:  # persist as we go: a killed run loses at most one batch
                            _write(lake, pending, row, model, fingerprint, context.run_id)
                            pending = []
                except (BudgetExhausted, BatchPending) as exc:
                    stopped = exc
                generate_s += time.perf_counter() - t0
                if live:
                    _write(lake, pending, row, model, fingerprint, context.run_id)
                    pending = []
                if stopped is not None:
                    break
    if live:
        _write(lake, pending, row, model, fingerprint, context.run_id)
        version, n_rows = compact_partition(lake, model, fingerprint)
    else:  # one columnar frame (no dict per row) in one commit
        version = lake.replace("generations", _frame(pending, model, fingerprint, dataset, backend.kind, context.run_id),
                               {"model": model, "fingerprint": fingerprint})
        n_rows = len(pending)
    if backend.kind == "lm_eval":  # lm-eval's raw/filtered responses, filters, log-likelihoods (issue 18)
        from resources.lm_eval.bridge import write_responses

        write_responses(lake, backend, model, fingerprint, dataset, samples, context.run_id)
    stored = _stored(lake, model, fingerprint)  # read once: the error count here, the checks in _results
    n_err = int((stored["status"] == "error").sum()) if stored.height else 0
    identity = backend.identity()
    wall = time.perf_counter() - t_start
    price = price_for(load_prices(spec.runtime), model, getattr(backend, "model", None), spec_string)
    if batched is not None:  # the Batch API's price where the table gives one (batch_*_per_1m or batch_discount)
        price = batch_price(price)
    perf = performance(generated, generate_s, wall, identity, price, backend.measures_throughput)
    spend = run_spend()
    resume = {"kept": len(plan.kept), "reused": len(plan.reused), "reused_from": plan.reused_from,
              "generated": len(generated), "stale_model_spec": plan.stale}
    record_run(
        lake, context, asset="generations", table="generations", version=version, rows=n_rows, started_at=started,
        model=model, fingerprint=fingerprint, dataset=dataset,
        provenance={"model_spec": backend.spec, "model_identity": identity, "generation": spec.generation, "wall_s": wall,
                    "samples_version": lake.version("samples"), "performance": perf, "resume": resume,
                    "adapter": spec.adapter, "spend": spend, "budget_group": budget_group(context), "calls_reused": (len(plan.kept) + len(plan.reused)) if live else 0,
                    **({"budget_stop": str(stopped)} if isinstance(stopped, BudgetExhausted) else {}),
                    **({"batches": {"submitted": batched.submitted, "collected": batched.collected}} if batched is not None else {})},
    )
    if isinstance(stopped, BatchPending):
        raise stopped
    if stopped is not None:  # after the rows and the run's provenance row are stored
        undone = len(plan.todo) - len(generated)
        raise BudgetExhausted(
            f"{model}: {stopped} — this run sent {spend['calls']} call(s) ({spend['tokens']:,} tokens, {spend['usd']} USD); "
            f"{len(generated)} sample(s) generated and kept, {undone} not generated. Re-run with a larger budget "
            "(--budget calls=N,tokens=N,usd=N or budget: in the spec) to generate only the rest",
            stopped.spent, stopped.limits)
    cost = perf["cost"]
    return _results(
        lake, model, fingerprint, samples, spec.runtime, stored,
        {
            "fingerprint": fingerprint,
            "model": model,
            "backend": backend.kind,
            "model_identity": dg.MetadataValue.json(identity),
            **table_metadata(lake, "generations", n_rows, version),
            "n_ok": n_rows - n_err,
            "n_error": n_err,
            "n_generated": len(generated),
            "n_kept": len(plan.kept),
            "n_reused": len(plan.reused),
            "calls_sent": spend["calls"],
            "calls_reused": (len(plan.kept) + len(plan.reused)) if live else 0,
            "spend_tokens": spend["tokens"],
            "spend_usd": spend["usd"],
            **({"batch_ids": ", ".join(batched.submitted + [b for b in batched.collected if b not in batched.submitted]) or "none"}
               if batched is not None else {}),
            "wall_s": round(wall, 3),
            "tokens_in": perf["tokens_in"],
            "tokens_out": perf["tokens_out"],
            # no throughput for precomputed outputs (reading a file measures nothing)
            **({"tokens_per_s": round(perf["tokens_per_s"], 2)} if perf["tokens_per_s"] is not None else {}),
            "latency_mean_s": round(perf["latency_s"]["mean"], 4) if perf["latency_s"]["mean"] is not None else 0.0,
            "latency_p95_s": round(perf["latency_s"]["p95"], 4) if perf["latency_s"]["p95"] is not None else 0.0,
            "model_parameters": perf["model_parameters"] or 0,
            "cost": round(cost["total"], 6) if cost else 0.0,
            "cost_currency": cost["currency"] if cost else "no price table",
            "performance": dg.MetadataValue.json(perf),
            **ids,
            **ledger_meta,
        },
    )


def _check_output_ids(context: dg.AssetExecutionContext, backend, model: str, samples: list) -> dict[str, int]:
    """Compare a precomputed outputs file's sample ids with the stored samples' (issue 26,
    fault 8): none matching is a ``dg.Failure`` before anything is written (the file and
    the fix named); a partial match is logged as a warning and scored on the matching
    samples (ids only in the file are ignored, samples without an output are error rows,
    unscored). Returns the counts for the materialisation metadata (empty for other backends)."""
    match_ids = getattr(backend, "match_ids", None)
    if match_ids is None:
        return {}
    try:
        match = match_ids([s.sample_id for s in samples])
    except BackendError as exc:
        raise dg.Failure(f"model {model}: {exc}") from None
    if match is None:
        return {}
    if match.message():
        # a CLI run printed this warning when it registered the evaluation (pipelines/runs/register.py)
        cli = str(context.run.tags.get("facetlake/source", "")).startswith("cli")
        (context.log.info if cli else context.log.warning)(f"model {model}: {match.message()}")
    return {"n_unknown_output_ids": len(match.unknown), "n_samples_without_output": len(match.missing)}


def _unchanged_outputs(lake: LakeStore, model: str, fingerprint: str, spec_string: str, identity: dict,
                       n_samples: int) -> dict | None:
    """The last generations run of this partition when its outputs can be reused as they
    are: same model spec and identity (e.g. the precomputed file's SHA-256), and the
    partition still holds one row per sample. None otherwise."""
    import json

    if not lake.exists("runs") or not lake.exists("generations"):
        return None
    runs = lake.read("runs", where={"asset": "generations", "model": model, "fingerprint": fingerprint},
                     columns=["run_id", "finished_at", "provenance"])
    if runs.height == 0:
        return None
    last = runs.sort("finished_at").row(-1, named=True)
    prov = json.loads(last["provenance"] or "{}")
    if prov.get("model_spec") != spec_string or prov.get("model_identity") != json.loads(json.dumps(identity, default=str)):
        return None
    stored = lake.read("generations", where={"model": model, "fingerprint": fingerprint}, columns=["sample_id", "status"])
    if stored.height != n_samples or stored["sample_id"].n_unique() != n_samples:
        return None
    return {"run_id": last["run_id"], "rows": stored.height, "n_error": int((stored["status"] == "error").sum())}


def _write(lake: LakeStore, pending: list, row, model: str, fingerprint: str, run_id: str) -> None:
    """Append one batch of generation rows and their token log-probabilities."""
    if not pending:
        return
    lake.append("generations", [row(q, r) for q, r in pending])
    tokens = []
    for _, result in pending:
        records = result.extra.get("token_logprobs")
        if result.status == "ok" and records:
            tokens.extend(table_rows(records, model=model, fingerprint=fingerprint, sample_id=result.sample_id, run_id=run_id))
    if tokens:
        lake.append("token_logprobs", tokens)


def _stored(lake: LakeStore, model: str, fingerprint: str):
    """The pair's stored generation rows, the columns the checks read."""
    return lake.read("generations", where={"model": model, "fingerprint": fingerprint},
                     columns=["sample_id", "status", "error", "created_at"])


def _results(lake: LakeStore, model: str, fingerprint: str, samples: list, runtime: dict, stored,
             metadata: dict) -> tuple[dg.MaterializeResult, ...]:
    """The multi-asset's results: ``generations`` with ``metadata`` and the two checks of
    ``stored`` (the pair's rows, :func:`_stored`), then ``token_logprobs`` and
    ``lm_eval_responses`` for this pair partition with their true row counts (0 for a
    backend that writes none, e.g. precomputed outputs: the UI never shows a pair's side
    table as missing for ever)."""
    sides = []
    for side in SIDE_TABLES:
        n_side = lake.read(side, where={"model": model, "fingerprint": fingerprint}, columns=["sample_id"]).height if lake.exists(side) else 0
        sides.append(dg.MaterializeResult(asset_key=side, metadata={
            **table_metadata(lake, side, n_side), **({} if n_side else {"note": "this pair's backend writes no rows here"})}))
    checks = generation_checks(stored, [s.sample_id for s in samples], float(runtime.get("max_error_rate", 0.0) or 0.0))
    return (dg.MaterializeResult(asset_key="generations", metadata=metadata, check_results=checks), *sides)


def generation_checks(stored, expected_ids: list[str], max_error_rate: float = 0.0) -> list[dg.AssetCheckResult]:
    """The two checks of a pair's ``generations`` (``stored``: its rows, columns ``sample_id``,
    ``status``, ``error``, optionally ``created_at``; ``expected_ids``: the registered sample ids, trial-expanded):

    - the error rate (failed rows / rows, in [0, 1]) is at most ``max_error_rate`` (the
      spec's ``runtime.max_error_rate``, default 0), severity WARN, with the first errors;
    - every expected id has a row (an output or an error), severity ERROR: a missing row
      means a sample was silently dropped, which no backend may do."""
    if "created_at" in stored.columns:
        stored = stored.sort("created_at")
    latest = stored.unique(subset=["sample_id"], keep="last", maintain_order=True) if stored.height else stored
    n = latest.height
    errors = latest.filter(latest["status"] == "error") if n else latest
    rate = errors.height / n if n else 0.0
    first = [f"{r['sample_id']}: {str(r['error'] or '')[:120]}" for r in errors.head(5).iter_rows(named=True)]
    missing = sorted(set(expected_ids) - set(latest["sample_id"].to_list() if n else []))
    return [
        dg.AssetCheckResult(check_name=CHECK_ERROR_RATE, asset_key="generations", passed=rate <= max_error_rate,
                            severity=dg.AssetCheckSeverity.WARN,
                            metadata={"error_rate": round(rate, 6), "n_error": errors.height, "n_rows": n,
                                      "max_error_rate": max_error_rate, "first_errors": dg.MetadataValue.json(first)}),
        dg.AssetCheckResult(check_name=CHECK_COMPLETE, asset_key="generations", passed=not missing,
                            severity=dg.AssetCheckSeverity.ERROR,
                            metadata={"n_expected": len(set(expected_ids)), "n_missing": len(missing),
                                      "missing": dg.MetadataValue.json(missing[:20])}),
    ]
