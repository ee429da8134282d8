"""The ``pairwise`` asset: a judge compares the models' stored outputs pair by pair, in
both orders, under a round-robin or tournament topology (per fingerprint).

Run config: ``judge`` (a model spec, required), ``topology`` (``round_robin`` |
``tournament``), ``models`` (default: every model with generations under the
fingerprint, in name order = tournament seeds), ``criterion``, decoding settings. One
configuration's rows (keyed by ``config_key``, a hash of its signature) are replaced on
re-materialisation; judge calls are cached in ``judge_cache`` so that costs nothing.
"""

import hashlib
import json
from typing import Any

import dagster as dg
import polars as pl

from assets.declare import delta_asset, table_metadata
from assets.common import evaluation_fingerprint, load_samples, markdown_table, record_run
from metric_ops.judged.judging import JudgeCaller, active_cache, load_prompt, resolve_judge
from metric_ops.judged.pairwise import DEFAULT_CRITERION, TOPOLOGIES, judge_models
from metric_ops.scoring.rows import detail_json
from assets.partitions import EVALUATION_EDGE, evaluation_partitions
from resources.catalog import evaluation_row, utcnow
from resources.scoring.judges import judge_session
from resources.lake.resource import LakeStore

PAIRWISE_VERSION = "1"


class PairwiseConfig(dg.Config):
    """Run config of ``pairwise``."""

    judge: str
    topology: str = "round_robin"
    models: list[str] = []
    criterion: str = ""
    temperature: float = 0.0
    max_tokens: int = 512
    max_attempts: int = 2
    concurrency: int = 4


def pairwise_signature(judge_identity: str, prompt_tag: str, decoding: dict[str, Any], topology: str, criterion: str,
                       models: list[str], max_attempts: int) -> str:
    """sacrebleu-style signature of one pairwise configuration."""
    crit = hashlib.sha256(criterion.encode()).hexdigest()[:12]
    dec = ",".join(f"{k}={v}" for k, v in sorted(decoding.items()))
    return (f"pairwise|v:{PAIRWISE_VERSION}|judge:{judge_identity}|prompts:{prompt_tag}|decoding:{dec}|"
            f"attempts:{max_attempts}|topology:{topology}|criterion:#{crit}|models:{','.join(models)}")


def pairwise_rows(lake: LakeStore, fingerprint: str, config: PairwiseConfig, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge the stored outputs of ``fingerprint``; returns the table rows and the summary
    (win rates, position bias, bracket). Raises ``dg.Failure`` naming what is missing."""
    if config.topology not in TOPOLOGIES:
        raise dg.Failure(f"unknown topology {config.topology!r}; use one of {', '.join(TOPOLOGIES)}")
    samples = load_samples(lake, fingerprint)
    dataset = evaluation_row(lake, fingerprint)["dataset"]
    gens = lake.read("generations", where={"fingerprint": fingerprint}, columns=["model", "sample_id", "output", "status"])
    available = sorted(set(gens["model"].to_list()))
    models = list(config.models) or available
    missing = [m for m in models if m not in available]
    if missing or len(models) < 2:
        raise dg.Failure(f"pairwise judging needs >= 2 models with generations under {fingerprint[:12]}; "
                         f"asked {models}, stored: {available}")
    outputs: dict[str, dict[str, str | None]] = {m: {} for m in models}
    for r in gens.filter(pl.col("model").is_in(models)).iter_rows(named=True):
        outputs[r["model"]][r["sample_id"]] = r["output"] if r["status"] == "ok" else None
    judge = resolve_judge(config.judge)
    template = load_prompt("pairwise")
    decoding = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": 0}
    criterion = config.criterion or DEFAULT_CRITERION
    signature = pairwise_signature(judge.identity, template.tag, decoding, config.topology, criterion, models, config.max_attempts)
    key = hashlib.sha256(signature.encode()).hexdigest()[:16]
    with judge_session(lake):
        caller = JudgeCaller(judge, decoding, "pairwise", config.max_attempts, active_cache())
        result = judge_models(caller, template, samples, outputs, config.topology, criterion, config.concurrency)
    now = utcnow()
    rows = [
        {"fingerprint": fingerprint, "dataset": dataset, "config_key": key, "judge": judge.identity, "topology": config.topology,
         "round": v.detail.get("round"), "sample_id": v.sample_id, "model_a": v.model_a, "model_b": v.model_b,
         "verdict_ab": v.verdict_ab, "verdict_ba": v.verdict_ba, "winner": v.winner, "position_flip": v.position_flip,
         "status": v.status, "detail": detail_json(v.detail), "signature": signature, "run_id": run_id, "created_at": now}
        for v in result["verdicts"]
    ]
    summary = {"config_key": key, "signature": signature, "judge": judge.identity, "locality": judge.locality,
               "win_rates": result["win_rates"], "position_bias": result["position_bias"], "calls": caller.calls,
               "champion": result.get("champion"), "rounds": result.get("rounds")}
    return rows, summary


@delta_asset(
    "pairwise",
    partitions_def=evaluation_partitions,
    deps=[dg.AssetDep("generations", partition_mapping=EVALUATION_EDGE)],
    group_name="judging",
)
def pairwise(context: dg.AssetExecutionContext, config: PairwiseConfig, lake: LakeStore) -> dg.MaterializeResult:
    """Pairwise judge verdicts per sample and model pair (both orders, winner, position flip), per fingerprint."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    rows, summary = pairwise_rows(lake, fingerprint, config, context.run_id)
    version = lake.replace("pairwise", rows, {"fingerprint": fingerprint, "config_key": summary["config_key"]})
    record_run(lake, context, asset="pairwise", table="pairwise", version=version, rows=len(rows), started_at=started,
               fingerprint=fingerprint, dataset=rows[0]["dataset"] if rows else None,
               provenance={"signature": summary["signature"], "judge_calls": summary["calls"],
                           "champion": summary["champion"], "position_bias": summary["position_bias"]})
    return dg.MaterializeResult(metadata={
        "fingerprint": fingerprint, "config_key": summary["config_key"],
        "judge_calls_paid": summary["calls"], "champion": str(summary["champion"]),
        "win_rates": dg.MetadataValue.md(markdown_table(pl.DataFrame(summary["win_rates"]))),
        "position_bias": dg.MetadataValue.json(json.loads(json.dumps(summary["position_bias"]))),
        **table_metadata(lake, "pairwise", len(rows), version),
    })
