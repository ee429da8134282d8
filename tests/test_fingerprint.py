"""The configuration fingerprint: SHA-256 of everything but the model."""

from __future__ import annotations

import json

import pytest

from resources.catalog.spec import EvaluationSpec, SpecError, fingerprint_of, resolve

BASE = {"name": "x", "dataset": {"kind": "sfres", "limit": 20}, "models": {"a": "precomputed:column=system_output"},
        "metrics": ["bleu"]}


def fp(**changes):
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        data[key] = value
    return resolve(EvaluationSpec.from_mapping(data)).fingerprint


def test_fingerprint_is_64_lowercase_hex_sha256_of_its_inputs():
    resolved = resolve(EvaluationSpec.from_mapping(BASE))
    assert len(resolved.fingerprint) == 64 and resolved.fingerprint == resolved.fingerprint.lower()
    assert resolved.fingerprint == fingerprint_of(resolved.fingerprint_inputs)
    assert resolved.fingerprint_inputs["dataset_content_sha256"] == resolved.dataset_hash


def test_model_name_metrics_and_evaluation_name_do_not_enter_it():
    base = fp()
    assert fp(models={"b": "precomputed:column=reference"}) == base
    assert fp(metrics=["rouge_l", "token_f1"]) == base
    assert fp(name="renamed") == base


def test_dataset_content_generation_adapter_and_annotators_do():
    base = fp()
    assert fp(dataset={"kind": "sfres", "limit": 21}) != base
    assert fp(generation={"temperature": 0.7}) != base
    assert fp(adapter={"template": "Q: {input}"}) != base
    assert fp(annotators=[{"kind": "regex", "pattern": "(\\d+)"}]) != base


def test_same_content_under_another_path_and_name_has_the_same_fingerprint(tmp_path):
    from resources.datasets import DATA_DIR

    copy = tmp_path / "renamed.json"
    copy.write_bytes((DATA_DIR / "unieval" / "sfres.json").read_bytes())
    assert fp(dataset={"kind": "sfres", "limit": 20, "path": str(copy), "name": "other"}) == fp()


@pytest.mark.parametrize(
    "data,message",
    [
        ({**BASE, "modles": {}}, "unknown keys"),
        ({k: v for k, v in BASE.items() if k != "models"}, "missing key 'models'"),
        ({**BASE, "models": {"Bad Name": "precomputed:x"}}, "must match"),
    ],
)
def test_bad_specs_name_the_problem(data, message):
    with pytest.raises(SpecError, match=message):
        EvaluationSpec.from_mapping(data)
