"""The evidence export lists every model whose scores it carries, including a model that
the inbox added to the evaluation after its spec was registered (issue 19, export)."""

from __future__ import annotations

import json

import polars as pl

from resources.catalog import register_model
from resources.evidence.export import export_evidence
from resources.evidence.verify import verify_evidence


def _add_scored_model(lake, fingerprint: str, model: str, spec: str | None) -> int:
    """Give ``model`` the score rows of ``sfres-system`` (as a scoring run would), after
    registering it in the catalog like the inbox sensor does when ``spec`` is given."""
    if spec is not None:
        register_model(lake, "sfres-small", model, spec, source="inbox")
    rows = lake.read("scores", where={"fingerprint": fingerprint, "model": "sfres-system"}).with_columns(pl.lit(model).alias("model"))
    lake.replace("scores", rows, {"model": model, "fingerprint": fingerprint})
    return rows.height


def test_models_json_lists_a_model_added_by_the_inbox(lake_copy, tmp_path):
    lake, resolved = lake_copy
    outputs = tmp_path / "inbox" / "sfres-small" / "inbox-bot.jsonl"
    outputs.parent.mkdir(parents=True)
    outputs.write_text("".join(json.dumps({"sample_id": str(i), "output": "x"}) + "\n" for i in range(40)))
    n = _add_scored_model(lake, resolved.fingerprint, "inbox-bot", f"precomputed:{outputs}")
    export_evidence(lake, resolved.fingerprint, tmp_path / "evidence")
    models = {m["model"]: m for m in json.loads((tmp_path / "evidence" / "models.json").read_text())}
    assert set(models) == {"sfres-system", "inbox-bot"}
    assert models["inbox-bot"]["spec"] == f"precomputed:{outputs}"
    assert models["inbox-bot"]["version"] == 1 and models["inbox-bot"]["n_score_rows"] == n
    report = verify_evidence(tmp_path / "evidence", allow_unsigned=True)
    assert report.ok, report.problems


def test_models_json_lists_every_model_with_scores_even_without_a_pair(lake_copy, tmp_path):
    lake, resolved = lake_copy
    n = _add_scored_model(lake, resolved.fingerprint, "scored-only", None)  # rows, but no catalog entry
    export_evidence(lake, resolved.fingerprint, tmp_path / "evidence")
    models = {m["model"]: m for m in json.loads((tmp_path / "evidence" / "models.json").read_text())}
    assert models["scored-only"]["n_score_rows"] == n and models["scored-only"]["spec"] is None
    assert verify_evidence(tmp_path / "evidence", allow_unsigned=True).ok
