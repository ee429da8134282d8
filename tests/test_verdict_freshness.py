"""A verdict is never older than the scores it summarises (issue 26, items 1 and 13).

``facetlake score -e E --metric chrf --metric rouge_l`` killed (``FACETLAKE_FAULT``: the
process ends with ``os._exit(137)`` as under ``kill -9``) after any one of its commits; the
same command again must leave ``summary``, ``comparisons`` and ``correlations`` computed from
the stored scores, although it skips every metric as "already scored". The analysis sensor,
evaluated on a real instance, must ask for the analysis of exactly the stale evaluation, and
for nothing when the verdicts are fresh (a re-run that reused everything). Real CLI processes,
real Delta tables, a real Dagster instance.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.freshness import freshness, scores_marker, stale_verdicts
from pipelines.definitions import ALL_ASSETS, ALL_CHECKS, build_resources
from pipelines.jobs import analysis_job
from resources.lake.resource import LakeStore
from tests.test_recurring import spec_for, write_dataset, write_outputs

pytestmark = pytest.mark.xdist_group("verdict_freshness")  # one worker builds the module fixture once

ROOT = Path(__file__).resolve().parents[1]
NEW = ["chrf", "rouge_l"]
NEW_SCORES = {"chrf", "rouge_l_f", "rouge_l_precision", "rouge_l_recall"}
# every commit of `facetlake score -e qa -m chrf -m rouge_l` on two models, in order (checked below):
# the metrics' catalog row, then per model its scores and their runs row, then per verdict its table and runs row
COMMITS = ["evaluation_metrics", "scores", "runs", "scores", "runs", "comparisons", "runs", "correlations", "runs", "summary", "runs"]
KILL_POINTS = [f"commit.after:{table}@{COMMITS[: i + 1].count(table)}" for i, table in enumerate(COMMITS)]


def cli(home: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """``facetlake ARGS`` in a new process on the Dagster home ``home`` (and ``FACETLAKE_FAULT``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FACETLAKE_FAULT", "FACETLAKE_DEBUG")}
    env.update(DAGSTER_HOME=str(home), FACETLAKE_LOG_LEVEL="WARNING", COLUMNS="200", **({"FACETLAKE_FAULT": fault} if fault else {}))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def write_spec(folder: Path, name: str = "qa", correct: tuple[int, int] = (8, 16)) -> Path:
    """A two-model QA evaluation (exact match only) whose outputs are precomputed files."""
    data = write_dataset(folder, f"{name}.jsonl", question=lambda i: f"{name} question {i}?")  # one fingerprint each
    models = {f"m{i}": f"precomputed:{write_outputs(folder, f'{name}-m{i}.jsonl', correct=c)}" for i, c in enumerate(correct)}
    spec = spec_for(name, data, models, baseline="m1")
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(spec.to_mapping()))
    return path


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, dagster_home) -> Path:
    """A folder holding a lake with one evaluated evaluation (`facetlake run`) and its Dagster home."""
    folder = tmp_path_factory.mktemp("evaluated")
    home = folder / "home"
    home.mkdir()
    shutil.copy(Path(dagster_home) / "dagster.yaml", home / "dagster.yaml")
    out = cli(home, "run", str(write_spec(folder)), "--lake", str(folder / "lake"))
    assert out.returncode == 0, out.stderr
    return folder


def copy_of(evaluated: Path, tmp_path: Path) -> tuple[Path, LakeStore]:
    folder = tmp_path / "copy"
    shutil.copytree(evaluated, folder)
    return folder / "home", LakeStore(root=str(folder / "lake"))


def assert_verdicts_match_scores(lake: LakeStore) -> None:
    """summary equals a summary computed now from the stored scores; comparisons and
    correlations cover every score name; nothing is stale."""
    from assets.analysis_common import read_scores
    from assets.summary import summarize

    fp = lake.read("evaluations", columns=["fingerprint"])["fingerprint"][0]
    assert stale_verdicts(lake, fp) == []
    scores = read_scores(lake, {"fingerprint": fp})
    names = set(scores["metric"].to_list())
    assert NEW_SCORES | {"exact_match"} <= names
    stored = lake.read("summary", where={"fingerprint": fp}).drop("run_id").sort(["model", "metric"])
    expected = summarize(scores).sort(["model", "metric"]).select(stored.columns)
    assert stored.equals(expected)
    assert {m for m in lake.read("comparisons", where={"fingerprint": fp, "kind": "model_metric"})["metric"]} == names
    correlated = lake.read("correlations", where={"fingerprint": fp})
    assert NEW_SCORES <= set(correlated["metric_a"].to_list()) | set(correlated["metric_b"].to_list())


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_kill_points_are_every_commit_of_the_rescore(evaluated, tmp_path):
    """The kill points below are the rescore's commits, in order (so each state between two commits is tried)."""
    home, lake = copy_of(evaluated, tmp_path)
    script = ("import sys, resources.lake.commit as c\n"
              "c.fault_point = lambda name: print('FP', name) if name.startswith('commit.after:') else None\n"
              "from pipelines.cli import main\nsys.argv = ['facetlake', *sys.argv[1:]]\nmain()\n")
    env = {k: v for k, v in os.environ.items() if k != "FACETLAKE_FAULT"}
    env["DAGSTER_HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", script, "score", "-e", "qa", "-m", "chrf", "-m", "rouge_l", "--lake", lake.root],
                         capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert [word.split(":", 1)[1] for word in out.stdout.split() if word.startswith("commit.after:")] == COMMITS


@pytest.mark.slow  # two facetlake processes per kill point
@pytest.mark.parametrize("fault", KILL_POINTS)
def test_rescore_killed_anywhere_then_the_same_command_leaves_fresh_verdicts(evaluated, tmp_path, fault):
    home, lake = copy_of(evaluated, tmp_path)
    args = ("score", "-e", "qa", "-m", "chrf", "-m", "rouge_l", "--lake", lake.root)
    killed = cli(home, *args, fault=fault)
    assert killed.returncode == 137, (fault, killed.stderr)
    again = cli(home, *args)
    assert again.returncode == 0, again.stderr
    assert_verdicts_match_scores(lake)


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_killed_after_the_scores_the_skip_path_recomputes_the_verdicts(evaluated, tmp_path):
    """The issue's case: killed after both models' scores are stored and recorded, before any
    verdict; the same command skips every metric as already scored and still repairs them."""
    home, lake = copy_of(evaluated, tmp_path)
    args = ("score", "-e", "qa", "-m", "chrf", "-m", "rouge_l", "--lake", lake.root)
    assert cli(home, *args, fault="commit.after:runs@2").returncode == 137
    fp = lake.read("evaluations", columns=["fingerprint"])["fingerprint"][0]
    assert stale_verdicts(lake, fp) == ["summary", "comparisons", "correlations"]
    assert not NEW_SCORES & set(lake.read("summary")["metric"].to_list())  # the stale summary the user saw
    again = cli(home, *args)
    assert again.returncode == 0, again.stderr
    assert "skipped (already scored)" in again.stdout and "chrf, rouge_l" in again.stdout
    assert "qa: verdicts older than its scores (summary, comparisons, correlations" in again.stdout
    assert_verdicts_match_scores(lake)
    # once fresh, the same command recomputes nothing: no new verdict runs rows
    before = lake.read("runs", where={"asset": ["summary", "comparisons", "correlations"]}).height
    third = cli(home, *args)
    assert third.returncode == 0 and "verdicts older" not in third.stdout
    assert lake.read("runs", where={"asset": ["summary", "comparisons", "correlations"]}).height == before


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
@pytest.mark.parametrize("command", ["compare", "export"])
def test_commands_reading_verdicts_never_show_them_older_than_the_scores(evaluated, tmp_path, command):
    """Siblings of the skip path: `compare` and `export` recompute stale verdicts before reading them."""
    home, lake = copy_of(evaluated, tmp_path)
    assert cli(home, "score", "-e", "qa", "-m", "chrf", "-m", "rouge_l", "--lake", lake.root,
               fault="commit.after:runs@2").returncode == 137
    extra = ("--out", str(tmp_path / "evidence"), "--unsigned") if command == "export" else ()
    out = cli(home, command, "-e", "qa", *extra, "--lake", lake.root)
    assert out.returncode == 0, out.stderr
    assert "qa: verdicts older than its scores (summary, comparisons, correlations" in out.stdout
    assert_verdicts_match_scores(lake)
    if command == "compare":
        assert "chrf" in out.stdout and "rouge_l_f" in out.stdout
    else:
        assert json.loads((tmp_path / "evidence" / "MANIFEST.json").read_text())["summary_matches_scores"] is True


def test_scores_marker_depends_on_what_is_stored_not_on_row_order():
    rows = pl.DataFrame({"model": ["a", "a", "b"], "metric": ["bleu", "bleu", "bleu"], "signature": ["s", "s", "s"],
                         "run_id": ["r1", "r1", "r2"], "status": ["scored", "error", "scored"], "sample_id": ["1", "2", None],
                         "value": [0.5, None, 0.25]})
    marker = scores_marker(rows)
    assert len(marker) == 64 and marker == scores_marker(rows.reverse()) == scores_marker(rows.drop("value"))
    assert scores_marker(rows.with_columns(pl.lit("r3").alias("run_id"))) != marker  # rewritten by another run
    assert scores_marker(rows.head(2)) != marker  # a model's rows gone
    assert scores_marker(rows.with_columns(pl.lit("scored").alias("status"))) != marker
    assert scores_marker(rows.head(0)) is None


# ----------------------------------------------------------------------------- the analysis sensor
@pytest.fixture
def home_instance(tmp_path, dagster_home, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(Path(dagster_home) / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    yield home, instance
    instance.dispose()


def analysis_definitions(lake: LakeStore) -> dg.Definitions:
    """The project's assets and analysis job on ``lake``."""
    return dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, jobs=[analysis_job],
                          resources={**build_resources(lake.root), "lake": lake})


def tick(instance: dg.DagsterInstance, lake: LakeStore, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    """One evaluation of the project's analysis sensor, as the daemon does it."""
    from pipelines.sensors import analysis_sensor

    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"lake": lake})
    result = analysis_sensor(context)
    return list(result.run_requests or []), result.cursor


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_analysis_sensor_asks_for_the_stale_evaluation_only_and_nothing_when_fresh(home_instance, tmp_path):
    from pipelines.runs.run_health import fail_dead_runs
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec

    home, instance = home_instance
    lake = LakeStore(root=str(tmp_path / "lake"))
    specs = {name: EvaluationSpec.from_mapping(json.loads(write_spec(tmp_path, name, c).read_text()))
             for name, c in (("qa", (8, 16)), ("other", (4, 12)))}
    for spec in specs.values():
        run_evaluation(spec, lake, instance)
    # a re-run that reused everything writes no verdict and leaves the sensor nothing to do (item 13)
    verdict_rows = lake.read("runs", where={"asset": ["summary", "comparisons", "correlations"]}).height
    run_evaluation(specs["qa"], lake, instance)
    assert lake.read("runs", where={"asset": ["summary", "comparisons", "correlations"]}).height == verdict_rows
    requests, cursor = tick(instance, lake, None)  # the first tick checks every evaluation
    assert requests == []

    # `facetlake score` killed after the scores, before the verdicts: its pair run stays STARTED
    args = ("score", "-e", "qa", "-m", "chrf", "-m", "rouge_l", "--lake", lake.root)
    assert cli(home, *args, fault="commit.after:runs@2").returncode == 137
    fps = {name: lake.read("evaluations", where={"name": name}, columns=["fingerprint"])["fingerprint"][0] for name in specs}
    states = freshness(lake, fps.values())
    assert states[fps["qa"]].stale == ["summary", "comparisons", "correlations"] and states[fps["other"]].stale == []
    requests, cursor = tick(instance, lake, cursor)
    assert requests == []  # a run of that evaluation is (seemingly) in progress: wait for it
    assert fail_dead_runs(instance)  # what the daemon's run monitoring does to the killed run
    requests, cursor = tick(instance, lake, cursor)
    key = f"qa@{fps['qa'][:12]}"
    assert [(r.job_name, r.partition_key) for r in requests] == [("analysis_job", key)]
    assert requests[0].tags["facetlake/scores_marker"] == states[fps["qa"]].marker[:16]
    assert requests[0].tags["dagster/max_retries"] == "2"

    # the requested run, as the daemon would launch it, makes them fresh; the sensor then asks nothing
    result = analysis_definitions(lake).resolve_job_def("analysis_job").execute_in_process(partition_key=key, instance=instance, tags=requests[0].tags)
    assert result.success
    assert_verdicts_match_scores_of(lake, fps["qa"])
    assert tick(instance, lake, cursor)[0] == []
    assert tick(instance, lake, None)[0] == []  # a fresh cursor (a new `facetlake ui`) too


def assert_verdicts_match_scores_of(lake: LakeStore, fp: str) -> None:
    assert stale_verdicts(lake, fp) == []
    assert NEW_SCORES <= set(lake.read("summary", where={"fingerprint": fp})["metric"].to_list())


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_analysis_sensor_does_not_ask_again_for_a_run_that_failed_with_these_scores(home_instance, tmp_path):
    """A requested analysis run that failed for good (Dagster's run retries spent) is not asked
    for again at every tick for the same scores; the sensor says so in its log."""
    from pipelines.runs.run_health import fail_dead_runs
    from pipelines.runs.runner import run_evaluation
    from pipelines.sensors import analysis_tick
    from resources.catalog.spec import EvaluationSpec

    home, instance = home_instance
    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(EvaluationSpec.from_mapping(json.loads(write_spec(tmp_path).read_text())), lake, instance)
    assert cli(home, "score", "-e", "qa", "-m", "chrf", "--lake", lake.root, fault="commit.after:runs@2").returncode == 137
    fail_dead_runs(instance)
    requests, cursor = tick(instance, lake, None)
    assert len(requests) == 1
    job, key = analysis_definitions(lake).resolve_job_def("analysis_job"), requests[0].partition_key

    def failed_run(**tags: str) -> dg.DagsterRun:
        run = instance.create_run_for_job(job, tags={**requests[0].tags, "dagster/partition": key, **tags})
        instance.report_run_failed(run, "killed")
        return instance.get_run_by_id(run.run_id)

    # the requested run killed: Dagster's run retries (dagster.yaml) will start it again, so wait
    assert failed_run().tags.get("dagster/will_retry") == "true"
    requests_now, state, log = analysis_tick(lake, instance, json.loads(cursor))
    assert requests_now == [] and list(state["stale"]) == [key]
    # its last retry failed too: reported, and not asked for again at every tick
    assert failed_run(**{"dagster/max_retries": "0"}).tags.get("dagster/will_retry") == "false"
    requests_now, state, log = analysis_tick(lake, instance, state)
    assert requests_now == [] and "analysis_job run" in " ".join(log) and "ended FAILURE" in " ".join(log)
    assert state["stale"] == {}  # left until its scores change again or a CLI command repairs them


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_analysis_sensor_waits_for_a_run_created_and_not_yet_queued(home_instance, tmp_path):
    """A CLI creates its verdict run (NOT_STARTED) and queues it a moment later: the sensor
    must not ask for a second verdict run in between (two runs of one partition's verdicts,
    the deploy test's failed run on CI). A NOT_STARTED run older than CREATED_GRACE is taken
    as killed before it started and blocks nothing (issue 26, item 6)."""
    from pipelines.runs.run_health import fail_dead_runs
    from pipelines.runs.runner import run_evaluation
    from pipelines.sensors import CREATED_GRACE, analysis_tick
    from resources.catalog.spec import EvaluationSpec

    home, instance = home_instance
    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(EvaluationSpec.from_mapping(json.loads(write_spec(tmp_path).read_text())), lake, instance)
    assert cli(home, "score", "-e", "qa", "-m", "chrf", "--lake", lake.root, fault="commit.after:runs@2").returncode == 137
    fail_dead_runs(instance)
    fp = lake.read("evaluations", where={"name": "qa"}, columns=["fingerprint"])["fingerprint"][0]
    key = f"qa@{fp[:12]}"
    job = analysis_definitions(lake).resolve_job_def("analysis_job")
    pending = instance.create_run_for_job(job, tags={"dagster/partition": key})
    assert instance.get_run_by_id(pending.run_id).status == dg.DagsterRunStatus.NOT_STARTED
    requests, state, log = analysis_tick(lake, instance, {})
    assert requests == [] and f"waiting for run {pending.run_id[:8]}" in " ".join(log)
    assert CREATED_GRACE.total_seconds() >= 60
    instance.report_run_failed(pending, "never queued")  # gone: the sensor asks for the verdicts itself
    requests, state, log = analysis_tick(lake, instance, {})
    assert [(r.job_name, r.partition_key) for r in requests] == [("analysis_job", key)]
