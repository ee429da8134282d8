"""Secrets are refused by name and by shape wherever a spec, a judge spec or a CLI flag is
stored (issue 26, fault 2): the refusal is one line naming the path and the environment
variable field to use, never the key; a real lake (``facetlake sql`` and every version of
the Delta history) and the Dagster instance hold no trace of a sentinel key."""

from __future__ import annotations

import glob
import json
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from metric_ops.secrets import SecretInputError, find_secrets, refuse_secrets
from pipelines.cli import app
from resources.catalog.spec import EvaluationSpec, SpecError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

# realistic shapes, unique per test session; assembled so no literal key sits in the source
TAG = uuid.uuid4().hex[:8].upper() + uuid.uuid4().hex[:8]
OPENAI = "sk-proj-" + "Q7" + TAG + "xY3vB9nM2kL5pR8tW1zC4"
ANTHROPIC = "sk-ant-api03-" + TAG + "Zx9Kp2Lm7Qw4Rt6Yu1"
PLAIN = "SENTINEL" + TAG  # a key without a recognisable shape: refused only by its name
AWS = "AKIA" + "Q3ZT7WXR2KPL9M4N"
GITHUB = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJzZW50aW5lbCJ9." + "Rk3xN9qT2vL7wP4sY8zB1cD6"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"

BASE = {"name": "sec", "dataset": {"kind": "sfres", "limit": 5},
        "models": {"sfres-system": "precomputed:column=system_output"}, "metrics": ["exact_match"]}

# (what to add to BASE, the path the message must name, the secret that must not be echoed)
SPELLINGS = [
    ({"runtime": {"apikey": PLAIN}}, "runtime.apikey", PLAIN),
    ({"runtime": {"API-Key": PLAIN}}, "runtime.API-Key", PLAIN),
    ({"runtime": {"apiKey": PLAIN}}, "runtime.apiKey", PLAIN),
    ({"runtime": {"OPENAI_KEY": PLAIN}}, "runtime.OPENAI_KEY", PLAIN),
    ({"runtime": {"hf_token": PLAIN}}, "runtime.hf_token", PLAIN),
    ({"runtime": {"password": PLAIN}}, "runtime.password", PLAIN),
    ({"runtime": {"password": 84736291}}, "runtime.password", "84736291"),  # YAML reads it as an int
    ({"runtime": {"auth": {"user": "me", "pass": "hunter2hunter2"}}}, "runtime.auth.pass", "hunter2hunter2"),
    ({"runtime": {"extra_headers": {"Authorization": "Bearer " + OPENAI}}}, "runtime.extra_headers.Authorization", OPENAI),
    ({"runtime": {"extra_headers": {"Authorization": PLAIN}}}, "runtime.extra_headers.Authorization", PLAIN),
    ({"runtime": {"extra_headers": {"x-api-key": PLAIN}}}, "runtime.extra_headers.x-api-key", PLAIN),
    ({"runtime": {"extra_headers": {"Ocp-Apim-Subscription-Key": PLAIN}}}, "runtime.extra_headers.Ocp-Apim-Subscription-Key", PLAIN),
    ({"runtime": {"note": OPENAI}}, "runtime.note", OPENAI),
    ({"runtime": {"note": ANTHROPIC}}, "runtime.note", ANTHROPIC),
    ({"runtime": {"comment": f"for the record: {AWS}"}}, "runtime.comment", AWS),
    ({"runtime": {"x": GITHUB}}, "runtime.x", GITHUB),
    ({"runtime": {"session": JWT}}, "runtime.session", JWT),
    ({"runtime": {"hub": HF}}, "runtime.hub", HF),
    ({"runtime": {"headers": [{"name": "a"}, {"values": ["ok", OPENAI]}]}}, "runtime.headers[1].values[1]", OPENAI),
    ({"annotators": [{"kind": "length", "token": PLAIN}]}, "annotators[0].token", PLAIN),
    ({"metric_params": {"g_eval": {"judge": f"api:judge@https://judge.example.com/v1?api_key={PLAIN}"}}},
     "metric_params.g_eval.judge", PLAIN),
    ({"models": {"remote": f"api:gpt-4o-mini@https://user:{PLAIN}@llm.example.com/v1"}}, "models.remote", PLAIN),
    ({"dataset": {"kind": "sfres", "limit": 5, "headers": {"Authorization": "Basic " + "dXNlcjpTM2NyZXQ5OTk="}}},
     "dataset.headers.Authorization", "dXNlcjpTM2NyZXQ5OTk="),
]


def _one_line_refusal(message: str, path: str, secret: str) -> None:
    assert "\n" not in message
    assert path in message and "looks like a secret" in message
    assert secret not in message
    assert "environment variable" in message or "$FACETLAKE_JUDGE_API_KEY" in message


@pytest.mark.parametrize("extra, path, secret", SPELLINGS, ids=[s[1] for s in SPELLINGS])
def test_each_spelling_is_refused_naming_the_path_and_the_fix(extra, path, secret):
    with pytest.raises(SpecError) as caught:
        EvaluationSpec.from_mapping({**BASE, **extra}, where="spec.yaml")
    _one_line_refusal(str(caught.value), f"spec.yaml: {path}", secret)


def test_the_fix_names_the_variable_field_for_the_place_of_the_secret():
    with pytest.raises(SpecError, match=r"runtime\.api_key_env: "):
        EvaluationSpec.from_mapping({**BASE, "runtime": {"api_key": PLAIN}})
    with pytest.raises(SpecError, match=r"\$FACETLAKE_JUDGE_API_KEY"):
        EvaluationSpec.from_mapping({**BASE, "metric_params": {"g_eval": {"judge": f"api:j@https://u:{PLAIN}@h.example/v1"}}})
    with pytest.raises(SpecError, match=r"privacy\.model\.api_key_env"):
        EvaluationSpec.from_mapping({**BASE, "privacy": {"anonymise": "model", "model": {"base_url": "http://127.0.0.1:9/v1",
                                                                                          "model": "m", "api_key": PLAIN}}})


def test_a_key_used_as_a_mapping_key_is_not_echoed_either():
    [finding] = find_secrets({"runtime": {OPENAI: 1}})
    assert finding.path == "runtime.<secret-looking key>" and OPENAI not in str(finding)


# --------------------------------------------------------------------------- no false positives

LEGITIMATE = {
    "runtime": {"api_key_env": "OPENAI_API_KEY", "concurrency": 4, "max_tokens": 128, "tokens_in": 10, "tokenizer": "gpt2",
                "eos_token": "</s>", "pad_token": "<pad>", "none_token": "NONE", "sort_key": "id", "key_variable": "GROQ_API_KEY", "password_env": "DB_PASSWORD",
                "token_limit": 4096, "cache_key": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "api_key": "", "token": None, "auth": {"type": "bearer", "token_env": "MY_TOKEN"}, "api_mode": "chat"},
    "models": {"a": "api:gpt-4o-mini@https://api.openai.com/v1", "b": "precomputed:/data/sk-learn-benchmarks-2024.jsonl",
               "c": "hf:/models/Qwen2.5-0.5B-Instruct", "d": "api:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1"},
    "fingerprint": "0123456789abcdef" * 4,
    "text": "The bearer of the news was a long-distance runner; Basic reasoning suffices.",
    "metrics": ["token_f1", "rouge_l", "max_tokens"],
    "dataset": {"path": "/data/hf_datasets/squad_v2/validation.jsonl", "mapping": {"sample_id": "id", "references": "answers"}},
}


def test_legitimate_values_are_not_secrets():
    assert find_secrets(LEGITIMATE) == []


def test_every_shipped_spec_still_registers_and_every_profile_loads(tmp_path, dagster_home):
    specs = sorted(glob.glob(str(PROJECT_ROOT / "pipelines/configs/*.yaml")) + glob.glob(str(PROJECT_ROOT / "examples/**/*.yaml"), recursive=True))
    assert len(specs) >= 6
    for path in specs:
        assert find_secrets(EvaluationSpec.from_yaml(path).to_mapping()) == [], path
        result = runner.invoke(app, ["register", path, "--lake", str(tmp_path / "lake")])
        assert result.exit_code == 0 and "registered" in result.output, (path, result.output)
    from resources.catalog.profiles import list_profiles

    assert {"technical_expert", "domain_expert", "compliance_officer"} <= set(list_profiles())


# --------------------------------------------------------------------------- every other place that stores


def test_judge_spec_param_and_lm_eval_args_are_refused_where_they_are_parsed():
    from metric_ops.judged.judging import JudgeSpecError, resolve_judge
    from metric_ops.registry import parse_param_overrides
    from resources.lm_eval.bridge import validate_section
    from resources.lm_eval.common import LmEvalError
    from resources.lm_eval.models import lm_eval_model

    with pytest.raises(JudgeSpecError) as caught:
        resolve_judge(f"api:judge@https://judge.example.com/v1?key={OPENAI}")
    _one_line_refusal(str(caught.value), "judge spec", OPENAI)
    for item, path in ((f"api_key={PLAIN}", "api_key"), (f"g_eval.judge=api:j@https://u:{PLAIN}@h.example/v1", "g_eval.judge"),
                       (OPENAI, "command-line parameter"), (f"headers={{Authorization: Bearer {OPENAI}}}", "headers.Authorization")):
        with pytest.raises(SecretInputError) as caught:
            parse_param_overrides([item])
        _one_line_refusal(str(caught.value), path, PLAIN if PLAIN in item else OPENAI)
    assert parse_param_overrides(["judge=api:gpt-4o-mini@https://api.openai.com/v1", "max_tokens=5"]) == {
        "*": {"judge": "api:gpt-4o-mini@https://api.openai.com/v1", "max_tokens": 5}}
    with pytest.raises(LmEvalError, match="model_args.api_key looks like a secret"):
        lm_eval_model("api:m@http://127.0.0.1:9/v1", model_args={"api_key": PLAIN})
    with pytest.raises(ValueError, match="model_args.token looks like a secret") as caught:
        validate_section({"task": "facetlake_selfaware_qa", "model_args": f"dtype=float32,token={PLAIN}"}, "spec: lm_eval")
    assert PLAIN not in str(caught.value)


def test_a_profile_with_a_secret_is_refused(tmp_path):
    from resources.catalog.profiles import ProfileError, load_profile

    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"name": "mine", "dimensions": ["factual"], "metrics": ["token_f1"],
                                    "output": {"form": "technical_table", "webhook_token": PLAIN}}))
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    _one_line_refusal(str(caught.value), "output.webhook_token", PLAIN)


def test_the_catalog_refuses_a_secret_added_after_parsing(tmp_path):
    """--profile / --anonymise / lm-eval run records change a parsed spec; the catalog checks
    what it stores, and add_metrics / register_model (facetlake score, the inbox) too."""
    from resources.catalog import add_metrics, register_model
    from resources.catalog.spec import resolve
    from resources.catalog.writes import register_evaluation
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    spec = EvaluationSpec.from_mapping(BASE)
    resolved = resolve(spec)
    register_evaluation(lake, resolved)
    version = lake.version("evaluations")
    spec.profile = f"/profiles/{OPENAI}.yaml"
    with pytest.raises(SpecError, match="evaluation sec: profile looks like a secret"):
        register_evaluation(lake, resolved)
    with pytest.raises(SpecError, match=r"metric_params\.g_eval\.api_key"):
        add_metrics(lake, "sec", {"g_eval": {"api_key": PLAIN}})
    with pytest.raises(SpecError, match=r"models\.leaked"):
        register_model(lake, "sec", "leaked", f"api:m@https://u:{PLAIN}@h.example/v1")
    assert lake.version("evaluations") == version and not lake.exists("evaluation_metrics")
    _no_trace(Path(lake.root), [OPENAI, PLAIN])


# --------------------------------------------------------------------------- a real lake, through the CLI


def _no_trace(root: Path, secrets: list[str]) -> None:
    """No file under ``root`` holds any of ``secrets`` (Delta logs, every Parquet version,
    SQLite run storage); compressed Parquet is checked through deltalake below."""
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:6]}... found in {path}"


def _history_holds(table: Path, secrets: list[str]) -> list[str]:
    """Every version of the Delta table at ``table``, read through deltalake: the secrets found."""
    from deltalake import DeltaTable

    latest = DeltaTable(str(table)).version()
    found = []
    for version in range(latest + 1):
        text = json.dumps(DeltaTable(str(table), version=version).to_pyarrow_table().to_pylist(), default=str)
        found += [s for s in secrets if s in text]
    return found


def test_cli_refusals_leave_no_trace_in_the_lake_its_history_or_dagster(tmp_path, dagster_home):
    lake = tmp_path / "lake"
    clean = tmp_path / "clean.yaml"
    clean.write_text(yaml.safe_dump(BASE))
    result = runner.invoke(app, ["register", str(clean), "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    secrets = sorted({s for _, _, s in SPELLINGS})
    for extra, path, secret in SPELLINGS:  # the same name: accepted, each would replace the stored row
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump({**BASE, **extra}))
        result = runner.invoke(app, ["register", str(bad), "--lake", str(lake)])
        assert result.exit_code == 1, (path, result.output)
        _one_line_refusal(result.output.strip().removeprefix("error: "), f"{bad}: {path}", secret)
    flags = [
        (["score", "-m", "token_f1", "--param", f"apikey={PLAIN}"], "--param: apikey"),
        (["score", "-m", "g_eval", "--judge", f"api:judge@https://u:{PLAIN}@judge.example.com/v1"], "--judge"),
        (["score", "-m", "g_eval", "--param", f"g_eval.judge=api:j@https://judge.example.com/v1?api-key={PLAIN}"], "--param"),
        (["pairwise", "--judge", f"api:judge@https://judge.example.com/v1#{OPENAI}"], "--judge"),
        (["stability", "-m", "g_eval", "--param", f"extra_headers={{Authorization: Bearer {OPENAI}}}"], "--param"),
        (["lm-eval", "facetlake_selfaware_qa", "--model", "api:m@http://127.0.0.1:9/v1", "--model-args", f"token={PLAIN}"],
         "--model-args: token"),
    ]
    for args, where in flags:
        result = runner.invoke(app, [*args, "--lake", str(lake)])
        assert result.exit_code == 1, (args[:2], result.output)
        assert result.output.startswith(f"error: {where}") and "looks like a secret" in result.output, result.output
        assert PLAIN not in result.output and OPENAI not in result.output
    out = runner.invoke(app, ["sql", "select name, spec, fingerprint_inputs from evaluations", "--lake", str(lake), "-f", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [r["name"] for r in rows] == ["sec"] and all(s not in out.output for s in secrets)
    for table in sorted(p for p in lake.iterdir() if (p / "_delta_log").is_dir()):
        assert _history_holds(table, secrets + [PLAIN, OPENAI]) == [], table.name
    _no_trace(lake, secrets + [PLAIN, OPENAI])
    _no_trace(dagster_home, secrets + [PLAIN, OPENAI])


def test_refuse_secrets_is_a_no_op_on_clean_input():
    assert refuse_secrets(LEGITIMATE, "spec") is None


def test_a_key_stored_before_the_check_is_read_back_but_never_exported(lake_copy, tmp_path):
    """A lake written before issue 26 may hold a key in ``evaluations.spec``: reading the
    evaluation keeps working, writing it again and exporting evidence are refused (the
    export folder is not even created) until it is re-registered from a clean spec."""
    import polars as pl

    from resources.catalog import evaluation_spec
    from resources.catalog.writes import register_evaluation
    from resources.catalog.spec import resolve
    from resources.evidence.keys import EvidenceError
    from resources.evidence.export import export_evidence

    lake, resolved = lake_copy
    rows = lake.read("evaluations")
    leaked = [json.dumps({**json.loads(s), "runtime": {"apikey": PLAIN}}) for s in rows["spec"]]
    lake.replace("evaluations", rows.with_columns(pl.Series("spec", leaked)), {"name": resolved.spec.name})
    spec = evaluation_spec(lake, resolved.fingerprint)
    assert spec.runtime == {"apikey": PLAIN}
    with pytest.raises(SpecError, match="runtime.apikey looks like a secret"):
        register_evaluation(lake, resolve(spec))
    out = tmp_path / "evidence"
    with pytest.raises(EvidenceError) as caught:
        export_evidence(lake, resolved.fingerprint, out)
    _one_line_refusal(str(caught.value), "runtime.apikey", PLAIN)
    assert "facetlake register" in str(caught.value) and not out.exists()
    register_evaluation(lake, resolve(resolved.spec))  # the clean spec replaces the current row
    export_evidence(lake, resolved.fingerprint, out)
    _no_trace(out, [PLAIN])
