"""Shared fixtures: a temporary Dagster home and small evaluations on real shipped data."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

# pytest-xdist runs 4 workers on CI's 2 cores (pyproject addopts), and each torch (and BLAS) would
# start one compute thread per core: 8+ spinning threads on 2 cores made every neural test 2.5-14x
# slower than alone (the BERTScore cross-validation took 700 s instead of 50 s; 117 s vs 295 s for
# the three neural cross-validations with one thread). One thread per worker process, and per process
# the tests start, which inherit the variable; set before anything imports torch. A value the
# caller set is kept; a serial run (`-n 0`) is left alone.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

# rouge-score, the reference the ROUGE tests compare with, imports absl.logging, whose handler writes to
# the sys.stderr of the moment it was imported (pytest's capture file) and *closes* that stream when the
# handler is closed, unless it is the current sys.stderr. Every Dagster run calls logging.config.dictConfig,
# which closes all handlers: a later test's capture then fails with "I/O operation on closed file". Point
# the handler at the process's own stderr, which it never closes. (The product does not import absl:
# metric_ops/lexical/rouge/ngram_lcs.py computes ROUGE without rouge-score.)
try:
    import sys as _sys

    from absl import logging as _absl_logging

    _absl_logging.get_absl_handler().python_handler.setStream(_sys.__stderr__)
except ImportError:  # pragma: no cover - rouge-score (and absl) not installed
    pass

warnings.filterwarnings("ignore", message=".*is currently in beta.*")
warnings.filterwarnings("ignore", message=".*is currently in preview.*")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist (controller): hand the real ``COLUMNS`` (usually none) to each worker."""
    node.workerinput["facetlake_columns"] = os.environ.get("COLUMNS")


def pytest_configure(config):
    """In a pytest-xdist worker, ``COLUMNS`` arrives set to 80 although the controller has
    none; rich's console (pipelines/cli/common.py) would then pin its width at 80 for the
    whole worker and ignore the ``COLUMNS`` a test passes to ``CliRunner.invoke``. Restore
    the controller's value before any test module imports the CLI."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or "facetlake_columns" not in workerinput:
        return
    if workerinput["facetlake_columns"] is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = workerinput["facetlake_columns"]


def pytest_collection_modifyitems(config, items):
    """Modules holding a ``slow`` test first, each module kept whole and in its own order
    (then the rest): under pytest-xdist the long tests and groups start at once instead of
    trailing behind the fast ones on one worker; a serial run only changes order."""
    def module(item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow_modules = {module(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: module(item) not in slow_modules)  # stable: keeps order within


@pytest.fixture(autouse=True)
def _collector_settings_restored():
    """``pipelines.cli.main`` tunes the garbage collector of the process it runs in
    (pipelines/runs/heap.py); a test that calls it in process gives the worker its settings back."""
    import gc

    from pipelines.runs.heap import in_cli_process, leave_cli_process

    thresholds = gc.get_threshold()
    yield
    if gc.get_threshold() != thresholds or gc.get_freeze_count() or in_cli_process():
        leave_cli_process(thresholds)


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
    from resources.catalog.spec import EvaluationSpec

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
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    root = tmp_path_factory.mktemp("lake_session") / "lake"
    lake = LakeStore(root=str(root))
    resolved = run_evaluation(small_spec(), lake, instance)
    return lake, resolved


@pytest.fixture
def lake_copy(evaluated_lake, tmp_path):
    """A private copy of the evaluated lake, for tests that write."""
    from resources.lake.resource import LakeStore

    lake, resolved = evaluated_lake
    root = tmp_path / "lake"
    shutil.copytree(lake.root, root)
    return LakeStore(root=str(root)), resolved
