"""lm-evaluation-harness commands (issue 18): ``facetlake lm-eval`` and ``facetlake import lm-eval``.

Its ``app`` is merged into the main ``facetlake`` app by pipelines/cli/__init__.py.
See docs/lm-eval.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from pipelines.cli.common import LakeOption, console, fail, no_secret, open_lake, print_frame

_KEY_FIX = "put the key in an environment variable and name it with --api-key-env VAR"

app = typer.Typer(rich_markup_mode="markdown")

import_app = typer.Typer(rich_markup_mode="markdown", help="Import results produced elsewhere into the lake.", no_args_is_help=True)
app.add_typer(import_app, name="import")


def _show(lake, done) -> None:
    import polars as pl

    from pipelines.runs.lm_eval_run import lm_eval_summary_table

    print_frame(pl.DataFrame([{"task": d.task, "evaluation": d.evaluation, "model": d.model, "fingerprint": d.fingerprint[:12],
                                "samples": d.n_samples} for d in done]), title="lm-eval tasks in the lake")
    table = lm_eval_summary_table(lake, {d.fingerprint for d in done})

    def pm(value, stderr) -> str:
        return "∅" if value is None else f"{value:.4f}" + (f" ± {stderr:.4f}" if stderr is not None else "")

    view = pl.DataFrame([
        {"task": r["task"], "model": r["model"], "metric": r["metric"], "lm-eval ± stderr": pm(r["lm_eval_value"], r["lm_eval_stderr"]),
         "facetlake ± stderr": pm(r["facetlake_value"], r["facetlake_stderr"]),
         "95% interval": "-" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
         "agrees": "-" if r["agrees"] is None else ("yes" if r["agrees"] else "NO")}
        for r in table.iter_rows(named=True)
    ])
    print_frame(view, title="lm-eval's aggregate beside facetlake's (lm_eval_summary)")
    if table.height and table.filter(pl.col("agrees") == False).height:  # noqa: E712 - polars expression
        fail("lm-eval's and facetlake's numbers disagree (see agrees = false above and the check_lm_eval_summary_agrees check)")
    console.print("query: facetlake sql \"select metric, avg(value) from scores where metric like 'lm_eval:%' group by 1\"")


def _errors():
    from resources.catalog import CatalogError
    from resources.datasets import DatasetError
    from resources.catalog.spec import SpecError
    from resources.lm_eval.common import LmEvalError
    from resources.privacy.outbound import OfflineModeError

    return (LmEvalError, OfflineModeError, DatasetError, SpecError, CatalogError)


@app.command("lm-eval")
def lm_eval(
    tasks: str = typer.Argument(..., help="lm-eval task name(s), comma separated, e.g. facetlake_selfaware_qa,facetlake_bfcl_function_choice or arc_easy,gsm8k,hellaswag."),
    model: str = typer.Option(..., "--model", callback=no_secret(_KEY_FIX), help="hf:PATH, vllm:NAME or api:MODEL@BASE_URL (lm-eval's hf, vllm, local-completions / local-chat-completions)."),
    limit: Optional[float] = typer.Option(None, "--limit", help="Docs per task (a fraction below 1 as lm-eval reads it)."),
    num_fewshot: Optional[int] = typer.Option(None, "--num-fewshot", help="Few-shot examples (default: each task's own)."),
    name: Optional[str] = typer.Option(None, "--name", help="Evaluation name (NAME-TASK with several tasks). Default lm-eval-TASK."),
    model_name: Optional[str] = typer.Option(None, "--model-name", help="The model's name in the lake (default from the spec)."),
    metric: list[str] = typer.Option([], "--metric", "-m", help="Also score with this facetlake metric (repeatable), e.g. bleu for generate-until tasks."),
    batch_size: str = typer.Option("1", "--batch-size", help="lm-eval batch size (a number or auto)."),
    device: Optional[str] = typer.Option(None, "--device", help="Device for hf (cpu, cuda:0, ...)."),
    model_args: Optional[str] = typer.Option(None, "--model-args", callback=no_secret(_KEY_FIX), help="Extra lm-eval model arguments KEY=VALUE,... (e.g. dtype=float32)."),
    gen_kwargs: Optional[str] = typer.Option(None, "--gen-kwargs", callback=no_secret(_KEY_FIX), help="Generation settings for generate-until tasks, KEY=VALUE,..."),
    apply_chat_template: bool = typer.Option(False, "--apply-chat-template", help="Render prompts with the model's chat template."),
    system_instruction: Optional[str] = typer.Option(None, "--system-instruction", callback=no_secret(_KEY_FIX), help="System instruction prepended to each prompt."),
    include_path: list[Path] = typer.Option([], "--include-path", help="Folder of extra task YAML (repeatable); facetlake's own tasks are always included."),
    output_path: Optional[Path] = typer.Option(None, "--output-path", help="Where lm-eval's output is kept (default: LAKE/_lm_eval_outputs)."),
    api_mode: str = typer.Option("completions", "--api-mode", help="For api: models: completions (log-likelihood and generation) or chat (generation only)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Environment variable holding the API key (default OPENAI_API_KEY)."),
    bootstrap_iters: int = typer.Option(100000, "--bootstrap-iters", help="lm-eval's bootstrap resamples for non-mean stderrs (0: none)."),
    offline: bool = typer.Option(False, "--offline", help="Offline mode: refuse api: models before any connection and keep the Hugging Face hub offline (FACETLAKE_OFFLINE=1)."),
    anonymise: Optional[str] = typer.Option(None, "--anonymise", help="Anonymisation policy for this run (refused with api: models: lm-eval's client cannot anonymise)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Run lm-evaluation-harness tasks with lm-eval itself and put the results in the lake.

    lm-eval renders the prompts, runs the model (its own hf / vllm / local-completions
    class), filters and scores; facetlake stores every doc in `samples`, every response in
    `generations` and `lm_eval_responses`, every per-sample metric value in `scores` as
    lm_eval:METRIC[,FILTER], and lm-eval's aggregates beside its own in `lm_eval_summary`.
    One evaluation per task. The shipped tasks facetlake_selfaware_qa (generate-until) and
    facetlake_bfcl_function_choice (multiple choice) run offline; hub tasks (arc_easy, gsm8k,
    hellaswag, ...) need the Hugging Face hub or its cache.
    """
    if offline:
        os.environ["FACETLAKE_OFFLINE"] = "1"
    from pipelines.runs.lm_eval_run import run_and_import
    from pipelines.runs.instance import get_instance
    from resources.lm_eval.models import RunSettings, parse_model_args

    if os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        fail("name at least one lm-eval task, e.g. facetlake_selfaware_qa")
    try:
        settings = RunSettings(
            limit=int(limit) if limit is not None and limit >= 1 and float(limit).is_integer() else limit,
            num_fewshot=num_fewshot, batch_size=int(batch_size) if batch_size.isdigit() else batch_size, device=device,
            gen_kwargs=gen_kwargs, apply_chat_template=apply_chat_template, system_instruction=system_instruction,
            include_path=[str(p) for p in include_path], bootstrap_iters=bootstrap_iters,
        )
        store = open_lake(lake)
        done = run_and_import(
            names, model, store, get_instance(), settings=settings, name=name, model_name=model_name, metrics=metric,
            output_path=output_path, api_mode=api_mode, api_key_env=api_key_env, model_args=parse_model_args(model_args),
            privacy={"anonymise": anonymise} if anonymise else None,
        )
    except _errors() as exc:
        fail(str(exc))
    _show(store, done)


@import_app.command("lm-eval")
def import_lm_eval(
    path: Path = typer.Argument(..., exists=True, help="An lm-eval --output_path folder, a model folder inside it, or one results_<date>.json."),
    task: list[str] = typer.Option([], "--task", help="Only this task (repeatable); default every task with per-sample logs."),
    name: Optional[str] = typer.Option(None, "--name", help="Evaluation name (NAME-TASK with several tasks). Default lm-eval-TASK."),
    model_name: Optional[str] = typer.Option(None, "--model-name", help="The model's name in the lake (default from lm-eval's model name)."),
    metric: list[str] = typer.Option([], "--metric", "-m", help="Also score with this facetlake metric (repeatable)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Read an existing lm-eval output (results_*.json + samples_*.jsonl, lm-eval run with
    --log_samples) into the lake, exactly as `facetlake lm-eval` stores a run it made."""
    from pipelines.runs.lm_eval_run import import_output
    from pipelines.runs.instance import get_instance

    store = open_lake(lake)
    try:
        done = import_output(path, store, get_instance(), tasks=task or None, name=name, model_name=model_name, metrics=metric)
    except _errors() as exc:
        fail(str(exc))
    _show(store, done)
