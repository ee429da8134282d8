"""An lm-eval output folder whose logged model arguments hold a key (issue 26, item 2: the
import sibling of "an API key under another spelling is stored in clear").

``facetlake import lm-eval`` copies lm-eval's ``config.model_args``, ``model_name`` and
``model_source`` into the evaluation's spec (``lm_eval.runs``) and the model identity. Before,
they were redacted by argument name only (``api_key=``); a key under another name or inside a
URL (``base_url=https://user:KEY@host``) reached ``evaluations.spec``, and since the shared
detector (metric_ops/secrets.py) the catalog refused the whole import with "remove it", which
the user can only do by editing lm-eval's files. Now every value the detector flags is
replaced by ``<redacted>`` and the import goes through; the lake (``facetlake sql`` and every
Delta version of every table) and the Dagster home hold no trace of the key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from resources.lm_eval.bridge import REDACTED_ARG, _redact_args, _redact_text

pytest.importorskip("lm_eval")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "lm_eval_0_4_11"
# sentinels shaped like real credentials (none is a real key)
OPENAI = "sk-proj-SENTINELq7Xw9Zk2Lm4Np6Rt8Vb0Yc3"
URL_PASSWORD = "SENTINELurlPassw0rd4711"
BEARER = "SENTINELbearer9Tq2Wv7Xy5Za3Bc1De8Fg6"
HF = "hf_SENTINELaB3cD4eF5gH6iJ7kL8mN9oP0qR"
SECRETS = [OPENAI, URL_PASSWORD, BEARER, HF]
runner = CliRunner()


def test_logged_model_args_are_redacted_by_name_and_by_shape():
    """Mapping and ``KEY=VALUE,...`` forms: each secret value becomes ``<redacted>`` under
    its own name; everything else is kept as logged."""
    logged = {
        "pretrained": "/models/tiny-lm",
        "dtype": "float32",
        "max_length": 2048,
        "base_url": "http://127.0.0.1:8000/v1/completions",
        "api_key": "anything",  # by name (redacted before too)
        "note": OPENAI,  # by shape under an innocuous name
        "proxy": f"https://user:{URL_PASSWORD}@proxy.example/v1",
        "headers": {"Authorization": f"Bearer {BEARER}"},
    }
    out = _redact_args(logged)
    assert out == {**logged, "api_key": REDACTED_ARG, "note": REDACTED_ARG, "proxy": REDACTED_ARG, "headers": REDACTED_ARG}

    text = f"pretrained=/models/tiny-lm,dtype=float32,base_url=https://user:{URL_PASSWORD}@host/v1,trust_remote_code=true,hf={HF}"
    assert _redact_args(text) == (f"pretrained=/models/tiny-lm,dtype=float32,base_url={REDACTED_ARG},"
                                  f"trust_remote_code=true,hf={REDACTED_ARG}")
    assert _redact_args({OPENAI: 1}) == {REDACTED_ARG: REDACTED_ARG}  # a key used as a name is not kept either
    assert _redact_text(f"https://user:{URL_PASSWORD}@host/v1") == REDACTED_ARG
    assert _redact_text("local-completions") == "local-completions"
    assert _redact_args(None) is None and _redact_args("") == ""


def _planted_folder(tmp_path: Path) -> Path:
    """The lm-eval 0.4.11 output fixture with secrets planted in its logged model arguments."""
    folder = tmp_path / "lm-eval-out"
    shutil.copytree(FIXTURE, folder)
    results = next((folder / "tiny").glob("results_*.json"))
    data = json.loads(results.read_text(encoding="utf-8"))
    args = data["config"]["model_args"]
    assert isinstance(args, dict) and "pretrained" in args  # the fixture's form (lm-eval 0.4.11)
    data["config"]["model_args"] = {
        **args,
        "base_url": f"https://user:{URL_PASSWORD}@host.example/v1",
        "headers": {"Authorization": f"Bearer {BEARER}"},
        "comment": OPENAI,
        "hub": HF,
    }
    results.write_text(json.dumps(data), encoding="utf-8")
    return folder


def _delta_history_hits(lake_root: Path) -> list[str]:
    """``table@version: secret`` for every secret found in any version of any Delta table."""
    from deltalake import DeltaTable

    hits = []
    for log in sorted(lake_root.glob("*/_delta_log")):
        table = DeltaTable(str(log.parent))
        for version in range(table.version() + 1):
            text = json.dumps(DeltaTable(str(log.parent), version=version).to_pyarrow_table().to_pylist(), default=str)
            hits += [f"{log.parent.name}@{version}: {s[:12]}" for s in SECRETS if s in text]
    return hits


def _file_hits(root: Path) -> list[str]:
    return [f"{p}: {s[:12]}" for p in root.rglob("*") if p.is_file() for s in SECRETS if s.encode() in p.read_bytes()]


@pytest.mark.slow
def test_import_of_an_output_holding_keys_stores_none_of_them(tmp_path, dagster_home):
    """The import succeeds (it was refused whole, and before that stored the keys in clear);
    ``facetlake sql`` shows the redacted arguments and no key; no Delta version of any table,
    no file of the lake and none of the Dagster home holds one."""
    folder = _planted_folder(tmp_path)
    lake = tmp_path / "lake"
    result = runner.invoke(app, ["import", "lm-eval", str(folder), "--model-name", "tiny-0411", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert not [s for s in SECRETS if s in result.output]

    out = runner.invoke(app, ["sql", "select name, spec from evaluations", "--lake", str(lake), "-f", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert len(rows) == 2  # one evaluation per task of the output
    for row in rows:
        runs = json.loads(row["spec"])["lm_eval"]["runs"]
        logged = runs["tiny-0411"]["model_args"]
        assert logged["base_url"] == logged["headers"] == logged["comment"] == logged["hub"] == REDACTED_ARG
        assert logged["pretrained"].endswith("facetlake-tiny-lm-0moo5az4")  # what is safe is kept

    assert _delta_history_hits(lake) == []
    assert _file_hits(lake) == []
    assert _file_hits(dagster_home) == []
