"""What the results viewer reads (issue 29), through the lake's read-only DuckDB connection
(:class:`resources.sql.query.Connection`: hardened, external access off, configuration
locked), paged on the server: a page never holds more than ``page_size`` samples.

- :class:`LakeReader` keeps one connection per state of the lake (the Delta versions of the
  tables it reads) and opens a new one when a table changes; each request gets its own
  cursor, so concurrent requests do not share a statement.
- the compare view is in :mod:`pipelines.view.compare`;
- :func:`sample_record` is everything stored about one sample; :func:`metric_history` a
  metric's mean per model across the evaluation's scores runs (Delta time travel).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import polars as pl

from metric_ops.errors import FacetlakeError
from resources.lake.resource import LakeStore
from resources.sql.query import Connection, SQLLimits

#: the tables the viewer reads; a change of any of their Delta versions opens a new connection
TABLES = ("evaluations", "pairs", "samples", "generations", "scores", "summary", "comparisons", "runs", "token_logprobs")
VIEWS_KEPT = 16  # views whose ordered ids a server keeps (a 500,000-sample view: about 30 MB)


class ViewError(FacetlakeError, ValueError):
    """A view asks for something the lake does not hold (an unknown evaluation, model or
    metric, a bad filter); the message names it and what exists."""


class LakeReader:
    """Read-only DuckDB over ``lake``, one connection per lake state, a cursor per call.

    ``limits``: the SQL limits (memory, threads, time) of every query."""

    def __init__(self, lake: LakeStore, limits: SQLLimits | None = None) -> None:
        self.lake = lake
        self.limits = limits or SQLLimits.resolve()
        self._lock = threading.Lock()
        self._state: tuple[Any, ...] | None = None
        self._connection: Connection | None = None
        self._views: OrderedDict[tuple[Any, ...], list[str]] = OrderedDict()

    def versions(self) -> dict[str, int]:
        """``{table: Delta version}`` of the tables the viewer reads that exist."""
        return {t: self.lake.version(t) for t in TABLES if self.lake.exists(t)}

    def _current(self) -> Connection:
        state = tuple(sorted(self.versions().items()))
        with self._lock:
            if self._connection is None or state != self._state:
                if self._connection is not None:
                    self._connection.close()
                self._connection, self._state = Connection(self.lake, self.limits), state
            return self._connection

    def frame(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """The result of one read-only statement with ``?`` parameters, as polars."""
        cursor = self._current().con.cursor()
        try:
            return pl.from_arrow(cursor.sql(sql, params=params or None).to_arrow_table())
        finally:
            cursor.close()

    def view_ids(self, view: Any, sql: str, params: list[Any]) -> list[str]:
        """The ordered sample ids of a view (its SQL run once per lake state and kept for
        the :data:`VIEWS_KEPT` views used last): turning a page reads only that page's rows."""
        self._current()
        key = (self._state, view)
        with self._lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
        ids = self.frame(sql, params)["sample_id"].to_list()
        with self._lock:
            self._views[key] = ids
            while len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
        return ids

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


# ----------------------------------------------------------------------------- evaluations
def evaluations(reader: LakeReader) -> pl.DataFrame:
    """One row per current, not archived evaluation: name, fingerprint, dataset, models,
    samples, schedule, registered_at, last scores run, regression-check state."""
    if not reader.lake.exists("evaluations"):
        return pl.DataFrame()
    runs = ("(SELECT max(finished_at) FROM runs r WHERE r.fingerprint = e.fingerprint AND r.asset = 'scores')"
            if reader.lake.exists("runs") else "NULL")
    models = ("(SELECT string_agg(DISTINCT p.model, ', ' ORDER BY p.model) FROM pairs p "
              "WHERE p.fingerprint = e.fingerprint AND p.status = 'current')" if reader.lake.exists("pairs") else "NULL")
    return reader.frame(f"""
        SELECT e.name, e.fingerprint, e.dataset, {models} AS models, e.n_samples, e.schedule, e.registered_at,
               {runs} AS last_scored
        FROM evaluations e WHERE e.status = 'current' AND NOT coalesce(e.archived, false) ORDER BY e.name""")


def leaderboard(reader: LakeReader) -> pl.DataFrame:
    """Per current evaluation, model and metric, the stored comparison: ``mean``,
    ``ci_low``/``ci_high``, ``tie_group`` (1 = best, models statistically indistinguishable
    share one) and ``regressed`` (the model is significantly worse than the baseline on it:
    the regression check's rule), from the ``comparisons`` table (empty before any)."""
    if not (reader.lake.exists("comparisons") and reader.lake.exists("evaluations")):
        return pl.DataFrame()
    return reader.frame("""
        SELECT e.name AS evaluation, c.model, c.metric, c.direction, c.mean, c.ci_low, c.ci_high,
               TRY_CAST(json_extract_string(c.detail, '$.tie_group') AS INTEGER) AS tie_group,
               EXISTS (SELECT 1 FROM comparisons p WHERE p.fingerprint = c.fingerprint AND p.kind = 'pairwise'
                       AND p.model = c.model AND p.metric = c.metric AND p.verdict = 'regressed') AS regressed
        FROM comparisons c JOIN evaluations e ON e.fingerprint = c.fingerprint AND e.status = 'current'
             AND NOT coalesce(e.archived, false)
        WHERE c.kind = 'model_metric' AND c.mean IS NOT NULL
        ORDER BY e.name, c.metric, tie_group NULLS LAST, c.model""")


def current_evaluation(reader: LakeReader, name: str) -> dict[str, Any]:
    """The current row of evaluation ``name`` (or of the evaluation whose fingerprint
    starts with ``name``); raises :class:`ViewError` naming the evaluations there are."""
    frame = reader.frame("SELECT name, fingerprint, dataset, spec FROM evaluations WHERE status = 'current' "
                         "AND (name = ? OR fingerprint LIKE ? || '%') ORDER BY name LIMIT 1", [name, name])
    if frame.height == 0:
        known = evaluations(reader)
        names = ", ".join(known["name"].to_list()) if known.height else "none (run `facetlake run CONFIG` first)"
        raise ViewError(f"no evaluation {name!r} in the lake; evaluations: {names}")
    return frame.row(0, named=True)


def evaluation_models(reader: LakeReader, fingerprint: str) -> list[str]:
    """The models with stored generations (or agent episodes) under ``fingerprint``, sorted."""
    tables = [t for t in ("generations", "episodes") if reader.lake.exists(t)]
    if not tables:
        return []
    sql = " UNION ".join(f"SELECT DISTINCT model FROM {t} WHERE fingerprint = ?" for t in tables)
    return sorted(reader.frame(sql, [fingerprint] * len(tables))["model"].to_list())


def evaluation_metrics(reader: LakeReader, fingerprint: str) -> pl.DataFrame:
    """``metric``, ``direction`` of every score stored under ``fingerprint``, sorted by metric."""
    if not reader.lake.exists("scores"):
        return pl.DataFrame({"metric": [], "direction": []}, schema={"metric": pl.String, "direction": pl.String})
    return reader.frame("SELECT metric, any_value(direction) AS direction FROM scores WHERE fingerprint = ? "
                        "GROUP BY metric ORDER BY metric", [fingerprint])


# ----------------------------------------------------------------------------- one sample
def sample_record(reader: LakeReader, fingerprint: str, sample_id: str) -> dict[str, Any]:
    """Everything stored about one sample: the sample row, and per model its generation,
    every score (value, status, detail: the judge's reasoning and per-claim verdicts, the
    run that wrote it), its token log-probabilities, and the Delta versions read. Repeated
    trials (``<sample>#<trial>``) and agent episodes (their turns, tool calls and reward,
    scored per episode) are listed per trial under ``trials``. Raises :class:`ViewError`
    for a sample the evaluation does not hold."""
    sample = reader.frame("SELECT * FROM samples WHERE fingerprint = ? AND sample_id = ?", [fingerprint, sample_id])
    if sample.height == 0:
        raise ViewError(f"no sample {sample_id!r} under fingerprint {fingerprint[:12]}")
    mine = "(sample_id = ? OR starts_with(sample_id, ? || '#'))"  # the sample and its trials / episodes
    gens = reader.frame(f"SELECT * FROM generations WHERE fingerprint = ? AND {mine} ORDER BY model, created_at",
                        [fingerprint, sample_id, sample_id]) if reader.lake.exists("generations") else pl.DataFrame()
    scores = (reader.frame("SELECT model, sample_id, metric, value, status, direction, detail, signature, run_id, created_at "
                           f"FROM scores WHERE fingerprint = ? AND {mine} ORDER BY model, metric, created_at",
                           [fingerprint, sample_id, sample_id]) if reader.lake.exists("scores") else pl.DataFrame())
    episodes = (reader.frame("SELECT model, episode_id, trial, messages, tool_calls, final_answer, reward, status FROM episodes "
                             "WHERE fingerprint = ? AND task_id = ? ORDER BY model, trial", [fingerprint, sample_id])
                if reader.lake.exists("episodes") else pl.DataFrame())
    tokens = (reader.frame("SELECT model, position, token, logprob FROM token_logprobs WHERE fingerprint = ? AND sample_id = ? "
                           "ORDER BY model, position", [fingerprint, sample_id]) if reader.lake.exists("token_logprobs") else pl.DataFrame())
    per_model: dict[str, dict[str, Any]] = {}
    for g in gens.iter_rows(named=True):  # the latest generation per model (and per trial)
        entry = per_model.setdefault(g["model"], {})
        if g["sample_id"] == sample_id:
            entry["generation"] = g
        else:
            entry.setdefault("trials", {}).setdefault(g["sample_id"], {})["generation"] = g
    for s in scores.iter_rows(named=True):
        entry = per_model.setdefault(s["model"], {})
        s["detail_json"] = _json(s["detail"])
        target = entry if s["sample_id"] == sample_id else entry.setdefault("trials", {}).setdefault(s["sample_id"], {})
        target.setdefault("scores", {})[s["metric"]] = s  # the latest row per metric (ordered by created_at)
    for e in episodes.iter_rows(named=True):
        trial = per_model.setdefault(e["model"], {}).setdefault("trials", {}).setdefault(e["episode_id"], {})
        trial["episode"] = {**e, "messages": _json(e["messages"]) or [], "tool_calls": _json(e["tool_calls"]) or []}
    for t in tokens.iter_rows(named=True):
        per_model.setdefault(t["model"], {}).setdefault("tokens", []).append(t)
    return {"sample": sample.row(0, named=True), "models": per_model, "versions": reader.versions()}


def _json(text: str | None) -> Any:
    """A stored JSON column decoded (``{"text": ...}`` for text that is not JSON)."""
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}


def metric_history(reader: LakeReader, evaluation: str, metric: str) -> pl.DataFrame:
    """The mean of ``metric`` per model after each scores run of the evaluation's current
    fingerprint (``run_id``, ``finished_at``, ``model``, ``mean``, ``n``, ``regressed``): the
    scores table read at the Delta version each run wrote (time travel), oldest first;
    ``regressed`` is the regression alert of the first comparison computed after that run
    (the ``comparisons`` table at the version it wrote: the model significantly worse than
    the baseline on this metric), None before any comparison."""
    row = current_evaluation(reader, evaluation)
    if not reader.lake.exists("runs"):
        return pl.DataFrame()
    runs = reader.frame("SELECT run_id, max(finished_at) AS finished_at, max(table_version) AS version FROM runs "
                        "WHERE fingerprint = ? AND asset = 'scores' GROUP BY run_id ORDER BY finished_at", [row["fingerprint"]])
    verdicts = reader.frame("SELECT max(finished_at) AS finished_at, max(table_version) AS version FROM runs "
                            "WHERE fingerprint = ? AND asset = 'comparisons' GROUP BY run_id ORDER BY finished_at",
                            [row["fingerprint"]])
    out = []
    for run in runs.iter_rows(named=True):
        if run["version"] is None:
            continue
        after = verdicts.filter(pl.col("finished_at") >= run["finished_at"]).head(1)
        regressed: set[str] | None = None
        if after.height and after["version"][0] is not None:
            pairs = reader.lake.read("comparisons", where={"fingerprint": row["fingerprint"]}, version=int(after["version"][0]),
                                     columns=["kind", "model", "metric", "verdict"])
            regressed = set(pairs.filter((pl.col("kind") == "pairwise") & (pl.col("metric") == metric)
                                         & (pl.col("verdict") == "regressed"))["model"].to_list())
        frame = reader.lake.read("scores", where={"fingerprint": row["fingerprint"], "metric": metric}, version=int(run["version"]),
                                 columns=["model", "sample_id", "value", "status", "created_at"])
        if frame.height == 0:
            continue
        latest = frame.sort("created_at").unique(subset=["model", "sample_id"], keep="last")
        for r in latest.filter(pl.col("status") == "scored").group_by("model").agg(
                pl.col("value").mean().alias("mean"), pl.len().alias("n")).iter_rows(named=True):
            out.append({"run_id": run["run_id"], "finished_at": run["finished_at"], **r,
                        "regressed": None if regressed is None else r["model"] in regressed})
    return pl.DataFrame(out) if out else pl.DataFrame()
