"""``@lease_scope``: run a pair asset's body holding its (fingerprint, model) lease.

A second concurrent run of the same partition waits for the first to finish, then plans
against the rows the first stored (resources/lake/lease.py), so a paid API is never called
twice for one sample. The wait is bounded by ``runtime.lease_wait_s`` of the
evaluation's spec (default 3600 s); a lease whose holder died is taken over (at once on
the same host, after ``FACETLAKE_LEASE_TTL_S`` elsewhere).
"""

import functools
from typing import Any, Callable

import dagster as dg

from assets.outbound_scope import _partition
from resources.lake.lease import LeaseTimeout, generation_lease


def lease_scope(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate an asset function (under ``@dg.asset``) that takes ``context`` and ``lake``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = args[0] if args else kwargs["context"]
        lake = kwargs["lake"]
        model, fingerprint = _partition(context)
        if not (model and fingerprint):
            return fn(*args, **kwargs)  # the asset itself reports the unregistered partition
        wait_s = 3600.0
        try:
            from resources.catalog import evaluation_spec

            wait_s = float(evaluation_spec(lake, fingerprint).runtime.get("lease_wait_s", wait_s))
        except Exception:  # noqa: BLE001 - the asset reports a broken spec itself
            pass
        try:
            with generation_lease(lake, fingerprint, model, context.run_id, wait_s=wait_s, log=context.log.info) as lease:
                if lease.waited_s > 0.5 or lease.takeovers:
                    context.log.info(f"generation lease of {model}: waited {lease.waited_s:.1f} s, took over {lease.takeovers} dead holder(s)")
                return fn(*args, **kwargs)
        except LeaseTimeout as exc:
            raise dg.Failure(str(exc)) from None

    return wrapper
