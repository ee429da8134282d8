"""Fault injection for crash tests: ``FACETLAKE_FAULT=POINT@N`` ends the process with
``os._exit(137)`` (as a ``kill -9`` would: no ``finally``, no flush, no atexit) the N-th
time the named point is reached in this process.

Points are plain strings placed where a crash matters (the reliability guarantees in
docs/reliability.md are tested by killing the process at each of them):

- ``commit.before:<table>`` / ``commit.after:<table>``: around every Delta commit to a table;
- ``outbound.before_send`` / ``outbound.after_send``: around every external call, after its
  intent is durable in the outbound ledger and before / after the request goes out.

Unset (the default), :func:`fault_point` costs one dictionary lookup. Shared by the lake
(commits, leases) and the outbound path, so it sits outside both families and imports nothing
of them.
"""

from __future__ import annotations

import os
import threading

_ENV = "FACETLAKE_FAULT"
_counts: dict[str, int] = {}
_lock = threading.Lock()


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(_ENV, "").strip()
    if not spec:
        return None
    point, _, n = spec.rpartition("@")
    if not point or not n.isdigit():
        return (spec, 1)
    return point, int(n)


def fault_point(name: str) -> None:
    """Exit the process at once (status 137) when ``$FACETLAKE_FAULT`` names ``name`` and
    this is its N-th hit; otherwise do nothing. ``name``: a point as listed above."""
    target = _target()
    if target is None or target[0] != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        hit = _counts[name] == target[1]
    if hit:
        os._exit(137)
