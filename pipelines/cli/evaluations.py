"""``facetlake evaluations``: list registered evaluations, archive and restore them.

Its ``app`` is merged into the main ``facetlake`` app by pipelines/cli/__init__.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Optional

import typer

from pipelines.cli.common import FormatOption, LakeOption, OutputFormat, console, fail, machine, notes, open_lake, print_frame

app = typer.Typer(rich_markup_mode="markdown")

evaluations_app = typer.Typer(rich_markup_mode="markdown",
    help="Registered evaluations: name, fingerprint, dataset, models, last run, schedule. "
         "Subcommands archive and restore hide or show one without deleting data.",
    no_args_is_help=False,
    invoke_without_command=True,
)
app.add_typer(evaluations_app, name="evaluations")


def evaluations_frame(lake, include_archived: bool = False, include_history: bool = False):
    """The listing as a polars frame: evaluation, fingerprint (12 hex), status, dataset,
    n_samples, models, history (earlier fingerprints), last_run (UTC), schedule,
    next_run (UTC)."""
    import polars as pl

    from pipelines.sensors import latest_tick
    from resources.catalog import list_evaluations

    frame = list_evaluations(lake, include_archived=include_archived, include_history=include_history)
    if frame.height == 0:
        return frame
    last = (
        lake.read("runs", columns=["fingerprint", "finished_at"]).group_by("fingerprint").agg(pl.col("finished_at").max().alias("last_run"))
        if lake.exists("runs") else pl.DataFrame(schema={"fingerprint": pl.String, "last_run": pl.Datetime("us", "UTC")})
    )
    frame = frame.join(last, on="fingerprint", how="left")
    now = dt.datetime.now(dt.timezone.utc)

    def next_run(cron: str | None) -> str:
        if not cron:
            return ""
        from dagster._utils.schedules import cron_string_iterator

        # the first tick strictly after now (a time on a tick counts as that tick, so start past it)
        ticks = cron_string_iterator(latest_tick(cron, now).timestamp() + 1, cron, "UTC")
        return next(t for t in ticks if t > now).strftime("%Y-%m-%d %H:%M")

    rows = []
    for r in frame.iter_rows(named=True):
        status = "archived" if r["archived"] else r["status"]
        rows.append({
            "evaluation": r["name"], "fingerprint": r["fingerprint"][:12], "status": status, "dataset": r["dataset"],
            "samples": r["n_samples"], "models": r["models"] or "", "history": r["history"],
            "last_run": r["last_run"].strftime("%Y-%m-%d %H:%M") if r["last_run"] else "never",
            "schedule": r["schedule"] or "", "next_run": next_run(r["schedule"]) if status == "current" else "",
        })
    return pl.DataFrame(rows)


@evaluations_app.callback()
def evaluations(
    ctx: typer.Context,
    lake: Optional[str] = LakeOption,
    all_: bool = typer.Option(False, "--all", help="Include archived evaluations."),
    history: bool = typer.Option(False, "--history", help="Also list each evaluation's earlier fingerprints."),
    format: OutputFormat = FormatOption(),
) -> None:
    """List registered evaluations (current fingerprint; --history adds earlier ones)."""
    if ctx.invoked_subcommand is not None:
        return
    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake demo` or `facetlake run SPEC.yaml` first, or pass --lake")
    frame = evaluations_frame(store, include_archived=all_, include_history=history)
    if frame.height == 0:
        notes(format).print("no evaluations" + ("" if all_ else " (archived ones are hidden: --all shows them)"))
        if machine(format):  # stdout still parses: no rows
            print_frame(frame.select([]).clear(), format)
        return
    if format is OutputFormat.table:  # what a reader needs at a glance; csv/json keep every column
        keep = ["evaluation", "fingerprint", *(["status"] if all_ or history else []), "dataset", "models", "last_run",
                *(["schedule", "next_run"] if any(frame["schedule"].to_list()) else []),
                *(["history"] if frame["history"].sum() else [])]
        frame = frame.select(keep)
    print_frame(frame, format, title="evaluations")


def _set(name: str, lake: Optional[str], archived: bool) -> None:
    from assets.partitions import sync_partitions
    from pipelines.runs.instance import get_instance
    from resources.catalog import CatalogError, evaluation_row, set_archived

    store = open_lake(lake)
    try:
        current = evaluation_row(store, name)
        if bool(current.get("archived")) == archived:
            console.print(f"{name} is already {'archived' if archived else 'active (not archived)'}; nothing changed")
            return
        n = set_archived(store, name, archived)
    except CatalogError as exc:
        fail(str(exc))
    sync_partitions(store, get_instance())
    verb = "archived" if archived else "restored"
    console.print(f"{verb} {name}: {n} partition(s) " + ("hidden; its data stays in the lake (facetlake sql still reads it)"
                                                      if archived else "visible again"))


@evaluations_app.command()
def archive(name: str = typer.Argument(..., help="Evaluation name."), lake: Optional[str] = LakeOption) -> None:
    """Hide an evaluation: its partitions leave the UI and its schedule stops; no data is deleted."""
    _set(name, lake, True)


@evaluations_app.command()
def restore(name: str = typer.Argument(..., help="Evaluation name."), lake: Optional[str] = LakeOption) -> None:
    """Show an archived evaluation again (partitions and schedule)."""
    _set(name, lake, False)


@evaluations_app.command()
def pin(
    name: str = typer.Argument(..., help="Evaluation name."),
    unpin: bool = typer.Option(False, "--unpin", help="Remove the pin: the next run of a changed source registers a new fingerprint."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Pin an evaluation to its current dataset content: a scheduled or CLI run whose source changed then scores nothing and says what changed.

    Writes `dataset.pin: <content SHA-256>` into the stored spec (the fingerprint does not
    change). A later `facetlake run SPEC.yaml` stores that YAML's spec: write `pin:` there to
    keep the pin. `--unpin` removes it."""
    from resources.catalog import CatalogError
    from resources.catalog.writes import set_pin

    store = open_lake(lake)
    try:
        value = set_pin(store, name, pin=not unpin)
    except CatalogError as exc:
        fail(str(exc))
    console.print(f"{name}: " + (f"pinned at {value[:12]} (dataset content SHA-256 {value})" if value else "unpinned"), highlight=False)


@evaluations_app.command()
def show(
    name: str = typer.Argument(..., help="Evaluation name (or any reference -e takes)."),
    lake: Optional[str] = LakeOption,
    format: OutputFormat = FormatOption(),
) -> None:
    """List, for each fingerprint the evaluation has had, what its verdicts rest on: dataset content hash and samples version, adapter and prompt template hashes, generation settings, metric (and judge prompt) versions, pin."""
    import json

    import polars as pl

    from resources.catalog import CatalogError, evaluation_versions

    store = open_lake(lake)
    try:
        entries = evaluation_versions(store, name)
    except CatalogError as exc:
        fail(str(exc))
    rows = [{"fingerprint": e["fingerprint"][:12], "status": e["status"],
             "registered": e["registered_at"].strftime("%Y-%m-%d %H:%M") if e["registered_at"] else "",
             "dataset sha256": (e["dataset_sha256"] or "")[:12], "samples version": e["samples_version"],
             "adapter": e["adapter"], "adapter sha256": e["adapter_sha256"][:12],
             "template sha256": (e["template_sha256"] or "")[:12],
             "generation": json.dumps(e["generation"], sort_keys=True),
             "metrics": ", ".join(f"{m} v{v}" for m, v in sorted(e["metric_versions"].items())),
             "pin": (e["pin"] or "")[:12]} for e in entries]
    print_frame(pl.DataFrame(rows, schema_overrides={"samples version": pl.Int64}), format,
                title=f"{name}: what each fingerprint rests on (newest first)")
