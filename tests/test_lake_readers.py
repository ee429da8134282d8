"""The lake's polars paths equal the pyarrow ones they replace (issue 14).

``LakeTables.read`` (and the analysis's ``read_scores``) read a local table with polars
(``native_scan``), no longer through ``pyarrow.dataset`` (which imports pandas); rows of
dicts are converted by polars (``rows_to_arrow``), no longer by ``pa.Table.from_pylist``
(which imports pandas too). Each is compared here with the path it replaces, on every
table of a real evaluation and on generated rows of every column type of every table.
A small run in a fresh process then loads neither pandas nor ``pyarrow.dataset``.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import subprocess
import sys
import zoneinfo
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from resources.lake.schemas import SCHEMAS
from resources.lake.tables import rows_to_arrow

ROOT = Path(__file__).resolve().parents[1]


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN (pa.Table.equals says NaN != NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def _value(t: pa.DataType, rng: random.Random):
    if rng.random() < 0.15:
        return None
    if pa.types.is_list(t):
        n = rng.choice([0, 1, 3])
        items = [_value(t.value_type, rng) for _ in range(n)]
        return tuple(items) if rng.random() < 0.3 else items
    if pa.types.is_floating(t):
        return rng.choice([0.0, -0.0, 1.5, -2.25e-308, 1e308, float("nan"), float("inf"), 3, 0, 10**15])
    if pa.types.is_integer(t):
        return rng.choice([0, -1, 7, 2**62, -(2**62)])
    if pa.types.is_boolean(t):
        return rng.random() < 0.5
    if pa.types.is_timestamp(t):
        tz = rng.choice([None, dt.timezone.utc, dt.timezone(dt.timedelta(hours=-7, minutes=-30)), zoneinfo.ZoneInfo("Asia/Kolkata")])
        return dt.datetime(2026, rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59),
                           rng.randint(0, 999_999), tzinfo=tz)
    return rng.choice(["", "plain", "unicode: é中文🙂", "quote ' and \" and \\", "x" * 500, "multi\nline"])


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_rows_to_arrow_equals_from_pylist_on_generated_rows(table):
    schema = SCHEMAS[table]
    rng = random.Random(table)
    rows = [{f.name: _value(f.type, rng) for f in schema} for _ in range(60)]
    ours = rows_to_arrow(table, rows)
    reference = pa.Table.from_pylist(rows, schema=schema)
    assert ours.schema == reference.schema
    assert _same(ours.to_pylist(), reference.to_pylist())
    assert rows_to_arrow(table, []).schema == schema and rows_to_arrow(table, []).num_rows == 0


def test_rows_polars_refuses_fall_back_to_pyarrow():
    # a list<double> column given [1, 2.5]: polars will not build it as given; pyarrow's conversion is used
    schema = SCHEMAS["lm_eval_responses"]
    row = {f.name: None for f in schema} | {"loglikelihoods": [1, 2.5]}
    assert rows_to_arrow("lm_eval_responses", [row]).column("loglikelihoods").to_pylist() == [[1.0, 2.5]]


def test_every_table_of_a_real_evaluation_reads_the_same_both_ways(evaluated_lake):
    lake, resolved = evaluated_lake
    tables = lake.tables()
    assert {"samples", "generations", "scores", "summary", "comparisons", "pairs", "evaluations", "runs"} <= set(tables)
    for table in tables:
        if table not in SCHEMAS:
            continue
        native = lake.read(table)
        arrow = lake._read_arrow(table, None, None, None, table == "scores")
        assert native.columns == arrow.columns, table
        assert native.schema == arrow.schema, table
        key = [c for c in native.columns if native.schema[c] == pl.String][:4]
        assert native.sort(key, nulls_last=True).equals(arrow.sort(key, nulls_last=True)), table
        rows = native.to_dicts()
        if rows:  # what was read writes back as the same Arrow table
            assert _same(rows_to_arrow(table, rows).to_pylist(), pa.Table.from_pylist(rows, schema=SCHEMAS[table]).to_pylist()), table
    fp = resolved.fingerprint
    for where, columns in [({"fingerprint": fp}, None), ({"metric": ["bleu", "token_f1"]}, ["model", "sample_id", "value"]),
                           ({"fingerprint": fp, "metric": "bleu"}, ["params", "value"]), ({"metric": "no-such"}, None)]:
        native = lake.read("scores", where=where, columns=columns)
        arrow = lake._read_arrow("scores", where, columns, None, columns is None or "params" in columns)
        assert native.columns == arrow.columns and native.height == arrow.height
        assert native.sort(native.columns).equals(arrow.sort(arrow.columns)), (where, columns)


def test_read_scores_native_equals_arrow(evaluated_lake, monkeypatch):
    from assets.analysis_common import read_scores

    lake, resolved = evaluated_lake
    where = {"fingerprint": resolved.fingerprint}
    native = read_scores(lake, where)
    monkeypatch.setattr(type(lake), "native_scan", lambda self, *a, **k: None)
    arrow = read_scores(lake, where)
    assert native.columns == arrow.columns and native.height == arrow.height > 0
    assert native.filter(pl.col("sample_id").is_not_null())["detail"].null_count() == native.filter(pl.col("sample_id").is_not_null()).height
    key = ["model", "metric", "sample_id"]
    assert native.sort(key, nulls_last=True).equals(arrow.sort(key, nulls_last=True))


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_small_run_loads_neither_pandas_nor_pyarrow_dataset(tmp_path):
    # two models, so comparisons run their paired tests (McNemar without scipy.stats) and BLEU
    # loads sacrebleu without portalocker's Redis lock (issue 26, "Fixed cost of a run")
    code = (
        "import sys, os\n"
        "sys.path.insert(0, os.getcwd())\n"
        "from tests.conftest import small_spec\n"
        "from pipelines.runs.runner import get_instance, run_evaluation\n"
        "from resources.lake.resource import LakeStore\n"
        "from pipelines.cli.run import print_verdicts\n"
        f"lake = LakeStore(root={str(tmp_path / 'lake')!r})\n"
        "models = {'sfres-system': 'precomputed:column=system_output', 'copy-input': 'heuristic:copy-input'}\n"
        "resolved = run_evaluation(small_spec(name='imports', limit=20, models=models), lake, get_instance(capture_logs=False))\n"
        "print_verdicts(lake, resolved.fingerprint)\n"
        "print(sorted(m for m in ('pandas', 'pyarrow.dataset', 'great_expectations', 'torch', 'nltk', 'scipy.stats', 'redis', 'duckdb') if m in sys.modules))\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {"DAGSTER_HOME": str(home), "PATH": "/usr/bin:/bin", "FACETLAKE_LOG_LEVEL": "WARNING"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout[-2000:]


def test_reads_follow_every_commit_and_a_table_made_again(tmp_path):
    import shutil

    from deltalake import DeltaTable

    from resources.lake.resource import LakeStore

    from tests.test_lake import score_row

    rows = lambda n, v: [score_row("m", "f" * 64, f"s{i}", value=v) for i in range(n)]  # noqa: E731
    lake = LakeStore(root=str(tmp_path / "lake"))
    other = LakeStore(root=str(tmp_path / "lake"))  # another resource instance of the same lake (each Dagster run has one)
    assert lake.version("scores") is None and not lake.exists("scores") and lake.read("scores").height == 0
    for step in range(1, 4):
        other.replace("scores", rows(step, float(step)), {"model": "m", "fingerprint": "f" * 64})
        assert lake.version("scores") == DeltaTable(lake.uri("scores")).version()
        assert lake.read("scores")["value"].to_list() == [float(step)] * step  # never a cached older version
    shutil.rmtree(tmp_path / "lake" / "scores")  # deleted, then made again: its version numbers start over
    assert not lake.exists("scores") and lake.read("scores").height == 0
    other.replace("scores", rows(2, 9.0), {"model": "m", "fingerprint": "f" * 64})
    other.replace("scores", rows(1, 7.0), {"model": "m", "fingerprint": "f" * 64})
    assert lake.version("scores") == DeltaTable(lake.uri("scores")).version()
    assert lake.read("scores")["value"].to_list() == [7.0]
    assert lake.read("scores", version=lake.version("scores") - 1)["value"].to_list() == [9.0, 9.0]


def test_a_lake_in_a_folder_with_a_space_accent_and_hash(tmp_path, instance):
    """deltalake percent-encodes the table folder in its file URIs ("my%20lake"); the lake's
    readers must find the files on disk (a run and `facetlake sql` failed on such a lake)."""
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from resources.lake.tables import local_table_files
    from resources.sql import query
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path / "my lé#1 lake"))
    resolved = run_evaluation(small_spec(name="odd-folder", limit=12), lake, instance)
    scores = lake.read("scores", where={"fingerprint": resolved.fingerprint})
    assert scores.height > 0 and scores["sample_id"].drop_nulls().n_unique() == 12
    assert all(Path(f).exists() for f in local_table_files(lake.delta("scores")))
    by_sql = query(lake, "select metric, count(*) as n from scores where sample_id is not null group by 1 order by 1")
    expected = scores.filter(pl.col("sample_id").is_not_null()).group_by("metric").len().sort("metric")
    assert by_sql["metric"].to_list() == expected["metric"].to_list() and by_sql["n"].to_list() == expected["len"].to_list()


def test_string_list_columns_equal_the_python_list_path():
    """``string_list_column`` (flat strings + offsets, what the samples asset writes) gives the
    Series polars builds from one Python list per row: empty lists, empty strings, null
    elements and non-ASCII text included; a non-string element is a TypeError."""
    import polars as pl

    from resources.lake.types import string_list_column

    seqs = [("a", "b"), (), ("",), (None, "x"), ("é ü 日本",), ("one",) * 40] * 500
    ours = string_list_column("references", seqs)
    assert ours.equals(pl.Series("references", [list(s) for s in seqs], dtype=pl.List(pl.String)))
    assert ours.name == "references" and ours.null_count() == 0
    assert string_list_column("context", []).dtype == pl.List(pl.String)
    with pytest.raises(TypeError):
        string_list_column("references", [(1,)])
