"""Per-sample lexical scoring spread over the machine's cores: one process pool per process.

What goes to worker processes: a metric whose class declares ``parallel_safe = True``
(pure per-sample CPU work that depends on nothing but the metric's parameters and the
sample: sentence BLEU, chrF, chrF++, NLTK BLEU, every ROUGE variant, METEOR, the SQuAD
metrics), when at least the class's ``parallel_min_samples`` samples are to be scored and
more than one CPU is usable. Judged, neural, corpus-level, confidence, agent and tool-call
metrics are always scored in the calling process. A sample's value never depends on which
process scored it or on the other samples of its chunk, so the values, statuses and
details equal the in-process path exactly (tests/test_parallel_scoring.py).

The pool:

- workers come from a ``forkserver`` (a fresh interpreter that forks the workers), never
  from a fork of the calling process, which may hold Dagster's, polars' or torch's threads;
- it is started on first use and kept for the process: every later metric and partition of
  one command reuses the same workers (started once per command, about 0.3-0.5 s);
- a worker rebuilds each metric from its registry name and parameters once (the caller
  checks first that the rebuilt metric has the same signature; a metric that cannot be
  rebuilt that way is scored in process);
- a chunk whose worker dies or that cannot be sent is scored in the calling process, with
  the same values, and a warning in the log: no sample is lost and none is scored twice.

``FACETLAKE_SCORE_WORKERS``: number of worker processes (``1`` = always in process; default
and most: the CPUs this process may use, container CPU quotas included, :func:`usable_cpus`).
The pool's size is fixed at its first use in a process. A malformed value is a
:class:`ParallelConfigError` naming the variable and the fix.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import logging
import multiprocessing
import os
import re
import signal
import sys
import threading
import types
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from metric_ops.errors import FacetlakeError
from metric_ops.scoring.rows import local_columns

if TYPE_CHECKING:
    from metric_ops.base import Metric, Sample

LOG = logging.getLogger(__name__)
WORKERS_ENV = "FACETLAKE_SCORE_WORKERS"
#: samples per work unit at most (smaller units balance the workers and move the progress bar)
MAX_CHUNK = 20_000
MIN_CHUNK = 500

Columns = dict[str, tuple[list, list, list]]  # score name -> (values, statuses, detail JSON texts)


class ParallelConfigError(FacetlakeError, ValueError):
    """``FACETLAKE_SCORE_WORKERS`` is not a whole number >= 1."""


@functools.lru_cache(maxsize=1)
def usable_cpus() -> int:
    """CPUs this process may use: ``joblib.cpu_count()``, which takes the affinity mask and a
    container's CPU quota (Linux cgroups v1 and v2) into account, so a container limited to 2
    CPUs on a 64-core host gets 2 (``os.cpu_count()`` says 64). Looked up once per process."""
    from joblib import cpu_count

    return max(1, int(cpu_count()))


def requested_workers() -> int | None:
    """``FACETLAKE_SCORE_WORKERS`` as a number of processes, or None when it is unset or blank.
    Raises :class:`ParallelConfigError` for anything but ASCII digits making a number >= 1."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return None
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
        raise ParallelConfigError(f"{WORKERS_ENV}={raw!r}: give a whole number >= 1 (1 = score in process), or unset it")
    return int(raw)


def configured_workers() -> int:
    """Worker processes for scoring: ``FACETLAKE_SCORE_WORKERS`` when set, else
    :func:`usable_cpus`; never more than :func:`usable_cpus` (more processes than CPUs only
    slow CPU-bound scoring down, and ``=99999`` would fork until memory runs out). Raises
    :class:`ParallelConfigError` for a malformed value (:func:`requested_workers`)."""
    requested = requested_workers()
    return usable_cpus() if requested is None else min(requested, usable_cpus())


_REBUILDABLE: dict[tuple[type, str], bool] = {}


def _spec(metric: "Metric") -> tuple[str, str, dict[str, Any], str]:
    """(module defining the class, registry name, parameters, signature): what a worker needs
    to build the same metric (it imports the module first: a metric registered by a plugin
    package exists in a worker only once that package is imported there)."""
    return type(metric).__module__, type(metric).name, dict(metric.params), metric.signature()


def rebuildable(metric: "Metric") -> bool:
    """Whether ``get_metric(name, **params)`` gives a metric with ``metric``'s signature (so a
    worker can build it); checked once per (class, signature) in a process."""
    from metric_ops.registry import get_metric

    module, name, params, signature = _spec(metric)
    key = (type(metric), signature)
    if key not in _REBUILDABLE:
        if module in ("__main__", "__mp_main__") or "<" in module:  # a script's or a notebook's class: no worker has it
            _REBUILDABLE[key] = False
            return False
        try:
            built = get_metric(name, **params)
            _REBUILDABLE[key] = type(built) is type(metric) and built.signature() == signature
        except Exception:  # noqa: BLE001 - anything that cannot be rebuilt is scored in process
            _REBUILDABLE[key] = False
    return _REBUILDABLE[key]


def planned_workers(metric: "Metric", n_samples: int, workers: int | None = None) -> int:
    """Processes to score ``n_samples`` samples of ``metric`` with (1 = in process).

    ``workers`` given (>= 1) is obeyed for a parallel-safe metric; ``None`` reads
    :func:`configured_workers`, and below the class's ``parallel_min_samples`` the work stays
    in process (a worker costs a few hundred milliseconds to start). A metric that is not
    ``parallel_safe``, is corpus-level, or cannot be rebuilt from its name and parameters,
    always gets 1. A process that is itself a daemon (it may not have children) gets 1."""
    if not getattr(metric, "parallel_safe", False) or getattr(metric, "corpus_level", False):
        return 1
    if workers is None:
        requested_workers()  # a malformed FACETLAKE_SCORE_WORKERS is refused whatever the size
        if n_samples < int(getattr(metric, "parallel_min_samples", 5_000)):
            return 1
        workers = configured_workers()
    if workers <= 1 or n_samples < 2 or multiprocessing.current_process().daemon:
        return 1
    return workers if rebuildable(metric) else 1


# --------------------------------------------------------------------------- the pool
_POOL: dict[str, Any] = {"pool": None, "pid": None}
_LOCK = threading.RLock()


def _init_worker() -> None:
    # a worker holds a chunk's samples and every Score it makes until the chunk is done: with
    # the default thresholds the collector rescans them all every 700 allocations (10-30% of
    # ROUGE's time); the same thresholds as the facetlake command's own process
    gc.set_threshold(100_000, 50, 100)
    # Ctrl-C reaches the whole process group: the command handles it (and stops its workers,
    # _abandon_pool); a worker that raised KeyboardInterrupt itself would print a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker of a parent killed outright (kill -9, the OOM killer) would wait on its task
    # queue for ever (it holds that queue's write end itself), and the forkserver with it.
    # multiprocessing gives each child a sentinel of its parent that becomes ready when the
    # parent is gone: the worker ends then.
    parent = multiprocessing.parent_process()
    if parent is not None:
        def watch() -> None:
            parent.join()
            os._exit(0)

        threading.Thread(target=watch, name="facetlake-parent-watch", daemon=True).start()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While worker processes start, the calling program's ``__main__`` is out of view.

    multiprocessing's non-fork start methods make every new process import the parent's
    main script (as ``__mp_main__``) so that functions defined there can be unpickled. The
    workers need nothing from it (their task functions live in this module), and a script
    without an ``if __name__ == "__main__":`` guard would run again in each of them. A
    stand-in module without a file takes its place for the moment processes are created."""
    main = sys.modules.get("__main__")
    if main is None or not (getattr(main, "__file__", None) or getattr(main, "__spec__", None)):
        yield
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _pool(size: int) -> ProcessPoolExecutor:
    """This process's scoring pool with ``size`` workers, started now if need be (all its
    workers at once, while :func:`_main_module_hidden`)."""
    pool = _POOL["pool"]
    # a healthy pool is reused whatever size is asked now (its size is fixed at its first
    # use): replacing it would cancel the chunks another thread has out
    if pool is not None and (_POOL["pid"] != os.getpid() or getattr(pool, "_broken", False)):
        if _POOL["pid"] == os.getpid():
            pool.shutdown(wait=False, cancel_futures=True)
        pool = None
    if pool is None:
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(["metric_ops.scoring.parallel"])  # workers fork from an interpreter that has this module
        pool = ProcessPoolExecutor(max_workers=size, mp_context=ctx, initializer=_init_worker)
        with _main_module_hidden():
            # each submit while no worker is idle starts one more: all of them start here
            for future in [pool.submit(os.getpid) for _ in range(size)]:
                future.result()
        _POOL.update(pool=pool, pid=os.getpid())
    return pool


def _abandon_pool() -> None:
    """Stop this process's workers at once (their running chunks are thrown away) and forget
    the pool: what an interrupted command needs, since the interpreter's exit would
    otherwise wait for every running chunk to finish."""
    with _LOCK:
        pool = _POOL["pool"]
        if pool is None or _POOL["pid"] != os.getpid():
            return
        for process in list(getattr(pool, "_processes", {}).values()):  # ProcessPoolExecutor keeps them by pid
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        _POOL.update(pool=None, pid=None)


def shutdown_pool() -> None:
    """Stop this process's scoring workers (started again on next use)."""
    with _LOCK:
        pool = _POOL["pool"]
        if pool is not None and _POOL["pid"] == os.getpid():
            pool.shutdown(wait=True, cancel_futures=True)
        _POOL.update(pool=None, pid=None)


_WORKER_METRICS: dict[str, "Metric"] = {}


def _worker_columns(spec: tuple[str, str, dict[str, Any], str], samples: list["Sample"], outputs: list[str | None],
                    batch_size: int) -> Columns:
    """In a worker: the columns of ``spec``'s metric over one chunk (the in-process code path)."""
    import importlib

    from metric_ops.registry import get_metric

    module, name, params, signature = spec
    metric = _WORKER_METRICS.get(signature)
    if metric is None:
        importlib.import_module(module)  # registers a plugin's metric classes in this worker
        metric = get_metric(name, **params)
        if metric.signature() != signature:  # the caller checked; a worker with other library versions must not score
            raise RuntimeError(f"worker built {metric.signature()!r}, expected {signature!r}")
        _WORKER_METRICS[signature] = metric
    return local_columns(metric, samples, outputs, batch_size)


def chunk_bounds(n: int, workers: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges covering ``0..n``: about four per worker, each
    between :data:`MIN_CHUNK` and :data:`MAX_CHUNK` samples (the last may be shorter)."""
    size = max(MIN_CHUNK, min(MAX_CHUNK, -(-n // max(1, workers * 4))))
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def map_chunks(
    fn: Callable[..., Any],
    calls: Sequence[tuple],
    workers: int,
    here: Callable[[int], Any],
    what: str,
    describe: Callable[[int], str],
    done: Callable[[int], Any] | None = None,
) -> list[Any]:
    """``[fn(*call) for call in calls]``, each call run by one of this process's ``workers``
    scoring processes (the pool is started if need be), results in the order of ``calls``.

    ``fn`` is a module-level function a worker can import; ``here(i)`` gives call i's result
    computed in this process, for a call no worker ran (a pool that would not start, a dead
    worker, arguments that cannot be pickled), with a warning naming ``what`` /
    ``describe(i)``. ``done(i)`` runs after each result, in order (a progress bar). An
    interruption (Ctrl-C, SystemExit) stops the workers at once and is raised."""
    try:
        return _map_chunks(fn, calls, workers, here, what, describe, done)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not after the running chunks
            _abandon_pool()
        raise


def _map_chunks(fn: Callable[..., Any], calls: Sequence[tuple], workers: int, here: Callable[[int], Any], what: str,
                describe: Callable[[int], str], done: Callable[[int], Any] | None) -> list[Any]:
    futures: list[Future | None] = []
    try:
        # one thread at a time starts workers and submits: the stand-in __main__ is the
        # process's, and a second thread putting the real one back while workers start
        # would let them import the calling script
        with _LOCK:
            pool = _pool(workers)
            with _main_module_hidden():  # a worker that died is not replaced (the pool breaks), but be safe
                for call in calls:
                    futures.append(pool.submit(fn, *call))
    except Exception as exc:  # noqa: BLE001 - no pool (a sandbox without semaphores, ...): in process
        LOG.warning("scoring %s in this process: worker processes unavailable (%s: %s)", what, type(exc).__name__, exc)
        futures.extend([None] * (len(calls) - len(futures)))
    results = []
    for i, future in enumerate(futures):
        result, ran = None, False
        if future is not None:
            try:
                result, ran = future.result(), True
            except Exception as exc:  # noqa: BLE001 - the pool's failure; a call's own error is raised again by here(i)
                # the pool broke (BrokenProcessPool) or the call could not be pickled: this call
                # (and later ones of a broken pool) is run here, once
                LOG.warning("scoring %s in this process: %s: %s", describe(i), type(exc).__name__, exc)
        results.append(result if ran else here(i))
        if done is not None:
            done(i)
    return results


def parallel_columns(
    metric: "Metric",
    samples: Sequence["Sample"],
    outputs: Sequence[str | None],
    batch_size: int,
    workers: int,
    progress: Callable[[int], Any] | None = None,
) -> Columns:
    """:func:`metric_ops.scoring.rows.local_columns` over chunks scored by ``workers`` processes
    (:func:`map_chunks`), joined in input order. A chunk that a worker could not score is
    scored here instead, with a warning naming its samples."""
    bounds = chunk_bounds(len(samples), workers)
    spec = _spec(metric)
    parts = map_chunks(
        _worker_columns, [(spec, list(samples[a:b]), list(outputs[a:b]), batch_size) for a, b in bounds], workers,
        here=lambda i: local_columns(metric, samples[bounds[i][0]:bounds[i][1]], outputs[bounds[i][0]:bounds[i][1]], batch_size),
        what=metric.name,
        describe=lambda i: (f"samples {samples[bounds[i][0]].sample_id} to {samples[bounds[i][1] - 1].sample_id} "
                            f"(positions {bounds[i][0]}-{bounds[i][1] - 1}) of {metric.name}"),
        done=None if progress is None else (lambda i: progress(bounds[i][1] - bounds[i][0])),
    )
    return {name: tuple(list(itertools.chain.from_iterable(p[name][i] for p in parts)) for i in range(3))  # type: ignore[misc]
            for name in metric.emitted()}
