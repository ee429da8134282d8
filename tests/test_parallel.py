"""The suite's parallel settings hold (README "Tests"): under pytest-xdist's ``loadgroup``
an ``xdist_group`` mark keeps a module on one worker. pytest 9.2 silently broke that
(pytest-dev/pytest-xdist#1386): the tests still passed, but every worker rebuilt the
grouped modules' fixtures and the deployment tests could run side by side."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.xdist_group("parallel_check")


def test_xdist_group_reaches_the_scheduler(request):
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("only meaningful on a pytest-xdist worker with --dist loadgroup (the pyproject default)")
    # loadgroup schedules by the "@group" suffix xdist puts on the node id; without it the
    # group is ignored (pytest >= 9.2 with pytest-xdist <= 3.8.0)
    assert request.node.nodeid.endswith("@parallel_check"), request.node.nodeid


def test_pyproject_runs_the_suite_on_workers_with_groups():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    addopts = config["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-n" in addopts and addopts[addopts.index("--dist") + 1] == "loadgroup", addopts
    assert any(dep.startswith("pytest-xdist") for dep in config["project"]["optional-dependencies"]["test"])
