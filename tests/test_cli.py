"""The facetlake command line, through typer's runner (same code path as the console script)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipelines.cli import app

runner = CliRunner()


def test_every_subcommand_has_help():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    import typer

    commands = sorted(typer.main.get_command(app).commands)
    assert {"demo", "run", "register", "score", "sql", "metrics", "datasets", "ui"} <= set(commands)
    for name in commands:
        sub = runner.invoke(app, [name, "--help"])
        assert sub.exit_code == 0, name
        assert "Usage" in sub.output


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_demo_then_sql_on_the_demo_lake(tmp_path, dagster_home):
    lake = str(tmp_path / "lake")
    result = runner.invoke(app, ["demo", "--lake", lake, "--limit", "15"])
    assert result.exit_code == 0, result.output
    assert "sfres-system" in result.output and "qags-system" in result.output and "human:consistency" in result.output
    out = runner.invoke(app, ["sql", "select metric, count(*) as n from scores group by 1 order by 1", "--lake", lake, "--format", "json"])
    assert out.exit_code == 0, out.output
    counts = {r["metric"]: r["n"] for r in json.loads(out.output)}
    # two systems per demo dataset (the real one and a heuristic reference; human ratings only for the real one)
    assert counts["bleu"] == 60 and counts["human:naturalness"] == 15 and counts["human:consistency"] == 15
    csv_out = runner.invoke(app, ["sql", "select count(*) as n from generations", "--lake", lake, "-f", "csv"])
    assert csv_out.output.strip().splitlines() == ["n", "60"]


def test_sql_refuses_writes_with_a_clear_error(evaluated_lake):
    lake, _ = evaluated_lake
    result = runner.invoke(app, ["sql", "delete from scores", "--lake", lake.root])
    assert result.exit_code == 1
    assert "read-only" in result.output


def test_score_unknown_metric_suggests_names(evaluated_lake):
    lake, _ = evaluated_lake
    result = runner.invoke(app, ["score", "--metric", "rouge_lx", "--lake", lake.root])
    assert result.exit_code == 1 and "did you mean" in result.output


def test_score_on_empty_lake_says_what_to_do(tmp_path):
    result = runner.invoke(app, ["score", "--metric", "bleu", "--lake", str(tmp_path / "empty")])
    assert result.exit_code == 1 and "facetlake demo" in result.output


def test_lake_from_environment(tmp_path, monkeypatch, evaluated_lake):
    lake, _ = evaluated_lake
    monkeypatch.setenv("FACETLAKE_LAKE", lake.root)
    result = runner.invoke(app, ["sql", "select count(*) as n from samples", "-f", "csv"])
    assert result.exit_code == 0 and result.output.strip().splitlines()[1] == "40"


def test_run_with_a_bad_dataset_file_names_file_and_line(tmp_path, dagster_home):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"input": "a"}\n{"input": \n')
    config = tmp_path / "eval.yaml"
    config.write_text(f"name: bad\ndataset: {{kind: file, path: {data}}}\nmodels: {{m: 'precomputed:column=x'}}\nmetrics: [bleu]\n")
    result = runner.invoke(app, ["run", str(config), "--lake", str(tmp_path / "lake")])
    assert result.exit_code != 0
    assert "bad.jsonl:2" in str(result.exception) + result.output


@pytest.mark.parametrize("spec", ["gpt-4", "api:gpt-4", "foo:bar", "precomputed:"])
def test_malformed_model_spec_fails_with_an_example(spec):
    from resources.backends import ModelSpecError, parse_model_spec

    with pytest.raises(ModelSpecError, match="e.g."):
        parse_model_spec(spec)


@pytest.mark.slow  # spawns the facetlake command / a Dagster run in a subprocess (> 10 s)
def test_console_errors_are_one_clear_line_not_a_hang(tmp_path, dagster_home):
    """Errors raised inside Dagster runs reach the user as one line (rich's traceback
    renderer hung on Dagster's cyclic exception chains); bad names fail before any work."""
    import os
    import subprocess
    import sys

    config = tmp_path / "eval.yaml"
    config.write_text("name: t\ndataset: {kind: sfres, limit: 5}\nmodels: {m: 'precomputed:/nonexistent.jsonl'}\nmetrics: [bleu]\n")
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home))
    env.pop("FACETLAKE_DEBUG", None)
    out = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(config), "--lake", str(tmp_path / "lake")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1
    # refused before any run (issue 16), in one line
    assert out.stderr.strip() == "error: model m: precomputed outputs file /nonexistent.jsonl does not exist"
    assert not (tmp_path / "lake" / "evaluations").exists()
    config.write_text("name: t\ndataset: {kind: sfres, limit: 5}\nmodels: {m: 'precomputed:column=system_output'}\nmetrics: [exact_matc]\n")
    out = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(config), "--lake", str(tmp_path / "lake2")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1 and "did you mean" in out.stderr
    assert not (tmp_path / "lake2" / "evaluations").exists()  # refused before anything was written


def test_sql_csv_writes_list_columns_as_json(evaluated_lake):
    lake, _ = evaluated_lake
    result = runner.invoke(app, ["sql", "select sample_id, \"references\" from samples order by position limit 1", "--lake", lake.root, "-f", "csv"])
    assert result.exit_code == 0, result.output
    header, row = result.output.strip().splitlines()
    assert header == "sample_id,references"
    assert row.startswith('0,"[""Please confirm that you do not care')
