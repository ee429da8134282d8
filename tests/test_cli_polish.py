"""What a new user sees (issue 19, polish): flags shown as flags in ``--help``, whole first
sentences without RST markup in ``datasets``, ``sql --out``, defaults that never write into
the project, and library noise silenced while warnings the user can act on stay."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.cli.common import first_sentence

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def test_help_shows_boolean_flags_without_a_value_type():
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0
    assert "<bool>" not in result.output
    flag_lines = [line for line in result.output.splitlines() if "--offline" in line or "--help" in line]
    assert len(flag_lines) == 2 and not any("<" in line.split("│")[1] for line in flag_lines if "│" in line)
    # options that take a value still show its type
    assert "<int range>" in result.output and "<str>" in result.output
    for command in ("--help", "sql --help", "score --help", "export --help"):
        assert "<bool>" not in runner.invoke(app, command.split(), env={"COLUMNS": "160"}).output, command


@pytest.mark.parametrize("doc, expected", [
    ("SF-RES data-to-text (Wen et al., 2015) from UniEval: ratings 1-6 (informativeness,\n    naturalness, overall). More.",
     "SF-RES data-to-text (Wen et al., 2015) from UniEval: ratings 1-6 (informativeness, naturalness, overall)."),
    ('SelfAware (Yin et al., 2023): ``{"example": [...]}``.\n\n    Second paragraph.', 'SelfAware (Yin et al., 2023): {"example": [...]}.'),
    ("Uses :class:`resources.lake.resource.LakeStore` and `x`", "Uses resources.lake.resource.LakeStore and x"),
    (None, ""),
])
def test_first_sentence(doc, expected):
    assert first_sentence(doc) == expected


def test_datasets_shows_whole_first_sentences_without_backticks():
    from resources.datasets import DATASETS

    result = runner.invoke(app, ["datasets"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "``" not in result.output and "`" not in result.output
    # the sentence that was cut at the end of its first docstring line
    assert "ratings 1-6 (informativeness, naturalness, overall)" in result.output or \
        first_sentence(DATASETS["sfres"].__doc__) in result.output
    for kind, cls in DATASETS.items():
        assert first_sentence(cls.__doc__) in result.output, kind


@pytest.fixture(scope="module")
def lake_root(tmp_path_factory) -> str:
    from resources.lake.tables import LakeTables

    lake = LakeTables(root=str(tmp_path_factory.mktemp("out") / "lake"))
    rows = [{"model": "m", "fingerprint": "0" * 64, "dataset": "d", "sample_id": str(i), "metric": "bleu",
             "value": float(i) / 4, "direction": "maximize", "dimension": "x", "locality": "local", "status": "scored",
             "detail": "{}", "signature": "bleu|v:1", "run_id": "r",
             "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)} for i in range(5)]
    lake.replace("scores", rows, {"model": "m", "fingerprint": "0" * 64})
    return lake.root


QUERY = "select sample_id, value, [value, value * 2] as pair from scores order by sample_id"


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_sql_out_writes_the_result_in_the_format_of_its_suffix(lake_root, tmp_path, suffix):
    out = tmp_path / "sub" / f"result{suffix}"
    result = runner.invoke(app, ["sql", "--lake", lake_root, "--out", str(out), QUERY])
    assert result.exit_code == 0, result.output
    assert f"wrote 5 rows x 3 columns to {out}" in result.output.replace("\n", "")
    if suffix == ".parquet":
        frame = pl.read_parquet(out)
        assert frame["pair"].to_list()[1] == [0.25, 0.5]
    elif suffix == ".csv":
        frame = pl.read_csv(out)
        assert json.loads(frame["pair"][1]) == [0.25, 0.5]  # nested values as JSON text
    else:
        rows = json.loads(out.read_text())
        assert rows[1] == {"sample_id": "1", "value": 0.25, "pair": [0.25, 0.5]}
        frame = pl.DataFrame(rows)
    assert frame["sample_id"].cast(pl.String).to_list() == ["0", "1", "2", "3", "4"]
    assert frame["value"].to_list() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_sql_out_refuses_an_unknown_suffix_and_copy_stays_refused(lake_root, tmp_path):
    result = runner.invoke(app, ["sql", "--lake", lake_root, "--out", str(tmp_path / "r.xlsx"), QUERY])
    assert result.exit_code == 1 and "unknown file type '.xlsx'" in result.output and ".parquet" in result.output
    assert not (tmp_path / "r.xlsx").exists()
    target = tmp_path / "copy.parquet"
    copy = runner.invoke(app, ["sql", "--lake", lake_root, f"copy scores to '{target}' (format parquet)"])
    assert copy.exit_code == 1 and not target.exists()


def _default(command: str, param: str):
    cmd = typer.main.get_command(app).commands[command]
    return next(p for p in cmd.params if p.name == param).default


def test_defaults_never_point_into_the_project_or_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command, param in (("demo-bfcl", "outputs_dir"), ("crossval", "out")):
        default = Path(_default(command, param))
        assert not default.is_absolute(), (command, default)
        assert default.resolve().is_relative_to(tmp_path), (command, default)


def test_quiet_drops_only_what_the_user_cannot_act_on(caplog, monkeypatch):
    import warnings

    from pipelines.quiet import quiet_libraries

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    quiet_libraries()
    import os

    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    sacre = logging.getLogger("sacrebleu")
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        from sacrebleu.metrics import BLEU

        BLEU().corpus_score([f"a tokenized line {i} ." for i in range(120)], [[f"a tokenized line {i} ." for i in range(120)]])
        sacre.warning("a sacrebleu warning about the user's own settings")
    messages = [r.getMessage() for r in caplog.records if r.name == "sacrebleu"]
    assert not any("detokenize" in m or "tokenized period" in m for m in messages), messages
    assert "a sacrebleu warning about the user's own settings" in messages
    assert logging.getLogger("great_expectations.data_context.types.base").getEffectiveLevel() >= logging.WARNING
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        quiet_libraries()
        warnings.warn("`AutomationCondition` is currently in beta, and may have breaking changes", UserWarning)
        warnings.warn("`FreshnessPolicy` is superseded and its usage is discouraged.", FutureWarning)
        warnings.warn("dataset row 3: column 'x' is empty", UserWarning)
    assert [str(w.message) for w in caught] == ["dataset row 3: column 'x' is empty"]


def _stat(metric, model, mean, winner=False, lo=None, hi=None):
    return {"kind": "model_metric", "metric": metric, "model": model, "mean": mean, "is_winner": winner, "ci_low": lo, "ci_high": hi}


def test_side_by_side_puts_each_evaluation_in_its_own_column():
    from pipelines.cli.report import side_by_side

    table = side_by_side({
        "a@1": [_stat("bleu", "m", 20.0, True, 18.0, 22.0), _stat("rouge_l_f", "m", 0.5),
                {"kind": "pairwise", "metric": "bleu", "model": "m"}],
        "b@2": [_stat("bleu", "m", 25.5), _stat("token_f1", "m", 0.25)],
    })
    rows = {r["metric"]: r for r in table.to_dicts()}
    assert list(table.columns) == ["metric", "model", "a@1", "b@2", "Δ b@2 vs first"]
    assert rows["bleu"]["a@1"] == "★ 20 [18, 22]" and rows["bleu"]["b@2"] == "25.5"
    assert rows["bleu"]["Δ b@2 vs first"] == pytest.approx(5.5)
    # a metric only one evaluation has stays, shown as ∅ in the other, with no Δ
    assert rows["rouge_l_f"]["b@2"] == "∅" and rows["rouge_l_f"]["Δ b@2 vs first"] is None
    assert rows["token_f1"]["a@1"] == "∅"


@pytest.mark.slow
def test_compare_with_force_shows_both_evaluations(lake_copy, instance):
    from pipelines.runs.runner import run_evaluation
    from tests.conftest import small_spec

    lake, first = lake_copy
    second = run_evaluation(small_spec(name="sfres-other", limit=30), lake, instance)
    refused = runner.invoke(app, ["compare", "-e", "sfres-small", "--with", "sfres-other", "--lake", lake.root])
    assert refused.exit_code == 1 and "Pass --force" in refused.output
    result = runner.invoke(app, ["compare", "-e", "sfres-small", "--with", "sfres-other", "--force", "--lake", lake.root],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"{second.fingerprint[:12]} differs from {first.fingerprint[:12]}" in out
    a, b = f"sfres-small@{first.fingerprint[:12]}", f"sfres-other@{second.fingerprint[:12]}"
    assert out.index("differs from") < out.index("side by side")
    header = next(line for line in out.splitlines() if line.lstrip().startswith("metric") and a in line)
    assert b in header and f"Δ {b} vs first" in header
    # and then each evaluation's own tables
    assert f"{a}: mean [95% CI]" in out and f"{b}: mean [95% CI]" in out


@pytest.mark.parametrize("command", ["metrics", "datasets", "profiles"])
def test_listings_fit_an_80_column_terminal(command):
    """No line wider than the terminal: a table that does not fit becomes records whose long
    values wrap under themselves (the `tool_calls` row, long descriptions)."""
    out = runner.invoke(app, [command], env={"COLUMNS": "80"}).output
    assert out.strip() and max(len(line) for line in out.splitlines()) <= 80, command
    if command == "metrics":  # a wrapped value keeps every score name
        assert "tool_call_precision" in out and "tool_call_recall" in out


def test_help_paragraphs_reflow_to_the_terminal():
    """Docstring paragraphs are re-flowed, not shown with their source line breaks
    ("A partition holds one variant per / metric: ..." at 80 columns)."""
    out = runner.invoke(app, ["score", "--help"], env={"COLUMNS": "80"}).output
    assert "variant per metric" in " ".join(out.split())
    assert all(len(line) <= 80 for line in out.splitlines())
    lines = [line.strip() for line in out.splitlines()]
    assert "variant per" not in lines and "metric's" not in lines  # no stub lines left by a source break


def test_write_frame_counts_in_words(tmp_path):
    from pipelines.cli.common import write_frame

    assert write_frame(pl.DataFrame({"a": [1]}), tmp_path / "x.csv").startswith("wrote 1 row x 1 column to")
    assert write_frame(pl.DataFrame({"a": [1, 2], "b": [3, 4]}), tmp_path / "y.csv").startswith("wrote 2 rows x 2 columns to")


def test_no_progress_bar_when_stderr_is_not_a_terminal(capfd):
    """A CI log or a redirected run gets no `\\r` bar lines (tqdm's disable=None)."""
    from metric_ops import Sample
    from metric_ops.scoring.suite import score_suite

    samples = [Sample(str(i), "q", ("the cat sat",)) for i in range(300)]
    score_suite({"b": ("bleu", {})}, samples, ["a cat sat"] * 300, workers=1, progress=True)
    assert "scoring" not in capfd.readouterr().err


def test_a_run_says_what_it_reused(tmp_path, instance):
    """`facetlake run --help` promises the run says what it reused: the assets log it at INFO
    (below the console's level), so the in-process run collects it for the CLI to print."""
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path / "lake"))
    first = run_evaluation(small_spec(name="says-reused", limit=8, metrics=("bleu", "token_f1")), lake, instance)
    assert first.reused == []
    again = run_evaluation(small_spec(name="says-reused", limit=8, metrics=("bleu", "token_f1")), lake, instance)
    assert again.reused[0].startswith("sfres-system: outputs unchanged since run ")
    assert again.reused[1].startswith("sfres-system: scores kept for bleu, token_f1") and "same inputs" in again.reused[1]
