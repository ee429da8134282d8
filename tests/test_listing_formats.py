"""``--format table|csv|json`` on every listing command (issue 26, fault 11): csv and json put
only the rows on stdout (notes go to stderr), json keeps numbers as numbers, csv has a header
row, and both hold the values the table shows. One small real evaluation (two models on 8
SF-RES rows) and one small agent evaluation (4 τ-bench tasks x 4 trials), built once."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipelines.cli import app

pytestmark = pytest.mark.xdist_group("listing_formats")

TAU = Path(__file__).resolve().parents[1] / "data" / "tau-bench" / "gpt-4o-airline.json"


@pytest.fixture(scope="module")
def lake(tmp_path_factory, instance):
    """A lake with ``fmt-small`` (SF-RES, 8 rows, models sys and ref, baseline sys) and
    ``fmt-agents`` (τ-bench airline, first 4 tasks, the published gpt-4o trials)."""
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.datasets import make_dataset
    from resources.lake.resource import LakeStore

    root = tmp_path_factory.mktemp("listing_formats")
    refs = root / "refs.jsonl"
    refs.write_text("\n".join(json.dumps({"sample_id": s.sample_id, "output": s.references[0]})
                              for s in make_dataset({"kind": "sfres", "limit": 8}).load()))
    store = LakeStore(root=str(root / "lake"))
    run_evaluation(EvaluationSpec.from_mapping({
        "name": "fmt-small", "dataset": {"kind": "sfres", "limit": 8}, "baseline": "sys",
        "models": {"sys": "precomputed:column=system_output", "ref": f"precomputed:{refs}"},
        "metrics": ["exact_match", "token_f1"],
    }), store, instance)
    run_evaluation(EvaluationSpec.from_mapping({
        "name": "fmt-agents", "dataset": {"kind": "episodes", "path": str(TAU), "format": "tau_bench", "limit": 4},
        "models": {"gpt-4o": f"precomputed:{TAU}"}, "metrics": ["episode_reward"],
    }), store, instance)
    return store


def cli(*args: str):
    """Run the real CLI; stdout and stderr apart (as a pipe sees them)."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    return result


def as_json(*args: str) -> list[dict]:
    """The command's rows as ``--format json``: stdout is one JSON array and nothing else."""
    rows = json.loads(cli(*args, "--format", "json").stdout)
    assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
    return rows


def as_csv(*args: str) -> list[dict]:
    """The command's rows as ``--format csv`` (header row first)."""
    text = cli(*args, "--format", "csv").stdout
    return list(csv.DictReader(io.StringIO(text)))


def table_rows(output: str, columns: list[str], title: str | None = None) -> list[dict]:
    """The rows of the table (the first after a line starting with ``title``, when given) in
    a table-mode output printed to a pipe: one line per row, each cell left-aligned under its
    header; the table ends at a blank line, the next table's title or the end."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if title is None or line.startswith(title))
    head = next(i for i in range(start, len(lines)) if lines[i].startswith(columns[0]) and all(c in lines[i] for c in columns))
    positions, at = [], 0
    for c in columns:
        at = lines[head].index(c, at)
        positions.append(at)
        at += len(c)
    assert set(lines[head + 1]) == {"─"}, "a header rule under the header: one table, not records"
    rows = []
    for n in range(head + 2, len(lines)):
        line = lines[n]
        next_title = n + 2 < len(lines) and set(lines[n + 2]) == {"─"}  # a title, then a header and its rule
        if not line.strip() or next_title or any(line[p - 1:p] not in (" ", "") for p in positions[1:]):
            break
        rows.append({c: line[a:b].strip() for c, a, b in zip(columns, positions, [*positions[1:], None])})
    return rows


def same_as_csv(rows_json: list[dict], rows_csv: list[dict]) -> None:
    """csv holds the json rows: same columns in the same order, same values as text."""
    assert rows_csv and len(rows_csv) == len(rows_json)
    assert list(rows_csv[0]) == list(rows_json[0])
    for j, c in zip(rows_json, rows_csv):
        for k, v in j.items():
            if v is None:
                assert c[k] == ""
            elif isinstance(v, bool):
                assert c[k] == str(v).lower()
            elif isinstance(v, float):
                assert float(c[k]) == pytest.approx(v, rel=1e-12)
            else:
                assert c[k] == str(v)


@pytest.mark.parametrize("command, key, known", [
    ("metrics", "metric", "token_f1"), ("datasets", "kind", "sfres"), ("profiles", "profile", "compliance_officer"),
])
def test_registry_listings(command, key, known):
    rows = as_json(command)
    same_as_csv(rows, as_csv(command))
    table = table_rows(cli(command).stdout, list(rows[0]))
    assert [r[key] for r in table] == [r[key] for r in rows]  # every row of the table, same order
    assert known in [r[key] for r in rows]
    assert table[[r[key] for r in rows].index(known)] == {k: str(v) for k, v in rows[[r[key] for r in rows].index(known)].items()}


def test_evaluations(lake):
    rows = {r["evaluation"]: r for r in as_json("evaluations", "--lake", lake.root)}
    same_as_csv(list(rows.values()), as_csv("evaluations", "--lake", lake.root))
    assert set(rows) == {"fmt-small", "fmt-agents"}
    assert rows["fmt-small"]["samples"] == 8 and rows["fmt-agents"]["samples"] == 4  # numbers, not text
    table = {r["evaluation"]: r for r in table_rows(cli("evaluations", "--lake", lake.root).stdout,
                                                    ["evaluation", "fingerprint", "dataset", "models", "last_run"])}
    assert set(table) == set(rows)
    for name, row in rows.items():
        assert table[name] == {k: row[k] for k in table[name]}


def test_compare_means_are_the_tables_values(lake):
    args = ("compare", "-e", "fmt-small", "--lake", lake.root)
    rows = as_json(*args)
    same_as_csv(rows, as_csv(*args))
    assert len(rows) == 4  # 2 metrics x 2 models
    scores = lake.read("scores", where={"metric": "token_f1", "model": "sys"}).filter(pl.col("status") == "scored")
    sys_f1 = next(r for r in rows if r["metric"] == "token_f1" and r["model"] == "sys")
    assert sys_f1["mean"] == pytest.approx(scores["value"].mean(), rel=1e-12) and 0 < sys_f1["mean"] < 1
    assert sys_f1["n_scored"] == sys_f1["n_total"] == 8 and sys_f1["ci_low"] < sys_f1["mean"] < sys_f1["ci_high"]
    assert {r["model"] for r in rows if r["winner"]} == {"ref"}
    out = cli(*args).stdout
    table = table_rows(out, ["metric", "direction", "model", "mean [95% CI]", "n", "tie group"], title="fmt-small@")
    assert len(table) == len(rows)
    for t, r in zip(table, rows):
        shown = ("★ " if r["winner"] else "") + f"{r['mean']:.4g} [{r['ci_low']:.4g}, {r['ci_high']:.4g}]"
        assert (t["metric"], t["model"], t["mean [95% CI]"]) == (r["metric"], r["model"], shown)
        assert t["n"] == f"{r['n_scored']}/{r['n_total']}" and t["tie group"] == str(r["tie_group"])


def test_compare_pairwise_rows_and_notes_on_stderr(lake, tmp_path):
    junit = tmp_path / "gate.xml"
    result = cli("compare", "-e", "fmt-small", "--lake", lake.root, "--pairwise", "--junit", str(junit), "--format", "json")
    rows = json.loads(result.stdout)  # the "wrote gate.xml" line is not in it
    assert "wrote" in result.stderr and junit.exists()
    same_as_csv(rows, as_csv("compare", "-e", "fmt-small", "--lake", lake.root, "--pairwise"))
    table = table_rows(cli("compare", "-e", "fmt-small", "--lake", lake.root).stdout,
                       ["baseline", "candidate", "metric", "delta", "delta [95% CI]", "detectable", "retention", "test", "p",
                        "p_holm", "effect", "verdict"], title="fmt-small@")
    assert len(rows) == len(table) == 2  # ref against the baseline sys, per metric
    for t, r in zip(table, rows):
        assert (t["baseline"], t["candidate"], t["metric"], t["verdict"]) == ("sys", "ref", r["metric"], r["verdict"])
        assert t["delta"] == f"{r['delta']:.4f}" and t["p_holm"] == f"{round(r['p_holm'], 6):.4f}"
        assert isinstance(r["delta_ci_low"], float) and r["delta_ci_low"] <= r["delta"] <= r["delta_ci_high"]


def test_compare_with_every_evaluation(lake):
    rows = as_json("compare", "--lake", lake.root)
    assert {r["evaluation"].split("@")[0] for r in rows} == {"fmt-small", "fmt-agents"}


def test_episodes(lake):
    args = ("episodes", "-e", "fmt-agents", "--lake", lake.root)
    rows = as_json(*args)
    same_as_csv(rows, as_csv(*args))
    assert [(r["oracle"], r["k"]) for r in rows] == [("episode_pass", k) for k in (1, 2, 3, 4)]
    passes = lake.read("scores", where={"metric": "episode_pass"})["value"]
    assert rows[0]["pass^k"] == pytest.approx(passes.mean(), rel=1e-12) and rows[0]["tasks"] == 4
    columns = ["model", "oracle", "k", "pass^k", "pass^k 95% CI", "pass@k", "pass@k 95% CI", "tasks", "excluded (< k trials)"]
    table = table_rows(cli(*args, "--no-tasks").stdout, columns, title="pass^k and pass@k")
    assert len(table) == len(rows)
    for t, r in zip(table, rows):
        assert t["k"] == str(r["k"]) and t["pass^k"] == f"{r['pass^k']:.4f}" and t["pass@k"] == f"{r['pass@k']:.4f}"
        assert t["pass@k 95% CI"] == f"[{r['pass@k 95% CI low']:.3f}, {r['pass@k 95% CI high']:.3f}]"


def test_empty_listing_still_parses(lake, tmp_path):
    import shutil

    from resources.catalog import set_archived
    from resources.lake.resource import LakeStore

    copy = LakeStore(root=str(tmp_path / "lake"))
    shutil.copytree(lake.root, copy.root)
    for name in ("fmt-small", "fmt-agents"):
        set_archived(copy, name, True)
    result = cli("evaluations", "--lake", copy.root, "--format", "json")
    assert json.loads(result.stdout) == [] and "no evaluations" in result.stderr
