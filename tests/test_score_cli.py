"""`facetlake score` parameters and outcome reporting, through typer's runner on real
Delta lakes (SF-RES rows from data/)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pipelines.cli import app

runner = CliRunner()


def _metric_is(name):
    import polars as pl

    return pl.col("metric") == name


def test_metric_prefix_accepts_aliases_and_case(lake_copy):
    lake, _ = lake_copy
    result = runner.invoke(app, ["score", "-m", "rouge_l", "--param", "rougeL.use_stemmer=true", "--lake", lake.root])
    assert result.exit_code == 0, result.output
    signatures = set(lake.read("scores").filter(_metric_is("rouge_l_f"))["signature"].to_list())
    assert len(signatures) == 1 and "use_stemmer:yes" in signatures.pop()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["nosuch.use_stemmer=true"], "unknown metric 'nosuch'"),
        (["bleu.tokenize=none"], "not among the metrics being scored"),
        (["use_stemmer=maybe"], "use_stemmer must be true or false, got 'maybe'"),
        (["stemmer=true"], "takes no parameter 'stemmer'; its parameters:"),
    ],
)
def test_bad_parameters_are_refused_before_any_work(lake_copy, params, message):
    lake, _ = lake_copy
    version = lake.delta("scores").version()
    args = ["score", "-m", "rouge_l", *[a for p in params for a in ("--param", p)], "--lake", lake.root]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert message in " ".join(result.output.split()), result.output
    assert lake.delta("scores").version() == version  # nothing written


@pytest.mark.slow
def test_scoring_that_stores_only_errors_fails_loudly_and_keeps_the_rows(tmp_path, instance):
    from tests.conftest import small_spec
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(small_spec(name="one-row", limit=1), lake, instance)
    result = runner.invoke(app, ["score", "-m", "bertscore", "--param", "idf=true", "--lake", lake.root])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "stored only errors" in out and "idf weighting needs at least 2 reference documents" in out
    rows = lake.read("scores").filter(_metric_is("bertscore_f1"))
    assert rows.height == 1 and rows["status"].to_list() == ["error"]
