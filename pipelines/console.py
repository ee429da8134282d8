"""The ``facetlake`` command's entry point: :func:`pipelines.cli.main`, then a quick exit.

After a command has finished, a normal interpreter exit tears down every module and object
of the process: with Dagster, polars, pyarrow and deltalake loaded that took 0.5-0.9 s of
each command (issue 14; measured from the end of ``main`` to the process's end). Nothing
of the command's is left to do at that point, so the process ends there: Python's usual
exit steps run (non-daemon threads joined, every ``atexit`` handler run, which includes
``logging``'s flush, ``tempfile`` clean-ups and coverage), then standard output and error
are flushed and the process exits with the command's status through ``os._exit``,
skipping only the teardown.

This module imports nothing heavy, so the handler below is the process's first ``atexit``
handler and runs after all others. Tests call :func:`pipelines.cli.main` in process and are
not affected (only the console script comes here).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys

_status: list[int] = [0]


def _exit_status(code: object) -> int:
    """The exit status Python gives ``SystemExit(code)`` (None: 0; an int: itself; else 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def _finish() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`facetlake sql ... | head`) or stream
            pass
    os._exit(_status[0])


def main() -> None:
    """Run the CLI (:func:`pipelines.cli.main`) and exit without tearing the interpreter down."""
    atexit.register(_finish)
    # Collect cycles less often: a command holds hundreds of thousands of objects (Dagster's
    # definitions, a run's samples and outputs), and the default (a young-generation pass per
    # 700 allocations) rescans them all the time: 15% of a 30,000-sample run (issue 14).
    gc.set_threshold(100_000, 50, 100)
    from pipelines.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exc:
        _status[0] = _exit_status(exc.code)
        raise
    except BaseException:  # an error cli.main let through (FACETLAKE_DEBUG=1): Python prints it, status 1
        _status[0] = 1
        raise
