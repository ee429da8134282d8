"""Shared fixtures: a temporary Dagster home and small evaluations on real shipped data."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*is currently in beta.*")
warnings.filterwarnings("ignore", message=".*is currently in preview.*")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"


@pytest.fixture(scope="session")
def dagster_home(tmp_path_factory) -> Path:
    """A DAGSTER_HOME with the project's dagster.yaml, so tests exercise the real instance config."""
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ.setdefault("FACETLAKE_LOG_LEVEL", "WARNING")
    return home


@pytest.fixture(scope="session")
def instance(dagster_home):
    import dagster as dg

    return dg.DagsterInstance.get()


def small_spec(name: str = "sfres-small", limit: int = 40, metrics=("exact_match", "token_f1", "bleu", "rouge_l"), **extra):
    """An SF-RES evaluation over the first ``limit`` rows of the shipped real data."""
    from resources.evaluation import EvaluationSpec

    data = {
        "name": name,
        "dataset": {"kind": "sfres", "limit": limit},
        "models": {"sfres-system": "precomputed:column=system_output"},
        "metrics": list(metrics),
        **extra,
    }
    return EvaluationSpec.from_mapping(data)


@pytest.fixture(scope="session")
def evaluated_lake(tmp_path_factory, instance):
    """A lake holding one materialised SF-RES evaluation (40 real rows); read-only for tests."""
    from pipelines.runner import run_evaluation
    from resources.lake import LakeStore

    root = tmp_path_factory.mktemp("lake_session") / "lake"
    lake = LakeStore(root=str(root))
    resolved = run_evaluation(small_spec(), lake, instance)
    return lake, resolved


@pytest.fixture
def lake_copy(evaluated_lake, tmp_path):
    """A private copy of the evaluated lake, for tests that write."""
    from resources.lake import LakeStore

    lake, resolved = evaluated_lake
    root = tmp_path / "lake"
    shutil.copytree(lake.root, root)
    return LakeStore(root=str(root)), resolved
