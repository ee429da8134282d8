"""Every shipped spec passes `facetlake run`'s pre-run check, whatever its dataset kind
(issue 26, fault 9: the check read every precomputed file as generation outputs, so
`facetlake run` refused every agent evaluation whose agent is an episodes file, including
the shipped pipelines/configs/tau_bench_airline.yaml)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted([*ROOT.glob("pipelines/configs/*.yaml"), *ROOT.glob("examples/**/*.yaml")])


@pytest.mark.parametrize("path", SPECS, ids=[str(p.relative_to(ROOT)) for p in SPECS])
def test_every_shipped_spec_passes_the_pre_run_check(path, tmp_path):
    from pipelines.cli.audit import _check_precomputed_files
    from resources.catalog.spec import EvaluationSpec

    if path.name == "bfcl.yaml":  # its two output files are generated (`facetlake demo-bfcl`), not shipped
        from resources.datasets.bfcl import write_bfcl_demo_outputs

        shutil.copy(path, tmp_path / path.name)
        write_bfcl_demo_outputs(tmp_path / "bfcl_demo", "all", limit=30)
        path = tmp_path / path.name
    spec = EvaluationSpec.from_yaml(path)
    try:
        _check_precomputed_files(spec)
    except typer.Exit:
        pytest.fail(f"{path}: the pre-run check refused a shipped spec")


def test_an_episodes_file_is_checked_as_episodes(tmp_path):
    from pipelines.cli.audit import _check_precomputed_files
    from resources.catalog.spec import EvaluationSpec

    spec = EvaluationSpec.from_yaml(ROOT / "pipelines/configs/tau_bench_airline.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": "not a list"}]')
    spec.models["gpt-4o"] = f"precomputed:{bad}"
    with pytest.raises(typer.Exit):
        _check_precomputed_files(spec)  # a bad episodes file is still refused before any run


def test_run_takes_the_shipped_agent_spec(tmp_path):
    from typer.testing import CliRunner

    from pipelines.cli import app

    out = CliRunner().invoke(app, ["run", str(ROOT / "pipelines/configs/tau_bench_airline.yaml"), "--lake", str(tmp_path / "lake")])
    assert out.exit_code == 0, out.output
    assert "episode_reward" in out.output and "pass^1 0.420" in out.output
