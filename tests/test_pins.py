"""Pinned datasets (issue 31): `facetlake evaluations pin NAME` keeps an evaluation on its
dataset content; a scheduled run (the real sensor on a real instance) or a CLI run whose
source changed scores nothing and says what changed; unpinned, the change registers a new
fingerprint as before."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.runs.register import register
from pipelines.sensors import evaluation_scheduler
from resources.catalog import evaluation_row, evaluation_spec
from resources.catalog.writes import PinnedDatasetChanged
from tests.test_recurring import N, spec_for, write_dataset
from tests.test_sensor_schedule import deployment  # noqa: F401 - the fixture

runner = CliRunner()
EDITED = {3, 7, 11}


def _edit(tmp_path):
    """The same file with 3 questions edited and 2 samples added."""
    write_dataset(tmp_path, "pinned.jsonl", n=N + 2, question=lambda i: f"question {i}, reworded?" if i in EDITED else f"question {i}?")


def _tick(d):
    context = dg.build_sensor_context(instance=d.instance, cursor=d.cursors.get("evaluation_scheduler"),
                                      resources={"lake": d.resources["lake"]})
    return evaluation_scheduler(context)


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_pinned_evaluation_scores_nothing_when_its_source_changes_and_says_why(deployment, tmp_path):  # noqa: F811
    d, lake = deployment, deployment.lake
    data = write_dataset(tmp_path, "pinned.jsonl")
    register(spec_for("pinned", data, {"bot": "heuristic:copy-input"}, schedule="0 6 * * *"), lake, d.instance)
    d.cursors["evaluation_scheduler"] = json.dumps({"pinned": {"last_tick": "2000-01-01T00:00:00+00:00"}})
    d.settle()
    first = evaluation_row(lake, "pinned")
    scores_before = lake.read("scores").height
    assert scores_before == N

    pinned = runner.invoke(app, ["evaluations", "pin", "pinned", "--lake", lake.root])
    assert pinned.exit_code == 0 and f"pinned at {first['dataset_hash'][:12]}" in pinned.output
    assert evaluation_spec(lake, "pinned").dataset["pin"] == first["dataset_hash"]
    assert evaluation_row(lake, "pinned")["fingerprint"] == first["fingerprint"]  # a pin is not in the fingerprint

    _edit(tmp_path)
    d.cursors["evaluation_scheduler"] = json.dumps({"pinned": {"last_tick": "2000-01-01T00:00:00+00:00"}})
    result = _tick(d)
    assert not result.run_requests
    said = result.skip_reason.skip_message
    assert (f"pinned at {first['dataset_hash'][:12]}; the source changed" in said
            and "2 added, 0 removed, 3 changed samples (17 unchanged)" in said), said
    assert evaluation_row(lake, "pinned")["fingerprint"] == first["fingerprint"] and lake.read("scores").height == scores_before

    # the CLI says the same and scores nothing (exit 0: nothing failed)
    spec = tmp_path / "pinned.yaml"
    mapping = evaluation_spec(lake, "pinned").to_mapping()
    spec.write_text(json.dumps(mapping))
    ran = runner.invoke(app, ["run", str(spec), "--lake", lake.root])
    assert ran.exit_code == 0, ran.output
    assert "pinned at" in ran.output and "3 changed samples" in " ".join(ran.output.split())
    assert lake.read("scores").height == scores_before
    with pytest.raises(PinnedDatasetChanged) as caught:
        register(evaluation_spec(lake, "pinned"), lake, d.instance)
    assert sorted(caught.value.diff.changed) == ["q11", "q3", "q7"] and caught.value.diff.added == ("q20", "q21")

    # unpinned: the change registers a new fingerprint, as for any evaluation
    assert runner.invoke(app, ["evaluations", "pin", "pinned", "--unpin", "--lake", lake.root]).exit_code == 0
    assert "pin" not in evaluation_spec(lake, "pinned").dataset
    d.cursors["evaluation_scheduler"] = json.dumps({"pinned": {"last_tick": "2000-01-01T00:00:00+00:00"}})
    d.settle()
    assert evaluation_row(lake, "pinned")["fingerprint"] != first["fingerprint"]


def test_pin_values_are_checked():
    from resources.catalog.spec import SpecError

    base = {"name": "p", "models": {"m": "precomputed:column=system_output"}, "metrics": ["bleu"]}
    for bad in ("abc", 12, "CURRENT"):
        with pytest.raises(SpecError, match="dataset.pin must be a content SHA-256"):
            spec_for_mapping = {**base, "dataset": {"kind": "sfres", "pin": bad}}
            from resources.catalog.spec import EvaluationSpec

            EvaluationSpec.from_mapping(spec_for_mapping)


def test_pin_current_in_a_spec_keeps_the_content_first_registered(tmp_path, instance):
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    data = write_dataset(tmp_path, "pinned.jsonl")
    spec = spec_for("current-pin", data, {"bot": "heuristic:copy-input"})
    spec.dataset["pin"] = "current"
    from pipelines.runs.runner import run_evaluation

    first = run_evaluation(spec, lake, instance)  # nothing registered yet: pins the content it registers
    assert register(spec, lake, instance).fingerprint == first.fingerprint  # same content: fine
    _edit(tmp_path)
    with pytest.raises(PinnedDatasetChanged, match=r"pinned at .*: 2 added, 0 removed, 3 changed samples") as caught:
        register(spec, lake, instance)
    assert caught.value.pinned == first.dataset_hash and caught.value.found != first.dataset_hash
    assert evaluation_row(lake, "current-pin")["fingerprint"] == first.fingerprint
