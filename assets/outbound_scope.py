"""``@outbound_scope``: run an asset body inside the run's outbound session.

Every outbound call an asset makes (API generation, remote judges, a model anonymiser)
is then anonymised under the evaluation's privacy policy (united with the
administrator's forced strategy) and written to the ``outbound_ledger`` table with the
run id, fingerprint and model partition. The ledger is flushed when the body ends,
also on failure. Works for pair and evaluation partitions.
"""

import functools
import json
from typing import Any, Callable

import dagster as dg

from resources.catalog import evaluation_row
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
        with outbound_session(lake, run_id=context.run_id, fingerprint=fingerprint, model=model, privacy=privacy) as policy:
            if policy.active:
                context.log.info(f"outbound anonymisation: {policy.label}" + (" (forced)" if policy.forced else ""))
            return fn(*args, **kwargs)

    return wrapper
