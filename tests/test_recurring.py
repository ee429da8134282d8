"""Recurring evaluations you can trust (issue 12): evaluation identity, real partitions only,
fresh verdicts, schedules per evaluation, metrics that persist, complete lineage, names.

Each test reproduces one of the twelve faults seen by a user and shows the right
behaviour, on real Delta tables and a real Dagster instance. Datasets are small files
written here (exact-match values are then known by construction) plus the shipped SF-RES
data where real text matters.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from typer.testing import CliRunner

from pipelines.runs.register import register
from pipelines.runs.runner import rescore, run_evaluation
from resources.catalog import (
    CatalogCollisionError,
    CatalogError,
    evaluation_row,
    evaluation_spec,
    model_spec,
    register_model,
)
from resources.catalog.spec import EvaluationSpec, SpecError
from resources.lake.resource import LakeStore

N = 20


def write_dataset(folder: Path, name: str = "qa.jsonl", n: int = N, answer=lambda i: f"answer {i}",
                  question=lambda i: f"question {i}?") -> Path:
    """A QA file: ids q0.., questions and one reference each."""
    path = folder / name
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": question(i), "answer": answer(i)}) + "\n" for i in range(n)))
    return path


def write_outputs(folder: Path, name: str, correct: int, n: int = N) -> Path:
    """Outputs whose first ``correct`` answers match the references exactly."""
    path = folder / name
    path.write_text("".join(json.dumps({"sample_id": f"q{i}", "output": f"answer {i}" if i < correct else "no idea"}) + "\n"
                            for i in range(n)))
    return path


def spec_for(name: str, data: Path, models: dict[str, str], **extra) -> EvaluationSpec:
    return EvaluationSpec.from_mapping({
        "name": name,
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "question", "references": "answer"}},
        "models": models,
        "metrics": ["exact_match"],
        **extra,
    })


def mean(lake: LakeStore, evaluation: str, model: str, metric: str = "exact_match") -> float:
    fp = evaluation_row(lake, evaluation)["fingerprint"]
    frame = lake.read("summary", where={"fingerprint": fp, "model": model, "metric": metric})
    assert frame.height == 1, f"no summary row for {evaluation} {model} {metric}"
    return frame["mean"][0]


def partition_files(lake: LakeStore, table: str, fingerprint: str) -> set[str]:
    """The data files holding one fingerprint's rows (unchanged files = untouched rows)."""
    actions = lake.delta(table).get_add_actions(flatten=True).to_pydict()
    return {p for p, fp in zip(actions["path"], actions["partition.fingerprint"]) if fp == fingerprint}


@pytest.fixture
def lake(tmp_path) -> LakeStore:
    return LakeStore(root=str(tmp_path / "lake"))


@pytest.fixture
def fresh_instance(tmp_path, dagster_home, monkeypatch):
    """A Dagster instance of its own (dynamic partitions counted from zero), with the
    project's dagster.yaml; DAGSTER_HOME points at it so the CLI uses the same one."""
    import shutil

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(Path(dagster_home) / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    yield instance
    instance.dispose()


# ----------------------------------------------------------------------------- 1. model identity is per evaluation
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_model_source_belongs_to_its_evaluation_never_to_the_bare_name(lake, fresh_instance, tmp_path):
    data_a = write_dataset(tmp_path, "a.jsonl")
    data_b = write_dataset(tmp_path, "b.jsonl", answer=lambda i: f"answer {i}!")
    v2 = write_outputs(tmp_path, "v2.jsonl", correct=17)          # A's bot-v2: 0.85
    v2_orig = write_outputs(tmp_path, "v2.orig.jsonl", correct=19)  # B's bot-v2: another file
    run_evaluation(spec_for("eval-a", data_a, {"bot-v2": f"precomputed:{v2}"}), lake, fresh_instance)
    assert mean(lake, "eval-a", "bot-v2") == pytest.approx(0.85)
    run_evaluation(spec_for("eval-b", data_b, {"bot-v2": f"precomputed:{v2_orig}"}), lake, fresh_instance)

    # A still reads its own file: registering B did not re-point A's bot-v2
    assert model_spec(lake, "bot-v2", "eval-a") == f"precomputed:{v2}"
    assert model_spec(lake, "bot-v2", "eval-b") == f"precomputed:{v2_orig}"
    run_evaluation(spec_for("eval-a", data_a, {"bot-v2": f"precomputed:{v2}"}), lake, fresh_instance)  # A's next run
    assert mean(lake, "eval-a", "bot-v2") == pytest.approx(0.85)

    # the evidence export shows the source that produced A's outputs, and its identity
    from resources.evidence.export import export_evidence

    export_evidence(lake, "eval-a", tmp_path / "evidence", "json", False)
    models = json.loads((tmp_path / "evidence" / "models.json").read_text())
    assert [(m["model"], m["spec"]) for m in models] == [("bot-v2", f"precomputed:{v2}")]
    assert models[0]["identity"]["file"] == str(v2) and models[0]["identity"]["file_sha256"]


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_changed_model_source_is_a_new_recorded_version(lake, fresh_instance, tmp_path):
    data = write_dataset(tmp_path)
    v1 = write_outputs(tmp_path, "v1.jsonl", correct=10)
    run_evaluation(spec_for("versions", data, {"bot": f"precomputed:{v1}"}), lake, fresh_instance)
    gen_version = lake.version("generations")
    v1.write_text(write_outputs(tmp_path, "tmp.jsonl", correct=15).read_text())  # same path, new content
    resolved = run_evaluation(spec_for("versions", data, {"bot": f"precomputed:{v1}"}), lake, fresh_instance)
    notices = " ".join(resolved.registration.notices)
    assert "model bot of versions: source changed" in notices and "version 2" in notices
    assert mean(lake, "versions", "bot") == pytest.approx(0.75)
    models = lake.read("evaluation_models", where={"evaluation": "versions"}).sort("version")
    assert models["version"].to_list() == [1, 2] and models["identity_sha256"].n_unique() == 2
    # the earlier outputs stay reachable by Delta time travel
    old = lake.read("generations", where={"model": "bot"}, version=gen_version)
    assert (old["output"] == "no idea").sum() == 10


# ----------------------------------------------------------------------------- 2. fingerprint take-over
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_another_name_reaching_a_fingerprint_is_refused_naming_both(lake, fresh_instance, tmp_path):
    data = write_dataset(tmp_path)
    v1 = write_outputs(tmp_path, "v1.jsonl", correct=18)
    first = run_evaluation(spec_for("original", data, {"bot-v1": f"precomputed:{v1}"}), lake, fresh_instance)
    before = lake.read("generations", where={"fingerprint": first.fingerprint})
    short = write_outputs(tmp_path, "short.jsonl", correct=16, n=18)  # 18 rows: two samples would become errors
    from resources.backends import OutputIdsWarning

    with pytest.raises(CatalogCollisionError) as caught, pytest.warns(OutputIdsWarning, match="2 samples have no output"):
        run_evaluation(spec_for("copycat", data, {"bot-v1": f"precomputed:{short}"}), lake, fresh_instance)
    message = str(caught.value)
    assert "'original'" in message and "'copycat'" in message and "--take-over" in message and "\n" not in message
    # nothing of the first evaluation changed: name, spec, generations
    assert evaluation_row(lake, first.fingerprint)["name"] == "original"
    assert model_spec(lake, "bot-v1", "original") == f"precomputed:{v1}"
    assert lake.read("generations", where={"fingerprint": first.fingerprint}).equals(before)

    # on purpose: the fingerprint moves, and the run says so
    moved = run_evaluation(spec_for("copycat", data, {"bot-v1": f"precomputed:{v1}"}), lake, fresh_instance, take_over=True)
    assert any("moved from evaluation 'original' to 'copycat'" in n for n in moved.registration.notices)
    assert evaluation_row(lake, first.fingerprint)["name"] == "copycat"


def test_a_name_registered_over_another_dataset_is_refused(lake, fresh_instance, tmp_path):
    run_evaluation(spec_for("named", write_dataset(tmp_path, "one.jsonl"), {"bot": "precomputed:column=answer"}), lake, fresh_instance)
    other = write_dataset(tmp_path, "two.jsonl", answer=lambda i: f"other {i}")
    with pytest.raises(CatalogCollisionError, match="--replace"):
        register(spec_for("named", other, {"bot": "precomputed:column=answer"}), lake, fresh_instance)
    resolved = register(spec_for("named", other, {"bot": "precomputed:column=answer"}), lake, fresh_instance, replace=True)
    assert resolved.registration.previous_fingerprint is not None


# ----------------------------------------------------------------------------- 3. only real partitions
def test_dagster_knows_exactly_the_registered_pairs(lake, fresh_instance, tmp_path):
    from assets.partitions import evaluation_partitions, pair_partitions

    data_a, data_b = write_dataset(tmp_path, "a.jsonl"), write_dataset(tmp_path, "b.jsonl", answer=lambda i: f"b {i}")
    outs = {f"m{i}": f"precomputed:{write_outputs(tmp_path, f'm{i}.jsonl', correct=i)}" for i in range(5)}
    register(spec_for("two-models", data_a, {k: outs[k] for k in ("m0", "m1")}), lake, fresh_instance)
    register(spec_for("three-models", data_b, {k: outs[k] for k in ("m2", "m3", "m4")}), lake, fresh_instance)
    pairs = pair_partitions.get_partition_keys(dynamic_partitions_store=fresh_instance)
    assert len(pairs) == 5  # not the 2 x 5 cross product
    assert {p.rsplit(":", 1)[1] for p in pairs if p.startswith("two-models@")} == {"m0", "m1"}
    assert len(evaluation_partitions.get_partition_keys(dynamic_partitions_store=fresh_instance)) == 2

    # a phantom pair (another evaluation's model) cannot be materialised
    from pipelines.runs.runner import _materialize

    fp_b = evaluation_row(lake, "three-models")["fingerprint"]
    phantom = f"three-models@{fp_b[:12]}:m0"
    with pytest.raises(Exception, match="m0|not"):
        _materialize(["generations"], phantom, lake, fresh_instance)
    assert not lake.exists("generations") or lake.read("generations", where={"model": "m0", "fingerprint": fp_b}).height == 0


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_superseded_fingerprint_leaves_dagster_but_stays_queryable(lake, fresh_instance, tmp_path):
    from assets.partitions import pair_partitions

    data = write_dataset(tmp_path)
    out = write_outputs(tmp_path, "bot.jsonl", correct=N)
    first = run_evaluation(spec_for("moving", data, {"bot": f"precomputed:{out}"}), lake, fresh_instance)
    write_dataset(tmp_path, n=N + 1)  # the dataset grows by one row
    write_outputs(tmp_path, "bot.jsonl", correct=N + 1, n=N + 1)
    second = run_evaluation(spec_for("moving", data, {"bot": f"precomputed:{out}"}), lake, fresh_instance)
    assert second.fingerprint != first.fingerprint and second.registration.previous_fingerprint == first.fingerprint
    assert pair_partitions.get_partition_keys(dynamic_partitions_store=fresh_instance) == [f"moving@{second.fingerprint[:12]}:bot"]
    old = evaluation_row(lake, f"moving@{first.fingerprint[:12]}")
    assert old["status"] == "history" and evaluation_row(lake, "moving")["fingerprint"] == second.fingerprint
    assert lake.read("scores", where={"fingerprint": first.fingerprint}).height == N  # history rows kept


# ----------------------------------------------------------------------------- 6. metrics persist, reuse
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_rerun_keeps_rescored_metrics_and_reuses_unchanged_models(lake, fresh_instance, tmp_path):
    data = write_dataset(tmp_path)
    a = write_outputs(tmp_path, "a.jsonl", correct=5)
    b = write_outputs(tmp_path, "b.jsonl", correct=12)
    spec = spec_for("keeps", data, {"bot-a": f"precomputed:{a}", "bot-b": f"precomputed:{b}"})
    run_evaluation(spec, lake, fresh_instance)
    rescore(["chrf"], lake, fresh_instance, fingerprint="keeps")
    chrf = lake.read("scores", where={"metric": "chrf"}).sort(["model", "sample_id"])
    assert chrf.height == 2 * N
    versions = {t: lake.version(t) for t in ("samples", "generations", "scores")}

    run_evaluation(spec, lake, fresh_instance)  # nothing changed: nothing recomputed or rewritten
    assert {t: lake.version(t) for t in versions} == versions
    assert lake.read("scores", where={"metric": "chrf"}).sort(["model", "sample_id"]).equals(chrf)
    assert "chrf" in evaluation_spec(lake, "keeps").metrics

    b.write_text(write_outputs(tmp_path, "b2.jsonl", correct=20).read_text())  # only bot-b's outputs change
    run_evaluation(spec, lake, fresh_instance)
    after = lake.read("scores", where={"metric": "chrf"})
    kept_a = after.filter(pl.col("model") == "bot-a")
    assert kept_a.sort("sample_id").equals(chrf.filter(pl.col("model") == "bot-a"))  # reused, same run id
    assert set(after.filter(pl.col("model") == "bot-b")["run_id"]) != set(chrf.filter(pl.col("model") == "bot-b")["run_id"])
    assert mean(lake, "keeps", "bot-b") == pytest.approx(1.0)
    runs = lake.read("runs", where={"asset": "scores", "model": "bot-a"}).sort("finished_at")
    assert json.loads(runs["provenance"][-1])["computed"] == [] and len(json.loads(runs["provenance"][-1])["reused"]) == 2


# ----------------------------------------------------------------------------- 7. lineage per signature
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_lineage_traces_each_verdict_to_the_run_that_computed_its_metric(lake, fresh_instance, tmp_path):
    from pipelines.report.lineage import build_lineage

    data = write_dataset(tmp_path)
    run_evaluation(spec_for("traced", data, {"bot": f"precomputed:{write_outputs(tmp_path, 'o.jsonl', correct=7)}"}), lake, fresh_instance)
    rescore(["chrf"], lake, fresh_instance, fingerprint="traced")
    rescore(["token_f1"], lake, fresh_instance, fingerprint="traced")
    scores = lake.read("scores")
    run_of = {m: scores.filter(pl.col("metric") == m)["run_id"].unique().to_list() for m in ("exact_match", "chrf", "token_f1")}
    assert all(len(v) == 1 for v in run_of.values()) and len({v[0] for v in run_of.values()}) == 3
    graph = build_lineage(lake, "traced")
    comparisons = next(n for n in graph.nodes.values() if n.label.startswith("comparisons"))
    upstream = [graph.nodes[u] for u in graph.upstream(comparisons.id)]
    by_run = {n.facts["run_id"]: n.facts["signatures"] for n in upstream}
    assert set(by_run) == {v[0] for v in run_of.values()}
    assert any(sig.startswith("chrf|") for sig in by_run[run_of["chrf"][0]])
    assert not any(sig.startswith("chrf|") for sig in by_run[run_of["token_f1"][0]])


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_lineage_parent_of_generations_is_the_samples_run_that_wrote_them(lake, fresh_instance, tmp_path):
    """A later samples run that found the rows unchanged (its run row carries the table's
    newer version, written by another evaluation) is never the parent of generations that
    read the rows before it: the parent is the run that wrote them, finished before the child."""
    from pipelines.report.lineage import build_lineage
    data_a = write_dataset(tmp_path, "a.jsonl")
    spec_a = spec_for("alpha", data_a, {"bot": f"precomputed:{write_outputs(tmp_path, 'a_out.jsonl', correct=5)}"})
    run_evaluation(spec_a, lake, fresh_instance)
    first = lake.read("runs").filter(pl.col("asset") == "samples").sort("finished_at")["run_id"].to_list()
    data_b = write_dataset(tmp_path, "b.jsonl", question=lambda i: f"other question {i}?")
    run_evaluation(spec_for("beta", data_b, {"bot": f"precomputed:{write_outputs(tmp_path, 'b_out.jsonl', correct=3)}"}), lake, fresh_instance)
    # alpha again with a model added (as the inbox would): samples found unchanged, recorded at the newer version
    spec_a2 = spec_for("alpha", data_a, {"bot": f"precomputed:{tmp_path / 'a_out.jsonl'}",
                                         "bot2": f"precomputed:{write_outputs(tmp_path, 'a2_out.jsonl', correct=9)}"})
    run_evaluation(spec_a2, lake, fresh_instance)
    runs = lake.read("runs").filter(pl.col("asset") == "samples").sort("finished_at")
    assert runs.height == 3 and runs["table_version"][-1] > runs["table_version"][0]
    graph = build_lineage(lake, "alpha")
    generations = next(n for n in graph.nodes.values() if n.label.startswith("generations[bot2]"))
    parents = [graph.nodes[u] for u in graph.upstream(generations.id) if graph.nodes[u].label.startswith("samples")]
    assert [p.facts["run_id"] for p in parents] == [first[0]]


# ----------------------------------------------------------------------------- 8. names everywhere
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_commands_take_the_evaluation_name_or_a_unique_prefix(lake, fresh_instance, tmp_path):
    from pipelines.cli import app

    data = write_dataset(tmp_path)
    run_evaluation(spec_for("support-bot", data, {"bot": f"precomputed:{write_outputs(tmp_path, 'o.jsonl', correct=3)}"}),
                   lake, fresh_instance)
    runner = CliRunner()
    for ref in ("support-bot", "supp", evaluation_row(lake, "support-bot")["fingerprint"][:8]):
        result = runner.invoke(app, ["compare", "-e", ref, "--lake", lake.root])
        assert result.exit_code == 0, result.output
        assert "support-bot@" in result.output
    bare = runner.invoke(app, ["compare", "--lake", lake.root])
    assert bare.exit_code == 0 and "support-bot@" in bare.output
    unknown = runner.invoke(app, ["compare", "-e", "nope", "--lake", lake.root])
    assert unknown.exit_code == 1 and "support-bot" in unknown.output  # lists what exists
    listing = runner.invoke(app, ["evaluations", "--lake", lake.root, "--format", "csv"])
    rows = list(pl.read_csv(listing.output.encode()).iter_rows(named=True))
    assert [(r["evaluation"], r["models"], r["status"]) for r in rows] == [("support-bot", "bot", "current")]
    for command in (["lineage", "-e", "support"], ["export", "-e", "support-bot", "--out", str(tmp_path / "ev"), "--unsigned"]):
        result = runner.invoke(app, [*command, "--lake", lake.root])
        assert result.exit_code == 0, result.output
    archived = runner.invoke(app, ["evaluations", "archive", "support-bot", "--lake", lake.root])
    assert archived.exit_code == 0 and fresh_instance.get_dynamic_partitions("pair") == []
    assert runner.invoke(app, ["evaluations", "--lake", lake.root]).output.startswith("no evaluations")
    assert lake.read("scores").height == N  # archiving deletes nothing
    runner.invoke(app, ["evaluations", "restore", "support-bot", "--lake", lake.root])
    assert len(fresh_instance.get_dynamic_partitions("pair")) == 1


# ----------------------------------------------------------------------------- 12. derived model keys
def test_derived_model_keys_are_unique_or_refused_naming_both():
    spec = EvaluationSpec.from_mapping({
        "name": "keys", "dataset": {"kind": "sfres", "limit": 2}, "metrics": ["bleu"],
        "models": ["api:gpt-4o-mini@https://api.example.com/v1", "api:Qwen/Qwen2.5-7B-Instruct@http://gpu:8000/v1"],
    })
    assert sorted(spec.models) == ["gpt-4o-mini", "qwen-qwen2.5-7b-instruct"]
    for pair in (["hf:/models/a/tiny", "hf:/models/b/tiny"], ["api:m@https://x/v1", "api:m@https://y/v1"]):
        with pytest.raises(SpecError) as caught:
            EvaluationSpec.from_mapping({"name": "keys", "dataset": {"kind": "sfres"}, "metrics": ["bleu"], "models": pair})
        assert pair[0] in str(caught.value) and pair[1] in str(caught.value)


def test_evaluation_names_are_slugs():
    with pytest.raises(SpecError, match="name 'My Eval'"):
        EvaluationSpec.from_mapping({"name": "My Eval", "dataset": {"kind": "sfres"}, "metrics": ["bleu"], "models": {"m": "precomputed:column=x"}})


def test_a_pinned_dataset_refuses_changed_content(lake, fresh_instance, tmp_path):
    data = write_dataset(tmp_path)
    resolved = register(spec_for("pinned", data, {"bot": "precomputed:column=answer"}), lake, fresh_instance)
    pinned = spec_for("pinned", data, {"bot": "precomputed:column=answer"})
    pinned.dataset["sha256"] = resolved.dataset_hash
    register(pinned, lake, fresh_instance)  # unchanged data: fine
    write_dataset(tmp_path, n=N + 2)
    # the older key name (sha256) is a pin like dataset.pin (issue 31): refused, saying what changed
    with pytest.raises(SpecError, match=f"pinned at {resolved.dataset_hash[:12]}; the source changed"):
        register(pinned, lake, fresh_instance)


# ----------------------------------------------------------------------------- 11. Dagster tells the truth
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_row_count_metadata_equals_rows_stored_after_a_rescore(lake, fresh_instance, tmp_path):
    data = write_dataset(tmp_path)
    resolved = run_evaluation(spec_for("counted", data, {"bot": f"precomputed:{write_outputs(tmp_path, 'o.jsonl', correct=3)}"},
                                       metrics=["exact_match", "token_f1", "bleu"]), lake, fresh_instance)
    rescore(["chrf"], lake, fresh_instance, fingerprint="counted")
    key = resolved.registration.pair_keys["bot"]
    event = fresh_instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("scores"), asset_partitions=[key]), limit=1).records[0]
    metadata = event.asset_materialization.metadata
    stored = lake.read("scores", where={"model": "bot", "fingerprint": resolved.fingerprint}).height
    assert stored == 4 * N and metadata["dagster/row_count"].value == stored and metadata["rows_written"].value == N


def test_every_delta_table_is_an_asset_or_documented_internal_state():
    from assets.catalog import INTERNAL_TABLES
    from pipelines.definitions import defs
    from resources.lake.schemas import SCHEMAS

    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for table in SCHEMAS:
        assert table in keys or table in INTERNAL_TABLES, f"Delta table {table} is neither an asset nor documented internal state"
    assert all(len(reason) > 20 for reason in INTERNAL_TABLES.values())


# ----------------------------------------------------------------------------- 10. facetlake ui
@pytest.mark.slow
def test_ui_starts_with_the_venv_not_on_path(tmp_path, dagster_home):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/bin:/bin"  # the venv is not activated
    env["DAGSTER_HOME"] = str(dagster_home)
    log = (tmp_path / "ui.log").open("w+")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "facetlake"), "ui", "--port", str(port), "--host", "127.0.0.1",
                             "--lake", str(tmp_path / "lake")], env=env, start_new_session=True,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
                    assert response.status == 200 and "dagster_webserver_version" in response.read().decode()
                    break
            except OSError:
                assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
                time.sleep(1)
        else:
            pytest.fail("the Dagster UI did not answer within 120 s")
        nodes = _ui_asset_nodes(port, ["scores", "generations", "samples", "token_logprobs"])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    # what the UI shows, through its GraphQL API (issue 27): real column types, asset checks,
    # token_logprobs as an asset the UI can select and materialise (with generations)
    from resources.lake.schemas import SCHEMAS

    from assets.declare import column_type

    for table in ("scores", "generations", "samples"):
        (schema,) = [e["schema"] for e in nodes[table]["metadataEntries"] if e.get("schema")]
        assert [(c["name"], c["type"]) for c in schema["columns"]] == [(f.name, column_type(f.type)) for f in SCHEMAS[table]]
    assert {c["name"] for c in nodes["scores"]["assetChecksOrError"]["checks"]} == {
        "check_scores_in_declared_range", "check_scores_status_counts"}
    assert {c["name"] for c in nodes["generations"]["assetChecksOrError"]["checks"]} == {
        "check_generations_error_rate", "check_generations_every_sample"}
    assert nodes["token_logprobs"]["isMaterializable"] and nodes["token_logprobs"]["opNames"] == ["generations"]
    # started the way Dagster now documents (`dg dev`): no SupersessionWarning (issue 26, fault 12)
    started = (tmp_path / "ui.log").read_text()
    assert "SupersessionWarning" not in started and "superseded" not in started, started[-2000:]
    assert "Serving dagster-webserver" in started


def _ui_asset_nodes(port: int, names: list[str]) -> dict[str, dict]:
    """The UI's asset nodes for ``names``, from its GraphQL endpoint (POST /graphql)."""
    import urllib.request

    query = """query ($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) {
        assetKey { path } isMaterializable opNames
        metadataEntries { label ... on TableSchemaMetadataEntry { schema { columns { name type } } } }
        assetChecksOrError { ... on AssetChecks { checks { name } } } } }"""
    body = json.dumps({"query": query, "variables": {"keys": [{"path": [n]} for n in names]}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload["errors"]
    return {node["assetKey"]["path"][0]: node for node in payload["data"]["assetNodes"]}


# ----------------------------------------------------------------------------- migration of older lakes
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_lake_from_before_evaluation_identity_is_refused_then_migrated(lake, fresh_instance, tmp_path):
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from pipelines.cli import app
    from resources.catalog.spec import canonical_json

    data = write_dataset(tmp_path)
    out = write_outputs(tmp_path, "o.jsonl", correct=4)
    resolved = run_evaluation(spec_for("legacy", data, {"bot": f"precomputed:{out}"}), lake, fresh_instance)
    # rewrite the catalog as the earlier version wrote it: evaluations keyed by fingerprint, a global models table
    row = evaluation_row(lake, "legacy")
    when = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    old = pa.table({"fingerprint": [row["fingerprint"]], "name": ["legacy"], "dataset": [row["dataset"]],
                    "dataset_hash": [row["dataset_hash"]], "n_samples": [row["n_samples"]],
                    "spec": [canonical_json(json.loads(row["spec"]))], "fingerprint_inputs": [row["fingerprint_inputs"]],
                    "registered_at": pa.array([when], pa.timestamp("us", tz="UTC"))})
    write_deltalake(lake.uri("evaluations"), old, mode="overwrite", schema_mode="overwrite")
    write_deltalake(lake.uri("models"), pa.table({"model": ["bot"], "spec": [f"precomputed:{out}"],
                                                  "registered_at": pa.array([when], pa.timestamp("us", tz="UTC"))}))
    for table in ("evaluation_models", "pairs"):
        import shutil

        shutil.rmtree(lake.uri(table))
    scores_before = lake.read("scores")

    runner = CliRunner()
    refused = runner.invoke(app, ["compare", "-e", "legacy", "--lake", lake.root])
    assert refused.exit_code == 1 and "facetlake migrate" in refused.output
    migrated = runner.invoke(app, ["migrate", "--lake", lake.root])
    assert migrated.exit_code == 0 and "evaluations 1 rows" in migrated.output
    assert evaluation_row(lake, "legacy")["status"] == "current"
    assert model_spec(lake, "bot", "legacy") == f"precomputed:{out}"
    assert lake.read("pairs")["partition_key"].to_list() == [resolved.registration.pair_keys["bot"]]
    assert lake.read("scores").equals(scores_before)
    # words compared, not line breaks: rich wraps the line at the console width, and the
    # lake's temporary path is longer under pytest-xdist (".../popen-gw0/...")
    assert "up to date" in " ".join(runner.invoke(app, ["migrate", "--lake", lake.root]).output.split())
    run_evaluation(spec_for("legacy", data, {"bot": f"precomputed:{out}"}), lake, fresh_instance)  # works as before
    assert mean(lake, "legacy", "bot") == pytest.approx(0.2)
