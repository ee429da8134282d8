"""The one Definitions object (``dagster dev`` loads it through workspace.yaml)."""

from __future__ import annotations

import dagster as dg

import assets as assets_package
from pipelines.jobs import evaluation_job, samples_job, summary_job
from pipelines.sensors import InboxConfig, ScheduleConfig, evaluation_schedule, inbox_sensor
from resources.backends import ModelBackends
from resources.lake import LakeStore
from resources.sql import DuckDBReader

ALL_ASSETS = dg.load_assets_from_package_module(assets_package)
ALL_CHECKS = dg.load_asset_checks_from_package_module(assets_package)


def build_resources(lake_root: str | None = None) -> dict[str, object]:
    """The resources for one environment, chosen in one place (lake root overridable)."""
    lake = LakeStore(root=lake_root) if lake_root else LakeStore()
    return {
        "lake": lake,
        "backends": ModelBackends(),
        "duckdb": DuckDBReader(lake=lake),
        "inbox": InboxConfig(),
        "schedule_config": ScheduleConfig(),
    }


defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[evaluation_job, samples_job, summary_job],
    sensors=[inbox_sensor],
    schedules=[evaluation_schedule],
    resources=build_resources(),
)
