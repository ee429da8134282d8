"""The one Definitions object (``dg dev`` loads it through pyproject.toml's [tool.dg], ``dagster`` commands through workspace.yaml)."""

from __future__ import annotations

import os

import dagster as dg

import assets as assets_package
from assets.catalog import SPECS
from pipelines.jobs import ALL_JOBS
from pipelines.sensors import InboxConfig, analysis_sensor, episodes_sensor, evaluation_scheduler, inbox_sensor
from resources.backends import ModelBackends
from resources.lake.resource import LakeStore
from pipelines.quiet import quiet_libraries

quiet_libraries()  # also in code-location processes (`facetlake ui`, run workers), not only the CLI

# the asset functions, plus the tables written outside them (catalog, token_logprobs)
ALL_ASSETS = [*dg.load_assets_from_package_module(assets_package), *SPECS]
ALL_CHECKS = dg.load_asset_checks_from_package_module(assets_package)


def build_resources(lake_root: str | None = None) -> dict[str, object]:
    """The resources for one environment, chosen in one place (lake root overridable)."""
    lake = LakeStore(root=lake_root) if lake_root else LakeStore()
    return {
        "lake": lake,
        "backends": ModelBackends(),
        "inbox": InboxConfig(),
    }


EXECUTORS = ("multiprocess", "in_process", "celery")


def build_executor(kind: str | None = None) -> dg.ExecutorDefinition:
    """The executor of every job, chosen by ``$FACETLAKE_EXECUTOR`` (one place):

    - ``multiprocess`` (default): each step in its own process on this machine;
    - ``in_process``: every step in the run's process;
    - ``celery`` (dagster-celery, the ``deploy`` extra): steps go to Celery workers started
      with ``dagster-celery worker start`` on any number of machines. The broker is
      ``$FACETLAKE_CELERY_BROKER`` (e.g. ``redis://127.0.0.1:6379/0``) when set, else
      dagster-celery's default RabbitMQ at ``$DAGSTER_CELERY_BROKER_HOST`` (localhost);
      the result backend ``$FACETLAKE_CELERY_BACKEND`` or ``rpc://``. Only the variable
      names are written into run config, never a URL that may hold a password.

    Raises ``ValueError`` naming the valid kinds for another value.
    """
    kind = (kind or os.environ.get("FACETLAKE_EXECUTOR") or "multiprocess").strip().lower()
    if kind == "multiprocess":
        return dg.multiprocess_executor
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "celery":
        from dagster_celery import celery_executor

        # acknowledged when finished: a step whose worker dies goes to another worker (deploy/celery.yaml)
        config: dict = {"config_source": {"task_acks_late": True, "task_reject_on_worker_lost": True,
                                          "worker_prefetch_multiplier": 1}}
        if os.environ.get("FACETLAKE_CELERY_BROKER"):
            config["broker"] = {"env": "FACETLAKE_CELERY_BROKER"}
        if os.environ.get("FACETLAKE_CELERY_BACKEND"):
            config["backend"] = {"env": "FACETLAKE_CELERY_BACKEND"}
        return celery_executor.configured(config, name="celery")
    raise ValueError(f"FACETLAKE_EXECUTOR={kind!r} is not an executor; use one of {', '.join(EXECUTORS)}")


__all__ = ["ALL_ASSETS", "ALL_CHECKS", "build_executor", "build_resources", "defs"]

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=ALL_JOBS,
    # all start RUNNING: recurring evaluations need no hand step (pipelines/sensors.py)
    sensors=[evaluation_scheduler, inbox_sensor, episodes_sensor, analysis_sensor],
    resources=build_resources(),
    executor=build_executor(),
)
