"""`facetlake sql --timeout` bounds producing, printing and writing a large result (issue 26,
fault 5): `SELECT * FROM range(200000000)` with --timeout ran for minutes."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from typer.testing import CliRunner

from pipelines.cli import app

runner = CliRunner()
HUGE = "select * from range(200000000) t(n)"
# a result that takes minutes to produce on any machine: an md5 per row (~0.3 us each on one
# thread) over 200M rows; a plain range of integers was read whole in under 2 s on a fast CI host
SLOW = "select n, md5(n::varchar) as h from range(200000000) t(n)"


@pytest.fixture
def lake(tmp_path):
    """A lake with one small Delta table (the command refuses a folder without tables)."""
    write_deltalake(str(tmp_path / "lake" / "runs"), pa.table({"run_id": ["r1"]}))
    return str(tmp_path / "lake")


def test_out_of_a_huge_result_stops_at_the_time_limit(lake, tmp_path):
    out = runner.invoke(app, ["sql", "--lake", lake, "--timeout", "2", "--out", str(tmp_path / "big.parquet"), SLOW])
    assert out.exit_code == 1
    assert "stopped at the time limit (2 s)" in out.output and "--timeout" in out.output
    assert not (tmp_path / "big.parquet").exists()  # nothing half-written


def test_printing_is_capped_and_says_so(lake):
    out = runner.invoke(app, ["sql", "--lake", lake, "--timeout", "60", "-f", "json", HUGE])
    assert out.exit_code == 0, out.output
    body, _, note = out.output.rpartition("]")
    rows = json.loads(body + "]")
    assert [r["n"] for r in rows] == list(range(10_000))  # the default cap, in order
    assert "first 10,000 rows shown; more follow" in note
    few = runner.invoke(app, ["sql", "--lake", lake, "-f", "csv", "--max-rows", "3", HUGE])
    data = [line for line in few.output.splitlines() if not line.startswith("first ")]
    assert few.exit_code == 0 and data == ["n", "0", "1", "2"] and "first 3 rows shown" in few.output
    exact = runner.invoke(app, ["sql", "--lake", lake, "-f", "csv", "--max-rows", "3", "select * from range(3) t(n)"])
    assert exact.exit_code == 0 and "more follow" not in exact.output  # exactly the cap: nothing hidden
