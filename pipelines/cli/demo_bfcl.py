"""``facetlake demo-bfcl``: the BFCL tool-calling evaluation end to end on the shipped data.

Writes the two precomputed "models" (:func:`resources.datasets.bfcl.write_bfcl_demo_outputs`:
the possible answers rendered as calls, and a perturbed copy), runs the evaluation in
``pipelines/configs/bfcl.yaml`` through the same Dagster assets as every other run, and
prints the winner of each metric by its declared direction.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from pipelines.cli.common import CONFIG_DIR, LakeOption, console, fail, open_lake, print_frame
from pipelines.cli.run import run_specs

if TYPE_CHECKING:
    import polars as pl

app = typer.Typer(rich_markup_mode="markdown")

BFCL_CONFIG = CONFIG_DIR / "bfcl.yaml"
BFCL_OUTPUTS = Path("bfcl-demo-outputs")  # under the working directory, never inside the installed package


def metric_winners(summary: pl.DataFrame, directions: dict[str, str]) -> pl.DataFrame:
    """One row per metric: the model with the best mean by the metric's direction
    (``maximize``/``minimize``), the runner-up's mean, and ``tie`` when the means are
    equal. ``summary`` has columns model, metric, mean (one fingerprint)."""
    import polars as pl

    rows: list[dict[str, Any]] = []
    for metric in sorted(summary["metric"].unique().to_list()):
        part = summary.filter((pl.col("metric") == metric) & pl.col("mean").is_not_null())
        if part.height == 0:
            continue
        direction = directions.get(metric, "maximize")
        ordered = part.sort("mean", descending=direction == "maximize")
        best, means = ordered.row(0, named=True), ordered["mean"].to_list()
        rows.append(
            {
                "metric": metric,
                "direction": direction,
                "winner": "tie" if len(means) > 1 and means[0] == means[1] else best["model"],
                "best_mean": means[0],
                "runner_up_mean": means[1] if len(means) > 1 else None,
            }
        )
    return pl.DataFrame(rows)


@app.command("demo-bfcl")
def demo_bfcl(
    lake: Optional[str] = LakeOption,
    category: str = typer.Option("all", help="BFCL categories: all, or a comma-separated list (simple_python, multiple, parallel, parallel_multiple, irrelevance, live_simple)."),
    outputs_dir: Path = typer.Option(BFCL_OUTPUTS, help="Where the two precomputed output files are written (a folder under the working directory by default)."),
) -> None:
    """Score BFCL's single-turn categories: possible answers vs a perturbed copy.

    Both "models" are precomputed outputs (written to --outputs-dir, by default
    ./bfcl-demo-outputs in the working directory);
    metrics are bfcl_ast_accuracy (BFCL's accepted-value rules) and the tool-call suite
    (bipartite-matched precision/recall/F1, exact set, parallel calls, trajectories,
    schema validity, redundancy, irrelevance, parse failures). Prints the summary and
    the winner of each metric; the possible answers should win every one.
    """
    from metric_ops.registry import REGISTRY
    from resources.datasets.bfcl import write_bfcl_demo_outputs
    from resources.datasets import DatasetError
    from resources.catalog.spec import EvaluationSpec

    try:
        paths = write_bfcl_demo_outputs(outputs_dir.resolve(), category)
    except DatasetError as exc:
        fail(str(exc))
    spec = EvaluationSpec.from_yaml(BFCL_CONFIG)
    spec.dataset["category"] = category
    spec.models = {
        "bfcl-possible-answers": f"precomputed:{paths['possible_answers']}",
        "bfcl-perturbed": f"precomputed:{paths['perturbed']}",
    }
    store = open_lake(lake)
    run_specs([spec], store, "facetlake demo-bfcl: mean per model x metric")
    from pipelines.runs.runner import summary_table
    from resources.catalog.spec import resolve

    fingerprint = resolve(spec).fingerprint
    summary = summary_table(store, [fingerprint])
    directions = {name: d.value for cls in REGISTRY for name, d in cls.emitted().items()}
    winners = metric_winners(summary, directions)
    print_frame(winners, title="winner per metric (by declared direction)")
    import polars as pl

    overall = winners.filter(pl.col("metric") == "bfcl_ast_accuracy")
    if overall.height:
        console.print(f"[bold]BFCL AST accuracy winner:[/] {overall['winner'][0]}")


__all__ = ["demo_bfcl", "metric_winners"]
