"""``@outbound_scope``: run an asset body inside the run's outbound session.

Every outbound call an asset makes (API generation, remote judges, a model anonymiser)
is then anonymised under the evaluation's privacy policy (united with the
administrator's forced strategy) and written to the ``outbound_ledger`` table with the
run id, fingerprint and model partition. The ledger is flushed when the body ends,
also on failure. The calls also run under the evaluation's ``runtime`` (endpoint concurrency,
rpm/tpm) and the run's budget (resources/backends/endpoints.py). Works for pair and evaluation partitions.
"""

import functools
import json
from typing import Any, Callable

import dagster as dg

from resources.catalog import evaluation_row
from resources.backends.budget import Budget
from resources.backends.endpoints import call_session
from resources.privacy.session import outbound_session


def _partition(context: dg.AssetExecutionContext) -> tuple[str | None, str | None]:
    """(model, fingerprint) of a pair partition, (None, fingerprint) of an evaluation
    partition, (None, None) when unpartitioned or not registered (the asset reports that)."""
    if not context.has_partition_key:
        return None, None
    from resources.catalog import CatalogError, evaluation_row, pair_row

    lake = context.resources.lake
    key = str(context.partition_key)
    try:
        if key.count(":") == 1 and "@" in key:
            row = pair_row(lake, key)
            return row["model"], row["fingerprint"]
        return None, evaluation_row(lake, key)["fingerprint"]
    except CatalogError:
        return None, None


BUDGET_GROUP_TAG = "facetlake/budget_group"  # the runs one budget covers (one `facetlake run` command); default: the Dagster run


def budget_group(context: dg.AssetExecutionContext) -> str:
    """The id of the evaluation run a budget covers: the ``facetlake/budget_group`` tag the
    CLI puts on every Dagster run of one command, else this Dagster run's id."""
    try:
        tags = context.dagster_run.tags or {}
    except Exception:  # noqa: BLE001 - a directly invoked asset (build_asset_context) has no run
        tags = {}
    return str(tags.get(BUDGET_GROUP_TAG) or context.run_id)


def run_budget(context: dg.AssetExecutionContext, lake: Any, runtime: dict) -> Budget | None:
    """The :class:`~resources.backends.endpoints.Budget` of ``runtime.budget`` (the spec's
    ``budget:`` or ``--budget``), charged with what the earlier steps of the same evaluation
    run spent (their ``runs`` rows, :func:`spent_by_group`); None without a budget."""
    budget = Budget.parse(runtime.get("budget"), "budget")
    if budget is not None:
        budget.add_prior(**spent_by_group(lake, budget_group(context)))
    return budget


def spent_by_group(lake: Any, group: str) -> dict[str, Any]:
    """The calls, tokens and usd the ``runs`` rows of budget group ``group`` recorded
    (provenance ``spend``)."""
    import polars as pl

    total = {"calls": 0, "tokens": 0, "usd": 0.0}
    if not lake.exists("runs"):
        return total
    rows = lake.read("runs", columns=["provenance"]).filter(pl.col("provenance").str.contains(group, literal=True))
    for text in rows["provenance"].to_list():
        record = json.loads(text or "{}")
        if record.get("budget_group") == group:
            for key in total:
                total[key] += (record.get("spend") or {}).get(key) or 0
    return total


def outbound_scope(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate an asset function (under ``@dg.asset``) that takes ``context`` and ``lake``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = args[0] if args else kwargs["context"]
        lake = kwargs["lake"]
        model, fingerprint = _partition(context)
        privacy = None
        if fingerprint:
            try:
                privacy = json.loads(evaluation_row(lake, fingerprint)["spec"]).get("privacy")
            except LookupError:
                privacy = None  # the asset itself reports the unregistered fingerprint
        runtime = {}
        if fingerprint:
            try:
                runtime = json.loads(evaluation_row(lake, fingerprint)["spec"]).get("runtime") or {}
            except LookupError:
                runtime = {}
        budget = run_budget(context, lake, runtime)
        with outbound_session(lake, run_id=context.run_id, fingerprint=fingerprint, model=model, privacy=privacy) as policy, \
                call_session(runtime, budget):
            if policy.active:
                context.log.info(f"outbound anonymisation: {policy.label}" + (" (forced)" if policy.forced else ""))
            return fn(*args, **kwargs)

    return wrapper
