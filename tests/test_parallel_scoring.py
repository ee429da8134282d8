"""Scoring spread over worker processes (metric_ops/scoring/parallel.py, issue 14) gives exactly the
in-process values, statuses and details, on real SF-RES pairs with blank references,
missing outputs and failing samples mixed in; work that does not pay stays in process; a
worker that dies or cannot build the metric loses nothing (its chunks are scored in
process); the calling script is never run again in a worker."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metric_ops import Direction, Metric, Sample, Score, get_metric
from metric_ops.scoring import parallel
from metric_ops.scoring.frame import score_frame

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("parallel_scoring")  # one pool of worker processes per module, not per test


def _sfres(n: int) -> tuple[list[Sample], list[str | None]]:
    """``n`` SF-RES (reference, system output) pairs, repeated with unique ids, with every 97th
    reference blank (unscored), every 89th output missing (unscored) and every 83rd output
    empty (scored 0 by BLEU/chrF)."""
    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())
    samples, outputs = [], []
    for i in range(n):
        d = data[i % len(data)]
        ref = "   " if i % 97 == 5 else d["reference"]
        samples.append(Sample(f"s{i}", d["source"], (ref,)))
        outputs.append(None if i % 89 == 7 else ("" if i % 83 == 3 else d["system_output"]))
    return samples, outputs


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_CHUNK", 150)  # several chunks per worker on a few thousand pairs
    yield


@pytest.mark.parametrize("name,params", [
    ("bleu", {}), ("chrf", {}), ("chrf_pp", {}), ("rouge_l", {}), ("rouge_lsum", {}), ("rouge_w", {}),
    ("rouge_l", {"use_stemmer": True}), ("token_f1", {}), ("exact_match", {}), ("nltk_bleu", {"smoothing": 6}),
])
def test_workers_give_the_in_process_rows(name, params):
    """Every row (value, status, detail, order) equal with 2 workers and in process; NLTK
    BLEU's method 6 makes some samples ``error`` rows (no bigram match), kept as such."""
    samples, outputs = _sfres(2400)
    metric = get_metric(name, **params)
    assert parallel.planned_workers(metric, len(samples), 2) == 2
    inproc = score_frame(metric, samples, outputs, workers=1)
    spread = score_frame(metric, samples, outputs, workers=2)
    assert spread.equals(inproc)
    statuses = set(inproc["status"].to_list())
    assert "unscored" in statuses and "scored" in statuses
    if name == "nltk_bleu":
        assert "error" in statuses


def test_work_that_does_not_pay_stays_in_process(monkeypatch):
    bleu = get_metric("bleu")
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 8)
    assert parallel.planned_workers(bleu, bleu.parallel_min_samples - 1) == 1
    assert parallel.planned_workers(bleu, bleu.parallel_min_samples) == 8
    assert parallel.planned_workers(get_metric("exact_match"), 10_000) == 1  # cheap per sample: needs 20,000
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    assert parallel.planned_workers(bleu, 1_000_000) == 1
    monkeypatch.setenv(parallel.WORKERS_ENV, "3")
    assert parallel.planned_workers(bleu, 1_000_000) == 3
    monkeypatch.setenv(parallel.WORKERS_ENV, "99999")
    assert parallel.planned_workers(bleu, 1_000_000) == 8  # never more processes than CPUs
    for bad in ("two", "0", "-3", "1.5", "+2", "\u0663"):  # the last: ARABIC-INDIC DIGIT THREE, which int() accepts
        monkeypatch.setenv(parallel.WORKERS_ENV, bad)
        with pytest.raises(parallel.ParallelConfigError, match="FACETLAKE_SCORE_WORKERS="):
            parallel.planned_workers(bleu, 10)  # refused whatever the size
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    monkeypatch.delenv(parallel.WORKERS_ENV)
    assert parallel.planned_workers(bleu, 1_000_000) == 1  # one core: in process


def test_metrics_that_are_not_parallel_safe_stay_in_process():
    """Corpus-level, neural, judged, confidence, agent and tool-call metrics are never sent to
    workers, whatever is asked: only the lexical families declare ``parallel_safe``."""
    from metric_ops.registry import list_metrics

    spread = {cls.name for cls in list_metrics() if cls.parallel_safe and not getattr(cls, "corpus_level", False)}
    assert spread == {"bleu", "chrf", "chrf_pp", "exact_match", "quasi_exact_match", "token_f1", "nltk_bleu", "meteor",
                      "rouge_1", "rouge_2", "rouge_l", "rouge_lsum", "rouge_s", "rouge_su", "rouge_w"}
    corpus = get_metric("corpus_bleu")
    assert parallel.planned_workers(corpus, 1_000_000, 4) == 1


class _Unregistered(Metric, register=False):
    """A parallel-safe metric the workers' registry does not know: they cannot build it."""

    name = "bleu"  # the rebuild check builds the registry's bleu, whose class differs
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    parallel_safe = True

    def score_batch(self, samples, outputs):
        return [{self.name: Score(float(o == s.references[0]))} for s, o in zip(samples, outputs)]


def test_a_metric_that_cannot_be_rebuilt_is_scored_in_process():
    samples, outputs = _sfres(600)
    metric = _Unregistered()
    assert not parallel.rebuildable(metric)
    assert parallel.planned_workers(metric, 600, 2) == 1
    frame = score_frame(metric, samples, outputs, workers=2)
    assert frame.height == 600 and frame.filter(frame["status"] == "scored").height > 0


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_dead_worker_loses_no_sample_and_scores_none_twice(caplog):
    """kill -9 of a worker while chunks are still out: the pool breaks, every chunk not yet
    returned is scored in process, and the rows equal the in-process ones; the next call
    starts a new pool."""
    samples, outputs = _sfres(2400)
    # SF-RES texts repeated 20 times: ~1 s per chunk of 300, so chunks are still out when the
    # first one is back, however loaded the machine (the unscored and empty cases stay)
    samples = [Sample(s.sample_id, s.input, tuple((r + " ") * 20 if r.strip() else r for r in s.references)) for s in samples]
    outputs = [None if o is None else (o + " ") * 20 if o else o for o in outputs]
    metric = get_metric("chrf")
    expected = score_frame(metric, samples, outputs, workers=1)
    parallel._pool(2)
    victims = list(parallel._POOL["pool"]._processes)
    assert len(victims) == 2
    killed: list[int] = []

    def progress(n: int) -> None:
        if not killed:  # first chunk back: others are still being scored
            os.kill(victims[0], signal.SIGKILL)
            killed.append(victims[0])

    with caplog.at_level(logging.WARNING, logger="metric_ops.scoring.parallel"):
        spread = score_frame(metric, samples, outputs, workers=2, progress=progress)
    assert killed
    assert spread.equals(expected)
    assert spread.height == len(samples) and spread["sample_id"].n_unique() == len(samples)
    assert any("in this process" in r.getMessage() for r in caplog.records)
    again = score_frame(metric, samples, outputs, workers=2)
    assert again.equals(expected)
    assert victims[0] not in parallel._POOL["pool"]._processes


def test_the_pool_is_started_once_and_reused():
    samples, outputs = _sfres(1200)
    score_frame(get_metric("bleu"), samples, outputs, workers=2)
    first = set(parallel._POOL["pool"]._processes)
    score_frame(get_metric("rouge_l"), samples, outputs, workers=2)
    score_frame(get_metric("chrf"), samples, outputs, workers=2)
    assert set(parallel._POOL["pool"]._processes) == first


def _unguarded_script_head() -> str:
    """The top of a script without a main guard: it prints one line, then builds 3,000 pairs."""
    return textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        print("script ran", flush=True)
        from metric_ops import Sample, get_metric
        from metric_ops.scoring import parallel
        from metric_ops.scoring.frame import score_frame
        samples = [Sample(str(i), "q", ("the cat sat on the mat number %d" % i,)) for i in range(3000)]
        outputs = ["a cat sat on a mat number %d" % (i % 7) for i in range(3000)]
    """)


def test_the_calling_script_does_not_run_again_in_the_workers(tmp_path):
    """A script without an ``if __name__ == "__main__"`` guard: multiprocessing would import
    it in every worker (and run it again); the pool's workers start with it out of view."""
    script = tmp_path / "unguarded.py"
    script.write_text(_unguarded_script_head() + textwrap.dedent("""
        a = score_frame(get_metric("bleu"), samples, outputs, workers=2)
        b = score_frame(get_metric("bleu"), samples, outputs, workers=1)
        print("equal", a.equals(b), flush=True)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("script ran") == 1, result.stdout
    assert "equal True" in result.stdout
    assert "in this process" not in result.stderr  # the workers did the work



@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_the_scores_asset_scores_a_large_partition_in_workers(tmp_path, instance, monkeypatch):
    """Through the real pipeline (run_evaluation: samples, generations, scores, verdicts on the
    1,181 SF-RES pairs, lowered thresholds): the scores asset sends BLEU and ROUGE-L to the
    worker pool, and the stored score rows equal those of the same evaluation scored in
    process (FACETLAKE_SCORE_WORKERS=1) row for row."""
    import polars as pl

    from metric_ops.lexical.bleu import SentenceBLEU
    from metric_ops.lexical.rouge import _RougeBase
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    monkeypatch.setattr(SentenceBLEU, "parallel_min_samples", 500)
    monkeypatch.setattr(_RougeBase, "parallel_min_samples", 500)
    sent: list[str] = []
    real = parallel.parallel_columns

    def counting(metric, *args, **kwargs):
        sent.append(metric.name)
        return real(metric, *args, **kwargs)

    monkeypatch.setattr(parallel, "parallel_columns", counting)
    columns = ["sample_id", "metric", "value", "status", "detail", "signature", "params"]
    stored = {}
    for workers in ("2", "1"):
        monkeypatch.setenv(parallel.WORKERS_ENV, workers)
        lake = LakeStore(root=str(tmp_path / f"lake{workers}"))
        resolved = run_evaluation(small_spec(name=f"par-{workers}", limit=1181, metrics=("bleu", "rouge_l", "exact_match")),
                                  lake, instance)
        stored[workers] = lake.read("scores", where={"fingerprint": resolved.fingerprint}, columns=columns).sort(["sample_id", "metric"])
        if workers == "2":
            assert sorted(sent) == ["bleu", "rouge_l"]  # exact match: below its own 20,000
    counts = dict(stored["2"].group_by("metric").len().iter_rows())
    assert {m: counts[m] for m in ("bleu", "rouge_l_f", "rouge_l_precision", "rouge_l_recall", "exact_match")} == \
        dict.fromkeys(("bleu", "rouge_l_f", "rouge_l_precision", "rouge_l_recall", "exact_match"), 1181)
    assert stored["2"].equals(stored["1"])
    assert stored["2"].filter(pl.col("status") == "scored").height > 1000


def test_concurrent_pair_runs_share_the_cores(monkeypatch):
    """`facetlake run --workers N` runs N pair runs at once: each gets cores / N scoring
    workers (at least 1) unless the user set FACETLAKE_SCORE_WORKERS."""
    from pipelines.runs.runner import share_cores

    monkeypatch.setattr(parallel, "usable_cpus", lambda: 8)
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    share_cores(None)
    share_cores(1)
    assert parallel.WORKERS_ENV not in os.environ
    share_cores(3)
    assert os.environ[parallel.WORKERS_ENV] == "2"
    monkeypatch.setenv(parallel.WORKERS_ENV, "5")
    share_cores(16)
    assert os.environ[parallel.WORKERS_ENV] == "5"
    monkeypatch.delenv(parallel.WORKERS_ENV)
    share_cores(16)
    assert os.environ[parallel.WORKERS_ENV] == "1"
    monkeypatch.delenv(parallel.WORKERS_ENV)


def test_a_bad_worker_count_is_refused_before_any_run(tmp_path):
    """FACETLAKE_SCORE_WORKERS=two: `facetlake run` stops before registering anything, with the
    variable and the fix named (not a failed scores step after samples and generations)."""
    from typer.testing import CliRunner

    from pipelines.cli import app

    spec = tmp_path / "spec.yaml"
    spec.write_text("name: bad-workers\ndataset: {kind: sfres, limit: 20}\n"
                    "models: {sys: 'precomputed:column=system_output'}\nmetrics: [bleu]\n")
    result = CliRunner().invoke(app, ["run", str(spec), "--lake", str(tmp_path / "lake")],
                                env={"FACETLAKE_SCORE_WORKERS": "two", "DAGSTER_HOME": str(tmp_path / "home")})
    assert isinstance(result.exception, parallel.ParallelConfigError), result.output
    assert "FACETLAKE_SCORE_WORKERS='two'" in str(result.exception) and "whole number >= 1" in str(result.exception)
    assert not (tmp_path / "lake").exists()


def test_workers_end_when_their_parent_is_killed(tmp_path):
    """A command killed outright (kill -9, the OOM killer: no atexit, no pool shutdown) leaves
    no scoring worker and no forkserver behind: each worker watches its parent's sentinel."""
    import time

    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from metric_ops.scoring import parallel
        pool = parallel._pool(2)
        print(" ".join(str(p) for p in pool._processes), flush=True)
        os._exit(137)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 137, result.stderr
    pids = [int(p) for p in result.stdout.split()]
    assert len(pids) == 2

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie is gone for our purpose (its parent, the forkserver, has not reaped it yet)
            return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
        except (FileNotFoundError, IndexError):
            return False

    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if alive(p)]


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_ctrl_c_during_parallel_scoring_stops_at_once_and_leaves_nothing(tmp_path):
    """SIGINT to the process group while workers score (what Ctrl-C in a terminal sends): the
    command gets KeyboardInterrupt, its workers are terminated then (exit by SIGTERM, not left
    to finish their chunks or to wait for more), none prints a traceback of its own, and
    none is left afterwards."""
    import time

    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from metric_ops import Sample, get_metric
        from metric_ops.scoring import parallel
        from metric_ops.scoring.frame import score_frame
        samples = [Sample(str(i), "q", ("the cat sat on the mat number %d " % i * 30,)) for i in range(40000)]
        outputs = ["a cat sat on a mat number %d " % (i % 7) * 30 for i in range(40000)]
        pool = parallel._pool(2)
        workers = list(pool._processes.values())
        print(" ".join(str(p.pid) for p in workers), flush=True)
        try:
            score_frame(get_metric("chrf"), samples, outputs, workers=2)
        except KeyboardInterrupt:
            for p in workers:
                p.join(60)
            print("interrupted", [p.exitcode for p in workers], flush=True)
            raise
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    time.sleep(3)  # chunks are out (the whole job is minutes of chrF on 2 cores)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert f"interrupted {[-signal.SIGTERM] * len(pids)}" in out, (out, err)  # terminated by the command
    assert err.count("Traceback") == 1, err  # the command's own KeyboardInterrupt, none from a worker
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_threads_of_an_unguarded_script_never_run_it_again(tmp_path):
    """Six threads scoring at once with workers=2 in a script without a main guard (three
    rounds, each starting a new pool; without the lock this failed about one round in three): pool start
    and submissions are serialised, so no worker imports the script (its top line is printed
    once) and every frame equals in-process scoring, with no chunk left to this process."""
    script = tmp_path / "threads.py"
    script.write_text(_unguarded_script_head() + textwrap.dedent("""
        import threading
        names = ["bleu", "chrf", "rouge_l", "chrf_pp", "rouge_1", "bleu"]
        ok = True
        for round in range(3):  # the race is at worker start: a new pool each round
            parallel.shutdown_pool()
            got = {}
            def work(i):
                got[i] = score_frame(get_metric(names[i]), samples, outputs, workers=2)
            threads = [threading.Thread(target=work, args=(i,)) for i in range(len(names))]
            for t in threads: t.start()
            for t in threads: t.join()
            ok = ok and all(got[i].equals(score_frame(get_metric(names[i]), samples, outputs, workers=1)) for i in got)
        print("equal", ok, flush=True)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("script ran") == 1, result.stdout
    assert "equal True" in result.stdout
    assert "in this process" not in result.stderr, result.stderr


def test_plugin_metrics_are_built_in_workers_and_script_metrics_stay_in_process(tmp_path):
    """A parallel-safe metric registered by an importable module (a plugin) is built in the
    workers (they import its module); one defined in the calling script is not offered to
    them (no worker could build it). Both give the in-process values, with no warning."""
    (tmp_path / "my_plugin.py").write_text(textwrap.dedent("""
        from metric_ops.lexical.bleu import SentenceBLEU

        class PluginBLEU(SentenceBLEU):
            name = "plugin_bleu"
    """))
    script = tmp_path / "use_plugins.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(tmp_path)!r}]
        import my_plugin
        from metric_ops import Sample, get_metric
        from metric_ops.scoring import parallel
        from metric_ops.lexical.bleu import SentenceBLEU
        from metric_ops.scoring.frame import score_frame

        class ScriptBLEU(SentenceBLEU):
            name = "script_bleu"

        samples = [Sample(str(i), "q", ("the cat sat on the mat number %d" % i,)) for i in range(2000)]
        outputs = ["a cat sat on a mat number %d" % (i % 7) for i in range(2000)]
        plugin, script = get_metric("plugin_bleu"), get_metric("script_bleu")
        print("planned", parallel.planned_workers(plugin, 2000, 2), parallel.planned_workers(script, 2000, 2))
        for m in (plugin, script):
            print(m.name, score_frame(m, samples, outputs, workers=2).equals(score_frame(m, samples, outputs, workers=1)))
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "planned 2 1" in result.stdout
    assert "plugin_bleu True" in result.stdout and "script_bleu True" in result.stdout
    assert "in this process" not in result.stderr, result.stderr
