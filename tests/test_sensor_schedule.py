"""The inbox sensor and the evaluation schedule, against a real lake and instance."""

from __future__ import annotations

import json

import dagster as dg

from pipelines.sensors import InboxConfig, ScheduleConfig, evaluation_schedule, inbox_sensor
from resources.catalog import model_spec


def test_inbox_sensor_registers_new_files_and_requests_their_runs(lake_copy, instance, tmp_path):
    lake, resolved = lake_copy
    inbox = tmp_path / "inbox"
    (inbox / "sfres-small").mkdir(parents=True)
    (inbox / "not-registered").mkdir()
    outputs = inbox / "sfres-small" / "My-New-Model.jsonl"
    outputs.write_text("\n".join(json.dumps({"sample_id": str(i), "output": "there is a restaurant"}) for i in range(40)))
    (inbox / "not-registered" / "other.jsonl").write_text('{"sample_id": "0", "output": "x"}\n')
    resources = {"lake": lake, "inbox": InboxConfig(path=str(inbox))}

    context = dg.build_sensor_context(instance=instance, resources=resources)
    result = inbox_sensor(context)
    assert isinstance(result, dg.SensorResult)
    assert len(result.run_requests) == 1
    request = result.run_requests[0]
    assert request.partition_key == f"{resolved.fingerprint}|my-new-model"
    assert result.dynamic_partitions_requests[0].partition_keys == ["my-new-model"]
    assert model_spec(lake, "my-new-model") == f"precomputed:{outputs.resolve()}"

    # the cursor remembers the file: the next tick requests nothing
    again = inbox_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=result.cursor))
    assert isinstance(again, dg.SkipReason) and "waiting on evaluations ['not-registered']" in again.skip_message


def test_inbox_sensor_run_request_materialises(lake_copy, instance, tmp_path):
    """The requested partition runs through the real evaluation job and scores the new model."""
    from pipelines.runner import materialize_model

    lake, resolved = lake_copy
    inbox = tmp_path / "inbox" / "sfres-small"
    inbox.mkdir(parents=True)
    (inbox / "dropped.jsonl").write_text("\n".join(json.dumps({"sample_id": str(i), "output": "i am sorry"}) for i in range(40)))
    result = inbox_sensor(dg.build_sensor_context(instance=instance, resources={"lake": lake, "inbox": InboxConfig(path=str(inbox.parent))}))
    instance.add_dynamic_partitions("model", result.dynamic_partitions_requests[0].partition_keys)
    materialize_model("dropped", resolved.fingerprint, lake, instance)
    assert lake.read("scores", where={"model": "dropped", "metric": "bleu"}).height == 40


def test_schedule_requests_every_model_of_the_configured_evaluation(lake_copy, instance):
    lake, resolved = lake_copy
    context = dg.build_schedule_context(instance=instance, resources={"lake": lake, "schedule_config": ScheduleConfig(evaluation="sfres-small")})
    requests = list(evaluation_schedule(context))
    assert [r.partition_key for r in requests] == [f"{resolved.fingerprint}|sfres-system"]
    assert requests[0].tags["facetlake/scheduled"] == "true"


def test_schedule_without_configuration_skips_with_a_reason(lake_copy, instance):
    lake, _ = lake_copy
    for name, reason in [("", "FACETLAKE_SCHEDULED_EVALUATION"), ("nope", "not registered")]:
        context = dg.build_schedule_context(instance=instance, resources={"lake": lake, "schedule_config": ScheduleConfig(evaluation=name)})
        result = evaluation_schedule(context)
        assert isinstance(result, dg.SkipReason) and reason in result.skip_message
