"""The one Definitions object (``dagster dev`` loads it through workspace.yaml)."""

from __future__ import annotations

import dagster as dg

import assets as assets_package
from assets.catalog import INTERNAL_TABLES, SPECS
from pipelines.jobs import analysis_job, evaluation_job, samples_job
from pipelines.sensors import InboxConfig, analysis_sensor, evaluation_scheduler, inbox_sensor
from resources.backends import ModelBackends
from resources.lake import LakeStore
from resources.sql import DuckDBReader

# the asset functions, plus the tables written outside them (catalog, token_logprobs)
ALL_ASSETS = [*dg.load_assets_from_package_module(assets_package), *SPECS]
ALL_CHECKS = dg.load_asset_checks_from_package_module(assets_package)


def build_resources(lake_root: str | None = None) -> dict[str, object]:
    """The resources for one environment, chosen in one place (lake root overridable)."""
    lake = LakeStore(root=lake_root) if lake_root else LakeStore()
    return {
        "lake": lake,
        "backends": ModelBackends(),
        "duckdb": DuckDBReader(lake=lake),
        "inbox": InboxConfig(),
    }


__all__ = ["ALL_ASSETS", "ALL_CHECKS", "INTERNAL_TABLES", "build_resources", "defs"]

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[evaluation_job, samples_job, analysis_job],
    # all three start RUNNING: recurring evaluations need no hand step (pipelines/sensors.py)
    sensors=[evaluation_scheduler, inbox_sensor, analysis_sensor],
    resources=build_resources(),
)
