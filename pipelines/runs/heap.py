"""Garbage-collector and BLAS-thread settings of a ``facetlake`` command line process (issue
26, "Fixed cost of a run").

A 10-sample ``facetlake run`` spent about 0.6 s of its 4.5 s CPU in Python's cyclic garbage
collector: five full (generation 2) collections of ~0.09 s each, each scanning every object
that the imports of Dagster, polars, pyarrow and the asset definitions left alive for the
whole process, and some 700 young collections triggered by those imports. A command line
process lives for one command, so two settings pay off there:

- higher thresholds (:data:`THRESHOLDS`, against CPython's (700, 10, 10)): fewer collections
  during imports and runs; the cyclic garbage a run makes waits longer to be freed (a few
  MiB at peak on the 10-sample run, ``benchmarks/bench_startup.py --run``);
- :func:`freeze_long_lived`: once the command has imported what it runs (when it opens its
  Dagster instance), every object alive then is moved to the permanent generation
  (``gc.freeze``), so later collections no longer scan it.

A third setting is about threads: numpy and scipy each load their own OpenBLAS, which starts
one thread per core at load; those threads busy-wait for work after every BLAS call (about
0.2 s of CPU, 5% of a 10-sample run, for a handful of tiny dot products). A command line
process sets ``OPENBLAS_NUM_THREADS=1`` (:data:`BLAS_ENV`) unless the user set it, before
numpy is first imported; it is inherited by the run workers it starts, which parallelise by
process. Nothing facetlake computes is a large matrix product (BERTScore and the local
models run on torch, whose threads this leaves alone).

All three apply only in a process started by the console entry (:func:`cli_process`, called by
``pipelines.cli.main``): a test process, a code server or a run worker lives long, and an
object frozen there is never collected once it becomes garbage.
"""

from __future__ import annotations

import gc
import os
import sys

#: the collector's thresholds in a command line process (generation 0, 1, 2)
THRESHOLDS = (50_000, 20, 20)

#: environment variables a command line process sets unless the user set them (read by OpenBLAS at load)
BLAS_ENV = {"OPENBLAS_NUM_THREADS": "1"}

_cli = False
_set_env: list[str] = []  # the BLAS_ENV names cli_process set (leave_cli_process removes them)


def cli_process() -> None:
    """Mark this process as a ``facetlake`` command line process, raise the collector's
    thresholds to :data:`THRESHOLDS` and, if numpy is not loaded yet, set :data:`BLAS_ENV`
    where the environment does not already say (called once, by the console entry)."""
    global _cli
    _cli = True
    gc.set_threshold(*THRESHOLDS)
    if "numpy" not in sys.modules:
        for name, value in BLAS_ENV.items():
            if name not in os.environ:
                os.environ[name] = value
                _set_env.append(name)


def in_cli_process() -> bool:
    """Whether :func:`cli_process` ran in this process (and :func:`leave_cli_process` did not undo it)."""
    return _cli


def freeze_long_lived() -> bool:
    """In a command line process (:func:`cli_process`): move every object alive now to the
    permanent generation (``gc.freeze``) so later collections stop scanning it; returns
    True. Elsewhere a no-op that returns False."""
    if _cli:
        gc.freeze()
    return _cli


def leave_cli_process(thresholds: tuple[int, int, int]) -> None:
    """Undo :func:`cli_process` in a process that lives on after running the command line in
    process (a test calling ``pipelines.cli.main``): the collector's ``thresholds`` back,
    frozen objects unfrozen, the :data:`BLAS_ENV` variables it set removed, later
    :func:`freeze_long_lived` calls no-ops again."""
    global _cli
    _cli = False
    while _set_env:
        os.environ.pop(_set_env.pop(), None)
    gc.set_threshold(*thresholds)
    gc.unfreeze()
