"""Time travel for ``facetlake sql`` (issue 31): which Delta version of every lake table a
query reads when it asks for an earlier state.

Every facetlake table is a Delta table, so each earlier state is still in its log until it
is vacuumed. Three ways to name a point:

- a timestamp (ISO 8601, e.g. ``2026-12-04T03:10:00Z``; without a zone it is UTC): each
  table at its newest commit made at or before that moment (Delta's ``timestampAsOf``);
- ``TABLE=VERSION`` (e.g. ``scores=12``, repeatable): that table at that version, and every
  other table as of the moment that commit was made (a consistent picture of the lake);
- a run id (``--run``, a unique prefix is enough): the tables the run wrote at the versions
  the ``runs`` table recorded for it, the others as of the moment the run finished.

A bare number is refused: versions are per table (``scores`` may be at 40 when ``samples``
is at 3). Tables made after the point are left out of the query and named.

Commit times come from each table's Delta log (``DeltaTable.history()``, milliseconds since
the epoch, UTC). Nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from metric_ops.errors import FacetlakeError


class AsOfError(FacetlakeError, ValueError):
    """An ``--as-of`` / ``--run`` value that names no point of the lake's history."""


@dataclass(frozen=True)
class AsOf:
    """The versions a query reads: ``versions`` (table -> Delta version; every table of the
    lake that existed at the point), ``absent`` (tables made after it), ``moment`` (the
    point in UTC) and ``described`` (one line saying what was chosen)."""

    versions: Mapping[str, int]
    absent: tuple[str, ...] = ()
    moment: dt.datetime | None = None
    described: str = ""
    pinned: Mapping[str, int] = field(default_factory=dict)


def parse_moment(text: str) -> dt.datetime:
    """An ISO 8601 date or timestamp as an aware UTC datetime (naive = UTC); raises
    :class:`AsOfError` naming the expected forms."""
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AsOfError(f"--as-of {text!r}: not a timestamp or TABLE=VERSION; write e.g. 2026-12-04T03:10:00Z, "
                        "2026-12-04 or scores=12") from None
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment.astimezone(dt.timezone.utc)


def commit_times(lake: Any, table: str) -> list[tuple[int, dt.datetime]]:
    """``(version, commit time in UTC)`` of every commit in ``table``'s log, oldest first."""
    out = []
    for entry in lake.delta(table).history():
        stamp = entry.get("timestamp")
        if entry.get("version") is None or stamp is None:
            continue
        out.append((int(entry["version"]), dt.datetime.fromtimestamp(int(stamp) / 1000, dt.timezone.utc)))
    return sorted(out)


def _newest_by(commits: Sequence[tuple[int, dt.datetime]], moment: dt.datetime) -> int | None:
    return max((version for version, when in commits if when <= moment), default=None)


def version_at(lake: Any, table: str, moment: dt.datetime) -> int | None:
    """The newest version of ``table`` committed at or before ``moment`` (None: the table
    did not exist yet)."""
    return _newest_by(commit_times(lake, table), moment)


def _as_of_moment(logs: Mapping[str, Sequence[tuple[int, dt.datetime]]], moment: dt.datetime, pinned: Mapping[str, int]) -> AsOf:
    versions, absent = {}, []
    for table, commits in logs.items():
        if table in pinned:
            versions[table] = pinned[table]
            continue
        v = _newest_by(commits, moment)
        if v is None:
            absent.append(table)
        else:
            versions[table] = v
    shown = ", ".join(f"{t} v{v}" for t, v in sorted(versions.items()) if t in pinned or t in ("samples", "scores", "summary", "comparisons", "evaluations"))
    described = (f"as of {moment.strftime('%Y-%m-%d %H:%M:%S')} UTC: {shown or 'no table yet'}"
                 + (f"; not yet made then: {', '.join(sorted(absent))}" if absent else ""))
    return AsOf(versions, tuple(sorted(absent)), moment, described, dict(pinned))


def resolve_as_of(lake: Any, tables: Sequence[str], as_of: Sequence[str] = (), run: str | None = None) -> AsOf | None:
    """The versions of ``tables`` to read for ``--as-of`` values (a timestamp, or
    ``TABLE=VERSION`` items) and/or ``--run RUN_ID``; None when neither is given (read the
    current versions). Raises :class:`AsOfError` for a bare number, an unknown table, a
    version the table does not have, a timestamp before the lake's first commit or an
    unknown run, each naming the fix."""
    as_of = [a for a in (as_of or []) if a and a.strip()]
    if not as_of and not run:
        return None
    logs = {t: commit_times(lake, t) for t in tables}  # each table's Delta log read once
    pinned: dict[str, int] = {}
    moment: dt.datetime | None = None
    for item in as_of:
        text = item.strip()
        if "=" in text:
            table, _, raw = text.partition("=")
            table = table.strip()
            if table not in tables:
                raise AsOfError(f"--as-of {text!r}: no table {table!r} in this lake; tables: {', '.join(tables)}")
            try:
                version = int(raw)
            except ValueError:
                raise AsOfError(f"--as-of {text!r}: {raw!r} is not a version number, e.g. {table}=3") from None
            commits = dict(logs[table])
            if version not in commits:
                raise AsOfError(f"--as-of {text!r}: {table} has versions {min(commits)} to {max(commits)}"
                                + (" (older ones were vacuumed)" if min(commits) > 0 else ""))
            pinned[table] = version
            moment = commits[version] if moment is None else max(moment, commits[version])
        elif text.lstrip("-").isdigit():
            raise AsOfError(f"--as-of {text}: a bare version is ambiguous, each table has its own; write TABLE=VERSION "
                            "(e.g. scores=12) or a timestamp (e.g. 2026-12-04T03:10:00Z)")
        else:
            when = parse_moment(text)
            moment = when if moment is None else max(moment, when)
    if run:
        if "runs" not in tables:
            raise AsOfError("--run: this lake has no runs table yet; run an evaluation first")
        import polars as pl

        runs = lake.read("runs").filter(pl.col("run_id").str.starts_with(run.strip()))
        ids = sorted(set(runs["run_id"].to_list()))
        if not ids:
            raise AsOfError(f"--run {run}: no run with that id in the runs table; `facetlake sql \"select distinct run_id, "
                            "asset, finished_at from runs order by finished_at desc\"` lists them")
        if len(ids) > 1:
            raise AsOfError(f"--run {run}: {len(ids)} runs start with it ({', '.join(i[:12] for i in ids[:5])}); give more characters")
        for r in runs.iter_rows(named=True):
            if r["table_name"] in tables and r["table_version"] is not None:
                pinned[r["table_name"]] = max(pinned.get(r["table_name"], -1), int(r["table_version"]))
        finished = [t for t in runs["finished_at"].to_list() if t is not None]
        if finished:
            end = max(finished)
            end = end.replace(tzinfo=dt.timezone.utc) if end.tzinfo is None else end
            moment = end if moment is None else min(moment, end)
    if moment is None:  # only pinned tables without a commit time (cannot happen with a log); read the rest now
        moment = dt.datetime.now(dt.timezone.utc)
    first = min((c[0][1] for c in logs.values() if c), default=None)
    if first is not None and moment < first and not pinned:
        raise AsOfError(f"--as-of {moment.isoformat()}: before the lake's first commit ({first.isoformat()}); nothing to read")
    return _as_of_moment(logs, moment, pinned)


__all__ = ["AsOf", "AsOfError", "commit_times", "parse_moment", "resolve_as_of", "version_at"]
