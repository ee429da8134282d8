"""Resume, reuse and accounting for the ``generations`` asset (live backends).

- **Resume, do not redo**: finished outputs are appended to ``generations`` (and their
  tokens to ``token_logprobs``) every ``runtime.write_batch_size`` samples (default 16),
  so a killed run loses at most one batch. Re-materialising a partition reads what is
  stored and generates only the samples without an ``ok`` row (``error`` rows are retried
  unless ``retry_errors`` is off). At the end the partition is compacted to one row per
  sample in a single predicate overwrite.
- **Reuse across fingerprints**: annotators are in the fingerprint, so changing one makes
  a new fingerprint; its generations are copied (with their token log-probabilities)
  from a partition of the same model whose fingerprint inputs differ only in
  ``annotators`` -- same dataset content, adapter and generation settings -- so changing
  an annotator re-annotates and rescores without calling the model.
- Both require the stored rows to come from the same model spec string (checked against
  the partition's last provenance row in ``runs``) and the same prompt.
- **Cost and performance**: :func:`performance` summarises a run (wall time, per-request
  latency, tokens in/out, tokens/s, model size, cost from a price table).

Only live backends (``hf``, ``vllm``, ``api``) resume; ``precomputed`` outputs are
re-read every time (their file may have changed).
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from resources.backends import GenerationRequest, GenerationResult
from resources.lake.resource import LakeStore
from resources.datasets import load_yaml, read_text


def latest_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per ``sample_id`` (the latest ``created_at``) of a generations frame."""
    if frame.height == 0:
        return frame
    return frame.sort("created_at").unique(subset=["sample_id"], keep="last", maintain_order=True)


def last_model_spec(lake: LakeStore, model: str, fingerprint: str) -> str | None:
    """The model spec recorded by the last finished generations run of a partition."""
    if not lake.exists("runs"):
        return None
    runs = lake.read("runs", where={"asset": "generations", "model": model, "fingerprint": fingerprint},
                     columns=["finished_at", "provenance"])
    if runs.height == 0:
        return None
    provenance = json.loads(runs.sort("finished_at").item(-1, "provenance") or "{}")
    return provenance.get("model_spec")


def donor_fingerprints(lake: LakeStore, fingerprint: str) -> list[str]:
    """Fingerprints whose inputs equal ``fingerprint``'s except for ``annotators`` and ``trials``."""
    frame = lake.read("evaluations", columns=["fingerprint", "fingerprint_inputs"])
    inputs = {r["fingerprint"]: json.loads(r["fingerprint_inputs"]) for r in frame.iter_rows(named=True)}
    if fingerprint not in inputs:
        return []
    # annotators do not change outputs; trials only add rows (<sample>#<trial>): a larger k reuses the stored trials
    strip = lambda d: {k: v for k, v in d.items() if k not in ("annotators", "trials")}  # noqa: E731
    ours = strip(inputs[fingerprint])
    return sorted(fp for fp, d in inputs.items() if fp != fingerprint and strip(d) == ours)


@dataclass
class GenerationPlan:
    """Which samples are already done (kept), copied from another fingerprint (reused), or to generate."""

    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    reused: dict[str, dict[str, Any]] = field(default_factory=dict)
    reused_tokens: list[dict[str, Any]] = field(default_factory=list)
    reused_from: dict[str, int] = field(default_factory=dict)
    todo: list[GenerationRequest] = field(default_factory=list)
    stale: bool = False


def plan_generation(
    lake: LakeStore, model: str, fingerprint: str, spec_string: str, live: bool,
    requests: Sequence[GenerationRequest], regenerate: bool = False, retry_errors: bool = True,
) -> GenerationPlan:
    """Split ``requests`` into kept / reused / to-generate (see module docstring); ``live``:
    the backend generates (its class sets ``ModelBackend.live``), so stored outputs are kept."""
    plan = GenerationPlan()
    if not live or regenerate or not lake.exists("generations"):
        plan.todo = list(requests)
        return plan
    prompts = {r.sample.sample_id: r.prompt for r in requests}
    ok_status = {"ok"} if retry_errors else {"ok", "error"}

    def usable(fp: str) -> dict[str, dict[str, Any]]:
        recorded = last_model_spec(lake, model, fp)
        if recorded is not None and recorded != spec_string:
            if fp == fingerprint:
                plan.stale = True
            return {}
        rows = latest_rows(lake.read("generations", where={"model": model, "fingerprint": fp}))
        return {r["sample_id"]: r for r in rows.iter_rows(named=True)
                if r["status"] in ok_status and prompts.get(r["sample_id"]) == r["prompt"]}

    plan.kept = usable(fingerprint)
    missing = [sid for sid in prompts if sid not in plan.kept]
    for donor in donor_fingerprints(lake, fingerprint) if missing else []:
        rows = usable(donor)
        take = {sid: rows[sid] for sid in missing if sid in rows and sid not in plan.reused}
        if not take:
            continue
        plan.reused.update(take)
        plan.reused_from[donor] = len(take)
        if lake.exists("token_logprobs"):
            tokens = lake.read("token_logprobs", where={"model": model, "fingerprint": donor, "sample_id": sorted(take)})
            wanted = {(sid, row["run_id"]) for sid, row in take.items()}
            plan.reused_tokens.extend(
                {**t, "fingerprint": fingerprint} for t in tokens.iter_rows(named=True) if (t["sample_id"], t["run_id"]) in wanted
            )
    plan.todo = [r for r in requests if r.sample.sample_id not in plan.kept and r.sample.sample_id not in plan.reused]
    return plan


def compact_partition(lake: LakeStore, model: str, fingerprint: str) -> tuple[int | None, int]:
    """Rewrite a partition to one (latest) row per sample, and its ``token_logprobs`` to the
    tokens of those rows; returns (generations version, rows)."""
    where = {"model": model, "fingerprint": fingerprint}
    rows = latest_rows(lake.read("generations", where=where))
    version = lake.replace("generations", rows, where)
    if lake.exists("token_logprobs"):
        tokens = lake.read("token_logprobs", where=where)
        if tokens.height:
            keep = rows.select("sample_id", "run_id")
            tokens = tokens.join(keep, on=["sample_id", "run_id"], how="semi").unique(
                subset=["sample_id", "position"], keep="last", maintain_order=True
            ).sort(["sample_id", "position"])
            lake.replace("token_logprobs", tokens, where)
    return version, rows.height


# ---------------------------------------------------------------------- prices and cost
def load_prices(runtime: Mapping[str, Any]) -> Mapping[str, Any]:
    """The price table: ``runtime.prices`` or the YAML/JSON file named by ``$FACETLAKE_PRICES``.

    Either one entry ``{input_per_1m: 0.15, output_per_1m: 0.60, currency: USD}`` for every
    model, or a mapping from a model slug / API model name / spec string to such entries.
    """
    if runtime.get("prices"):
        return runtime["prices"]
    path = os.environ.get("FACETLAKE_PRICES")
    if path:
        return load_yaml(read_text(Path(path)), path) or {}
    return {}


def price_for(prices: Mapping[str, Any], *names: str | None) -> Mapping[str, Any] | None:
    """The price entry for the first of ``names`` found in ``prices`` (or the flat entry)."""
    if not prices:
        return None
    if "input_per_1m" in prices or "output_per_1m" in prices:
        return prices
    for name in names:
        if name and name in prices:
            return prices[name]
    return None


def performance(
    results: Sequence[GenerationResult], generate_s: float, wall_s: float, identity: Mapping[str, Any],
    price: Mapping[str, Any] | None, measures_throughput: bool = True,
) -> dict[str, Any]:
    """Cost and performance of the samples generated in this run.

    ``latency_s``: per-request seconds (API: each request; batched backends: the batch's
    wall time, which every request in it waited). ``tokens_per_s``: output tokens per
    second of backend time (``generate_s``); None when ``measures_throughput`` is False
    (a precomputed backend reads outputs from a file: that rate means nothing).
    ``cost``: tokens x price per million tokens.
    """
    lat = sorted(r.latency_s for r in results if r.latency_s is not None)
    tin = sum(r.tokens_in or 0 for r in results)
    tout = sum(r.tokens_out or 0 for r in results)

    def q(p: float) -> float | None:
        return lat[min(len(lat) - 1, int(round(p * (len(lat) - 1))))] if lat else None

    perf: dict[str, Any] = {
        "n_generated": len(results),
        "n_error": sum(1 for r in results if r.status != "ok"),
        "wall_s": wall_s,
        "generate_s": generate_s,
        "latency_s": {"mean": statistics.fmean(lat) if lat else None, "p50": q(0.5), "p95": q(0.95), "max": lat[-1] if lat else None},
        "tokens_in": tin,
        "tokens_out": tout,
        "tokens_per_s": tout / generate_s if generate_s > 0 and measures_throughput else None,
        "model_parameters": identity.get("n_parameters"),
        "model_size_bytes": identity.get("size_bytes"),
        "cost": None,
    }
    if price:
        pin = float(price.get("input_per_1m", 0.0))
        pout = float(price.get("output_per_1m", 0.0))
        perf["cost"] = {
            "total": tin / 1e6 * pin + tout / 1e6 * pout,
            "currency": str(price.get("currency", "USD")),
            "input_per_1m": pin,
            "output_per_1m": pout,
        }
    return perf
