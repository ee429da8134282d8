"""What a fresh-clone trial of the README and docs/recurring.md found, each as a test:
the next scheduled run is in the future, a CI gate never passes on nothing measured,
restoring an active evaluation says so, a misspelt inbox folder gets a "did you mean",
models the inbox added show in `run`'s header, and Ctrl-C is one line with status 130."""

from __future__ import annotations

import datetime as dt

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.runs.register import register
from pipelines.runs.runner import run_evaluation
from tests.test_recurring import fresh_instance, lake, spec_for, write_dataset, write_outputs  # noqa: F401 - fixtures


def test_next_run_is_the_first_tick_after_now(lake, fresh_instance, tmp_path):  # noqa: F811
    register(spec_for("hourly", write_dataset(tmp_path), {"m": "precomputed:column=answer"}, schedule="15 * * * *"), lake, fresh_instance)
    out = CliRunner().invoke(app, ["evaluations", "--lake", lake.root, "--format", "json"])
    assert out.exit_code == 0, out.output
    import json

    (row,) = json.loads(out.output)
    shown = dt.datetime.strptime(row["next_run"], "%Y-%m-%d %H:%M").replace(tzinfo=dt.timezone.utc)
    now = dt.datetime.now(dt.timezone.utc)
    assert now < shown <= now + dt.timedelta(hours=1) and shown.minute == 15


def test_fail_on_regression_fails_when_nothing_was_compared(lake, fresh_instance, tmp_path):  # noqa: F811
    register(spec_for("fresh", write_dataset(tmp_path), {"m": "precomputed:column=answer"}), lake, fresh_instance)
    gate = CliRunner().invoke(app, ["compare", "--fail-on-regression", "--lake", lake.root])
    assert gate.exit_code == 1 and "nothing to gate on" in gate.output
    assert CliRunner().invoke(app, ["compare", "--lake", lake.root]).exit_code == 0  # without the gate it is information


def test_restoring_an_active_evaluation_says_nothing_changed(lake, fresh_instance, tmp_path):  # noqa: F811
    register(spec_for("kept", write_dataset(tmp_path), {"m": "precomputed:column=answer"}), lake, fresh_instance)
    out = CliRunner().invoke(app, ["evaluations", "restore", "kept", "--lake", lake.root])
    assert out.exit_code == 0 and "already active" in out.output and "restored" not in out.output


def test_a_misspelt_inbox_folder_gets_a_did_you_mean(lake, fresh_instance, tmp_path):  # noqa: F811
    from pipelines.sensors import _did_you_mean

    register(spec_for("sfres-daily", write_dataset(tmp_path), {"m": "precomputed:column=answer"}), lake, fresh_instance)
    assert _did_you_mean(lake, ["sfres-dayly"]) == "; did you mean 'sfres-daily' for folder 'sfres-dayly'?"
    assert _did_you_mean(lake, ["completely-else"]) == ""


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_run_header_names_models_the_inbox_added(lake, fresh_instance, tmp_path):  # noqa: F811
    from resources.catalog import register_model

    data = write_dataset(tmp_path)
    spec = spec_for("withinbox", data, {"m1": f"precomputed:{write_outputs(tmp_path, 'm1.jsonl', correct=5)}"})
    run_evaluation(spec, lake, fresh_instance)
    register_model(lake, "withinbox", "bot-v3", f"precomputed:{write_outputs(tmp_path, 'bot-v3.jsonl', correct=9)}", source="inbox")
    path = tmp_path / "withinbox.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec.to_mapping()))
    out = CliRunner().invoke(app, ["run", str(path), "--lake", lake.root])
    assert out.exit_code == 0, out.output
    assert "also models added by the inbox: bot-v3" in out.output


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    import pipelines.cli as cli

    class DagsterExecutionInterruptedError(BaseException):  # the name Dagster's interrupt carries
        pass

    def interrupted_run():
        try:
            raise DagsterExecutionInterruptedError()
        except BaseException as exc:
            raise RuntimeError("step failed") from exc

    for raiser in (interrupted_run, lambda: (_ for _ in ()).throw(KeyboardInterrupt())):
        monkeypatch.setattr(cli, "app", raiser)
        with pytest.raises(SystemExit) as stop:
            cli.main()
        assert stop.value.code == 130
        err = capsys.readouterr().err
        assert err.strip().splitlines() == ["interrupted: rows already stored are kept; run the same command again to resume"]


def test_side_tables_of_a_pair_are_reported_even_with_no_rows(lake, fresh_instance, tmp_path):  # noqa: F811
    """token_logprobs / lm_eval_responses of a precomputed pair: materialised with 0 rows, never 'missing' forever."""
    import dagster as dg

    from resources.catalog import evaluation_row

    run_evaluation(spec_for("sides", write_dataset(tmp_path), {"m1": f"precomputed:{write_outputs(tmp_path, 'm1.jsonl', correct=5)}"}),
                   lake, fresh_instance)
    key = f"sides@{evaluation_row(lake, 'sides')['fingerprint'][:12]}:m1"
    for side in ("token_logprobs", "lm_eval_responses"):
        assert fresh_instance.get_materialized_partitions(dg.AssetKey(side)) == {key}
        event = fresh_instance.get_latest_materialization_event(dg.AssetKey(side))
        assert event.asset_materialization.metadata["dagster/row_count"].value == 0


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_the_spec_is_read_once_per_catalog_version(lake, fresh_instance, tmp_path, monkeypatch):  # noqa: F811
    """issue 19: one run reads and validates the evaluation spec once, not once per asset."""
    import resources.catalog.reads as reads

    calls = []
    original = reads._read_evaluation_spec
    monkeypatch.setattr(reads, "_read_evaluation_spec", lambda lake, ref: calls.append(ref) or original(lake, ref))
    reads._SPEC_CACHE.clear()
    spec = spec_for("once", write_dataset(tmp_path), {"m1": f"precomputed:{write_outputs(tmp_path, 'm1.jsonl', correct=5)}",
                                                       "m2": f"precomputed:{write_outputs(tmp_path, 'm2.jsonl', correct=8)}"})
    run_evaluation(spec, lake, fresh_instance)
    n_first = len(calls)
    assert 0 < n_first <= 2  # samples, generations, annotations, scores, analysis of two pairs share one read
    run_evaluation(spec, lake, fresh_instance)  # registering again touches the catalog: at most one read for the run
    assert len(calls) <= n_first + 1
    from pipelines.runs.runner import rescore

    rescore(["chrf"], lake, fresh_instance, fingerprint="once")  # adds a metric: a new catalog version, read again
    assert len(calls) > n_first
    n_rescore = len(calls)
    reads.evaluation_spec(lake, calls[-1])
    assert len(calls) == n_rescore  # unchanged catalog: served from the cache
    assert "chrf" in reads.evaluation_spec(lake, calls[-1]).metrics
