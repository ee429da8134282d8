"""Judge commands: ``facetlake pairwise``, ``facetlake stability`` and
``facetlake meta-eval halueval``.

Its ``app`` is merged into the main ``facetlake`` app by ``pipelines/cli/__init__.py``.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, Optional

import typer

from pipelines.cli.common import (
    EvaluationOption, FormatOption, LakeOption, OutputFormat, fail, machine, no_secret, notes, open_lake, print_frame, print_table,
)

app = typer.Typer(rich_markup_mode="markdown")

meta_app = typer.Typer(rich_markup_mode="markdown", help="Meta-evaluation of judged metrics against human labels.", no_args_is_help=True)
app.add_typer(meta_app, name="meta-eval")


def _verdicts_from_rows(rows: list[dict[str, Any]]) -> list[Any]:
    from metric_ops.judged.pairwise import PairVerdict

    out = []
    for r in rows:
        detail = json.loads(r["detail"] or "{}")
        out.append(PairVerdict(r["sample_id"], r["model_a"], r["model_b"], r["verdict_ab"], r["verdict_ba"], r["winner"],
                               r["position_flip"], r["status"], detail, list(detail.get("first_choice") or [])))
    return out


#: ``pairwise --format csv|json``: the win-rate table's columns, with the evaluation's fingerprint
RATE_SCHEMA = {"fingerprint": "String", "model": "String", "games": "Int64", "wins": "Int64", "losses": "Int64", "ties": "Int64",
               "errors": "Int64", "win_rate": "Float64"}


@app.command()
def pairwise(
    judge: str = typer.Option(..., "--judge", callback=no_secret(), help="Judge model spec, e.g. api:gpt-4o-mini@https://api.openai.com/v1 or hf:/models/judge."),
    topology: str = typer.Option("round_robin", help="round_robin (every pair) or tournament (single elimination, seeded by --model order)."),
    model: list[str] = typer.Option([], "--model", "-m", help="Models to compare (repeatable; default: every model with generations)."),
    fingerprint: Optional[str] = EvaluationOption(help="Only this evaluation (name, prefix or fingerprint)."),
    criterion: str = typer.Option("", help="What 'better' means (default: correct, complete, relevant and clear)."),
    format: OutputFormat = FormatOption("table, csv or json. csv and json print only the win-rate rows (one per "
                                        "evaluation x model, with its fingerprint) on stdout; the position-bias table "
                                        "and notes go to stderr."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Judge stored outputs pairwise in both orders; print win rates and the judge's position bias.

    Materialises the `pairwise` asset (also runnable from the Dagster UI with the same run
    config) for each fingerprint; verdicts land in the `pairwise` Delta table.
    """
    import polars as pl

    from metric_ops.judged.pairwise import TOPOLOGIES, position_bias, win_rates
    from pipelines.runs.runner import _materialize, stored_partitions
    from pipelines.runs.register import evaluation_partition
    from pipelines.runs.instance import get_instance

    if topology not in TOPOLOGIES:
        fail(f"unknown topology {topology!r}; use one of {', '.join(TOPOLOGIES)}")
    store = open_lake(lake)
    fps = sorted({fp for _, fp in stored_partitions(store, fingerprint)})
    if not fps:
        fail(f"no stored generations under {store.root}" + (f" for fingerprint {fingerprint}" if fingerprint else "")
              + "; run `facetlake run CONFIG` first")
    say = notes(format)
    instance = get_instance()
    rates: list[dict] = []  # csv/json: every evaluation's win rates, printed once at the end
    for fp in fps:
        config = {"judge": judge, "topology": topology, "models": list(model), "criterion": criterion}
        try:
            result = _materialize(["pairwise"], evaluation_partition(store, fp), store, instance, {"ops": {"pairwise": {"config": config}}})
        except Exception as exc:  # noqa: BLE001 - shown as a clear CLI error
            fail(f"pairwise judging failed for {fp[:12]}: {getattr(exc, 'description', None) or exc}")
        meta = result.asset_materializations_for_node("pairwise")[0].metadata
        key = meta["config_key"].value
        rows = store.read("pairwise", where={"fingerprint": fp, "config_key": key}).to_dicts()
        verdicts = _verdicts_from_rows(rows)
        say.print(f"[bold]pairwise[/] fingerprint {fp[:12]}  judge {judge}  topology {topology}  "
                  f"({len(rows)} verdicts, {meta['judge_calls_paid'].value} judge calls paid)")
        if machine(format):
            rates.extend({"fingerprint": fp[:12], **r} for r in win_rates(verdicts))
        else:
            print_frame(pl.DataFrame(win_rates(verdicts)), title="win rates ((wins + ties/2) / games)")
        bias = position_bias(verdicts)
        print_table(pl.DataFrame([{**bias, "judge": judge}]), title="position bias (flip rate; first-position preference, 0.5 = none)",
                    out=say)
        if topology == "tournament":
            say.print(f"champion: {meta['champion'].value}")
    if machine(format):
        print_frame(pl.DataFrame(rates, schema={k: getattr(pl, t) for k, t in RATE_SCHEMA.items()}), format)


@app.command()
def stability(
    metric: list[str] = typer.Option(..., "--metric", "-m", help="Judged metric to repeat (repeatable)."),
    repeats: int = typer.Option(5, "--repeats", "-n", min=2, help="How many times to score every sample."),
    fingerprint: Optional[str] = EvaluationOption(help="Only this evaluation (name, prefix or fingerprint)."),
    model: Optional[str] = typer.Option(None, help="Only this model partition."),
    limit: Optional[int] = typer.Option(None, help="Only the first N samples of each partition."),
    param: list[str] = typer.Option([], "--param", "-p", callback=no_secret(), help="Metric parameter KEY=VALUE or METRIC.KEY=VALUE (e.g. temperature=0.7)."),
    judge: Optional[str] = typer.Option(None, "--judge", callback=no_secret(), help="Judge model spec (same as --param judge=SPEC)."),
    format: OutputFormat = FormatOption(),
    lake: Optional[str] = LakeOption,
) -> None:
    """Repeat a judged metric n times over stored outputs and report its score stability (σ).

    Every repeat pays its judge calls (the cache is bypassed). Per score: the mean of the
    per-repeat means, σ of the per-repeat means (run-to-run σ, as LLM-FACETS reports for its
    validation), the mean and max per-sample σ, and scored/error counts. Nothing is written.
    """
    import polars as pl

    from assets.common import load_samples
    from metric_ops.judged.judging import use_cache
    from metric_ops.registry import REGISTRY, UnknownMetricError, merged_params, metric_requests
    from metric_ops.scoring.rows import score_metric
    from pipelines.runs.runner import stored_partitions
    from resources.catalog import evaluation_spec

    store = open_lake(lake)
    parts = [(m, fp) for m, fp in stored_partitions(store, fingerprint) if model is None or m == model]
    if not parts:
        fail(f"no stored generations under {store.root} matching the filters; run `facetlake run CONFIG` first")
    params = [*param, *([f"judge={judge}"] if judge else [])]
    try:
        requests = metric_requests(metric, params)  # names and --param parsed once
    except (UnknownMetricError, ValueError) as exc:
        fail(str(exc))
    out_rows = []
    for m, fp in parts:
        spec = evaluation_spec(store, fp)
        samples = load_samples(store, fp)[: limit or None]
        gens = store.read("generations", where={"model": m, "fingerprint": fp}, columns=["sample_id", "output", "status"])
        by_id = {r["sample_id"]: (r["output"] if r["status"] == "ok" else None) for r in gens.iter_rows(named=True)}
        outputs = [by_id.get(s.sample_id) for s in samples]
        for request in requests:
            name = request.name
            try:
                instance = REGISTRY.create(name, **merged_params(spec.metric_params, name, request.params))
            except (ValueError, TypeError) as exc:
                fail(f"{name}: {exc}")
            runs = []
            with use_cache(None):
                for _ in range(repeats):
                    runs.append(score_metric(instance, samples, outputs))
            for score_name in instance.emitted():
                per_repeat_means, n_scored, n_error = [], [], []
                per_sample: list[list[float]] = [[] for _ in samples]
                for run in runs:
                    values = [r[score_name].value if r.get(score_name) and r[score_name].status == "scored" else None for r in run]
                    ok = [v for v in values if v is not None]
                    n_scored.append(len(ok))
                    n_error.append(sum(1 for r in run if r.get(score_name) and r[score_name].status == "error"))
                    if ok:
                        per_repeat_means.append(statistics.fmean(ok))
                    for i, v in enumerate(values):
                        if v is not None:
                            per_sample[i].append(v)
                sample_sd = [statistics.stdev(v) for v in per_sample if len(v) >= 2]
                out_rows.append({
                    "model": m, "fingerprint": fp[:12], "metric": score_name, "repeats": repeats, "samples": len(samples),
                    "mean": statistics.fmean(per_repeat_means) if per_repeat_means else None,
                    "sigma_of_means": statistics.stdev(per_repeat_means) if len(per_repeat_means) >= 2 else None,
                    "mean_sample_sigma": statistics.fmean(sample_sd) if sample_sd else None,
                    "max_sample_sigma": max(sample_sd) if sample_sd else None,
                    "min_scored": min(n_scored), "max_error": max(n_error),
                    "signature": instance.signature(),
                })
    print_frame(pl.DataFrame(out_rows), format, title=f"score stability over {repeats} repeats (σ; None = not enough scored values)")


@meta_app.command("halueval")
def halueval(
    judge: str = typer.Option(..., "--judge", callback=no_secret(), help="Judge model spec, e.g. api:gpt-4o@https://api.openai.com/v1."),
    limit: int = typer.Option(100, help="Score the first N HaluEval general rows (4,507 in all)."),
    path: Optional[str] = typer.Option(None, help="HaluEval general JSONL file (default: the shipped copy)."),
    show_errors: int = typer.Option(3, help="Print the raw replies of this many error rows."),
    param: list[str] = typer.Option([], "--param", "-p", callback=no_secret(), help="Extra faithfulness parameter KEY=VALUE (e.g. max_attempts=3)."),
    format: OutputFormat = FormatOption("table, csv or json. csv and json print only the result row on stdout; the "
                                        "error rows' raw replies go to stderr."),
) -> None:
    """AUROC of the judge's hallucination score against HaluEval's human labels.

    HaluEval general (Li et al., 2023) pairs real ChatGPT responses with human
    hallucination labels. Each response is decomposed into claims and every claim is
    checked against the judge's own knowledge (faithfulness with knowledge=judge: the set
    has no context); the hallucination score (1 - supported share) ranks responses, and
    AUROC against the labels says how well the judge detects hallucination (0.5 = chance).
    Unscored (no claims) and error rows are counted and left out of the AUROC.
    """
    import polars as pl

    from metric_ops.judged.rag_triad import Faithfulness, auroc
    from metric_ops.judged.judging import MemoryJudgeCache, use_cache
    from metric_ops.scoring.rows import score_metric
    from resources.datasets import DatasetError, make_dataset
    from metric_ops.registry import merged_params

    try:
        samples = make_dataset({"kind": "halueval", "limit": limit, **({"path": path} if path else {})}).load()
    except (DatasetError, FileNotFoundError) as exc:
        fail(str(exc))
    samples = [s for s in samples if s.metadata.get("format") == "general" and s.metadata.get("chatgpt_response")]
    if not samples:
        fail("no HaluEval general rows with a chatgpt_response in the file")
    try:
        metric = Faithfulness(**merged_params({}, "faithfulness", [*param, f"judge={judge}", "knowledge=judge"]))
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    outputs = [s.metadata["chatgpt_response"] for s in samples]
    with use_cache(MemoryJudgeCache()):
        results = score_metric(metric, samples, outputs, batch_size=32)
    labels, scores, statuses = [], [], {"scored": 0, "unscored": 0, "error": 0}
    errors = []
    for s, r in zip(samples, results):
        score = r["hallucination"]
        statuses[score.status] += 1
        if score.status == "scored":
            labels.append(int(s.ratings["hallucination"] >= 0.5))
            scores.append(score.value)
        elif score.status == "error":
            errors.append((s.sample_id, score.detail.get("error"), score.detail.get("raw_reply")))
    value = auroc(labels, scores)
    row = {"judge": judge, "rows": len(samples), "scored": statuses["scored"], "unscored (no claims)": statuses["unscored"],
           "error": statuses["error"], "hallucinated (scored)": sum(labels),
           "auroc_hallucination": value, "auroc_faithfulness": None if value is None else 1.0 - value,
           "signature": metric.signature()}
    print_frame(pl.DataFrame([row]), format, title="HaluEval general: judge hallucination score vs human labels (AUROC)")
    if value is None:
        notes(format).print("AUROC undefined: it needs scored rows of both labels (see the errors below)")
    for sid, message, raw in errors[: max(0, show_errors)]:
        notes(format).print(f"[yellow]error[/] {sid}: {message}\n  raw reply: {raw!r}"[:600])
