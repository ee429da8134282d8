"""What the results viewer reads (issue 29), through the lake's read-only DuckDB connection
(:class:`resources.sql.query.Connection`: hardened, external access off, configuration
locked), paged on the server: a page never holds more than ``page_size`` samples.

- :class:`LakeReader` keeps one connection per state of the lake (the Delta versions of the
  tables it reads) and opens a new one when a table changes; each request gets its own
  cursor, so concurrent requests do not share a statement.
- :func:`compare_page` is one page of the compare view (:class:`CompareQuery`): the
  evaluation's samples with each model's latest output and score on the focus metric,
  filtered by mode, metric, metadata field, status and a text or regular-expression search,
  sorted and paged in SQL; the page's other scores are read for its samples only.
- :func:`sample_record` is everything stored about one sample; :func:`metric_history` a
  metric's mean per model across the evaluation's scores runs (Delta time travel).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from metric_ops.errors import FacetlakeError
from resources.lake.resource import LakeStore
from resources.sql.query import Connection, SQLLimits

#: the tables the viewer reads; a change of any of their Delta versions opens a new connection
TABLES = ("evaluations", "pairs", "samples", "generations", "scores", "summary", "comparisons", "runs", "token_logprobs")
MODES = ("all", "regressed", "improved", "both_wrong", "errors", "unscored")
OPS = {"lt": "<", "le": "<=", "eq": "=", "ge": ">=", "gt": ">"}
PAGE_SIZE = 50
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

    def has(self, table: str) -> bool:
        return table in dict(self._state or ()) or self.lake.exists(table)

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


# ----------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class CompareQuery:
    """One compare view, as its URL says (every field is a query parameter, so a view is a
    permalink): ``evaluation``; ``baseline`` and ``models`` (the others shown); ``metric``
    (the focus metric of modes, deltas and sorting); ``mode`` (:data:`MODES`); one metric
    filter ``filter_metric`` ``filter_op`` (:data:`OPS`) ``filter_value`` on
    ``filter_model`` (default: the first other model); one metadata filter
    ``meta_key`` = ``meta_value``; ``status`` (``ok``/``error``: any shown model's
    generation); ``q`` searched in input, outputs and judge reasoning (``regex``: a
    regular expression, DuckDB's ``regexp_matches``; else case-insensitive text); ``sort``
    (``position``, ``sample_id``, ``base``, ``delta``, ``latency``) and ``desc``; ``page``
    (1-based)."""

    evaluation: str
    baseline: str = ""
    models: tuple[str, ...] = ()
    metric: str = ""
    mode: str = "all"
    filter_metric: str = ""
    filter_op: str = "lt"
    filter_value: str = ""
    filter_model: str = ""
    meta_key: str = ""
    meta_value: str = ""
    status: str = ""
    q: str = ""
    regex: bool = False
    sort: str = "position"
    desc: bool = False
    page: int = 1
    page_size: int = PAGE_SIZE

    def params(self, **changes: Any) -> dict[str, str]:
        """This view (with ``changes``) as URL query parameters, defaults left out."""
        view = replace(self, **changes) if changes else self
        out: dict[str, str] = {}
        for key, default in (("evaluation", None), ("baseline", ""), ("metric", ""), ("mode", "all"), ("filter_metric", ""),
                             ("filter_op", "lt"), ("filter_value", ""), ("filter_model", ""), ("meta_key", ""), ("meta_value", ""),
                             ("status", ""), ("q", ""), ("sort", "position")):
            value = getattr(view, key)
            if value != default:
                out[key] = str(value)
        if view.models:
            out["models"] = ",".join(view.models)
        for key in ("regex", "desc"):
            if getattr(view, key):
                out[key] = "1"
        if view.page != 1:
            out["page"] = str(view.page)
        return out

    @classmethod
    def from_params(cls, params: Any) -> "CompareQuery":
        """The view of URL query parameters (a mapping); raises :class:`ViewError` for a
        malformed value."""
        get = lambda key, default="": str(params.get(key, default) or default).strip()  # noqa: E731
        try:
            page = max(1, int(get("page", "1")))
        except ValueError:
            raise ViewError(f"page must be a whole number, not {get('page')!r}") from None
        return cls(evaluation=get("evaluation"), baseline=get("baseline"),
                   models=tuple(m for m in get("models").split(",") if m.strip()), metric=get("metric"),
                   mode=get("mode", "all"), filter_metric=get("filter_metric"), filter_op=get("filter_op", "lt"),
                   filter_value=get("filter_value"), filter_model=get("filter_model"), meta_key=get("meta_key"),
                   meta_value=get("meta_value"), status=get("status"), q=get("q"), regex=get("regex") in ("1", "true", "on"),
                   sort=get("sort", "position"), desc=get("desc") in ("1", "true", "on"), page=page)


@dataclass
class ComparePage:
    """One page: the resolved view, the evaluation's fingerprint, models and metrics, the
    rows (one per sample, in order) and the total number of samples matching."""

    query: CompareQuery
    fingerprint: str
    all_models: list[str]
    metrics: pl.DataFrame
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    prices: dict[str, Any] = field(default_factory=dict)  # model -> price entry (runtime.prices / $FACETLAKE_PRICES)

    def cost(self, model: str, generation: dict[str, Any]) -> float | None:
        """The cost of one generation: tokens in and out times the model's price per
        million tokens; None without a price or token counts."""
        price = self.prices.get(model)
        if not price or generation.get("tokens_in") is None or generation.get("tokens_out") is None:
            return None
        return (generation["tokens_in"] * float(price.get("input_per_1m", 0.0))
                + generation["tokens_out"] * float(price.get("output_per_1m", 0.0))) / 1e6

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.page_size))


def resolve_query(reader: LakeReader, query: CompareQuery) -> tuple[CompareQuery, str, list[str], pl.DataFrame]:
    """``query`` with its defaults filled from the lake (baseline: the spec's ``baseline``
    or the first model; models: the others; metric: the first stored metric), checked:
    raises :class:`ViewError` naming the unknown model, metric, mode, operator or sort."""
    row = current_evaluation(reader, query.evaluation)
    fingerprint = row["fingerprint"]
    models = evaluation_models(reader, fingerprint)
    if not models:
        raise ViewError(f"evaluation {row['name']!r} has no stored generations yet; run `facetlake run` on it first")
    metrics = evaluation_metrics(reader, fingerprint)
    names = metrics["metric"].to_list()
    spec_baseline = json.loads(row["spec"] or "{}").get("baseline")
    baseline = query.baseline or (spec_baseline if spec_baseline in models else models[0])
    others = tuple(query.models) or tuple(m for m in models if m != baseline)
    for m in (baseline, *others, *([query.filter_model] if query.filter_model else [])):
        if m not in models:
            raise ViewError(f"model {m!r} has no outputs in evaluation {row['name']!r}; models: {', '.join(models)}")
    metric = query.metric or (names[0] if names else "")
    for m in (metric, query.filter_metric):
        if m and m not in names:
            raise ViewError(f"metric {m!r} has no scores in evaluation {row['name']!r}; metrics: {', '.join(names)}")
    if query.mode not in MODES:
        raise ViewError(f"mode {query.mode!r} is not one of {', '.join(MODES)}")
    if query.filter_op not in OPS:
        raise ViewError(f"filter operator {query.filter_op!r} is not one of {', '.join(OPS)}")
    shown = (baseline, *(m for m in others if m != baseline))
    if sort_columns(shown).get(query.sort) is None:
        raise ViewError(f"sort {query.sort!r} is not one of {', '.join(sort_columns(shown))}")
    if query.filter_metric and query.filter_value:
        try:
            float(query.filter_value)
        except ValueError:
            raise ViewError(f"filter value {query.filter_value!r} is not a number") from None
    if query.status not in ("", "ok", "error"):
        raise ViewError(f"status {query.status!r} is not ok or error")
    resolved = replace(query, evaluation=row["name"], baseline=baseline, models=tuple(m for m in others if m != baseline),
                       metric=metric, filter_model=query.filter_model or (others[0] if others else baseline))
    return resolved, fingerprint, models, metrics


def sort_columns(shown: tuple[str, ...] | list[str], sign: str = "") -> dict[str, str]:
    """``{sort key: SQL}`` of every column of the compare view of models ``shown`` (the
    baseline first): position, sample id, input, the baseline's focus value (``base``) and
    latency, and per model its focus value (``value:M``), its delta against the baseline
    (``delta:M``; ``delta`` = the first other model's) and its latency (``latency:M``).
    ``sign`` is ``-`` for a minimised metric (deltas then read better = larger)."""
    columns = {"position": "s.position", "sample_id": "s.sample_id", "input": "s.input", "base": "v0", "latency": "g0.latency_s",
               "delta": f"({sign}v1 - {sign}v0)" if len(shown) > 1 else "v0"}
    for i, model in enumerate(shown):
        columns[f"value:{model}"] = f"v{i}"
        columns[f"latency:{model}"] = f"g{i}.latency_s"
        if i:
            columns[f"delta:{model}"] = f"({sign}v{i} - {sign}v0)"
    return columns


def compare_sql(query: CompareQuery, fingerprint: str, direction: str, bottom: float | None,
                has_generations: bool = True, trials: bool = False) -> tuple[str, list[Any]]:
    """The SQL (and its parameters) of the filtered, sorted samples of the view ``query``
    (every page), one row per sample: ``sample_id``, ``position``. ``direction``
    of the focus metric; ``bottom``: its worst value ("both wrong")."""
    shown = [query.baseline, *query.models]
    params: list[Any] = []
    sign = "-" if direction == "minimize" else ""  # better = larger after the sign
    model_list = ", ".join("?" for _ in shown)
    ctes = [
        "s AS (SELECT sample_id, position, input, metadata FROM samples WHERE fingerprint = ?)",
        (f"g AS (SELECT model, sample_id, arg_max(output, created_at) AS output, arg_max(status, created_at) AS status, "
         f"arg_max(latency_s, created_at) AS latency_s FROM generations WHERE fingerprint = ? AND model IN ({model_list}) GROUP BY ALL)")
        if has_generations else  # an agent evaluation: episodes, no generations table
        (f"g AS (SELECT NULL::VARCHAR AS model, NULL::VARCHAR AS sample_id, NULL::VARCHAR AS output, NULL::VARCHAR AS status, "
         f"NULL::DOUBLE AS latency_s WHERE ? IS NULL AND NULL IN ({model_list}))"),
        f"f1 AS (SELECT model, sample_id, arg_max(value, created_at) AS value, arg_max(status, created_at) AS status "
        f"FROM scores WHERE fingerprint = ? AND metric = ? AND model IN ({model_list}) GROUP BY ALL)",
        # repeated trials and agent episodes are scored per <sample>#<trial>: a sample's value is the mean over its trials
        ("f AS (SELECT model, CASE WHEN sample_id IN (SELECT sample_id FROM s) THEN sample_id "
         "ELSE regexp_replace(sample_id, '#[0-9]+$', '') END AS sample_id, "
         "avg(value) FILTER (WHERE status = 'scored') AS value, CASE WHEN bool_or(status = 'scored') THEN 'scored' "
         "WHEN bool_or(status = 'error') THEN 'error' ELSE 'unscored' END AS status FROM f1 GROUP BY ALL)")
        if trials else "f AS (SELECT * FROM f1)",
    ]
    params += [fingerprint, fingerprint, *shown, fingerprint, query.metric, *shown]
    joins, cols = [], []
    for i, model in enumerate(shown):
        joins.append(f"LEFT JOIN g g{i} ON g{i}.sample_id = s.sample_id AND g{i}.model = ?")
        joins.append(f"LEFT JOIN f f{i} ON f{i}.sample_id = s.sample_id AND f{i}.model = ?")
        params += [model, model]
        cols.append(f"f{i}.value AS v{i}")
    where: list[str] = []
    wparams: list[Any] = []
    others = range(1, len(shown))
    scored = lambda i: f"(f{i}.status = 'scored' AND f{i}.value IS NOT NULL)"  # noqa: E731
    if query.mode == "regressed":
        where.append("(" + " OR ".join(f"({scored(0)} AND {scored(i)} AND {sign}f{i}.value < {sign}f0.value)" for i in others) + ")"
                     if others else "false")
    elif query.mode == "improved":
        where.append("(" + " OR ".join(f"({scored(0)} AND {scored(i)} AND {sign}f{i}.value > {sign}f0.value)" for i in others) + ")"
                     if others else "false")
    elif query.mode == "both_wrong":
        where.append(" AND ".join(f"({scored(i)} AND f{i}.value = ?)" for i in range(len(shown))) if bottom is not None else "false")
        wparams += [bottom] * (len(shown) if bottom is not None else 0)
    elif query.mode == "errors":
        where.append("(" + " OR ".join(f"(g{i}.status = 'error' OR f{i}.status = 'error')" for i in range(len(shown))) + ")")
    elif query.mode == "unscored":
        where.append("(" + " OR ".join(f"(f{i}.status IS NULL OR f{i}.status = 'unscored')" for i in range(len(shown))) + ")")
    if query.filter_metric and query.filter_value:
        where.append(f"EXISTS (SELECT 1 FROM scores x WHERE x.fingerprint = ? AND x.model = ? AND x.metric = ? "
                     f"AND x.sample_id = s.sample_id AND x.status = 'scored' AND x.value {OPS[query.filter_op]} ?)")
        wparams += [fingerprint, query.filter_model, query.filter_metric, float(query.filter_value)]
    if query.meta_key:
        where.append("json_extract_string(s.metadata, ?) = ?")
        wparams += ["$." + json.dumps(query.meta_key), query.meta_value]
    if query.status:
        where.append("(" + " OR ".join(f"g{i}.status = ?" for i in range(len(shown))) + ")")
        wparams += [query.status] * len(shown)
    if query.q:
        match = "regexp_matches({}, ?)" if query.regex else "contains(lower({}), lower(?))"
        fields = ["s.input", *(f"g{i}.output" for i in range(len(shown)))]
        reasoning = (f"EXISTS (SELECT 1 FROM scores r WHERE r.fingerprint = ? AND r.sample_id = s.sample_id "
                     f"AND r.model IN ({model_list}) AND {match.format('r.detail')})")
        where.append("(" + " OR ".join(f"coalesce({match.format(c)}, false)" for c in fields) + f" OR {reasoning})")
        wparams += [query.q] * len(fields) + [fingerprint, *shown, query.q]
    order = sort_columns(shown, sign)[query.sort]
    direction_sql = "DESC" if query.desc else "ASC"
    sql = (f"WITH {', '.join(ctes)} SELECT s.sample_id, s.position, {', '.join(cols)} FROM s "
           f"{' '.join(joins)}" + (f" WHERE {' AND '.join(where)}" if where else "")
           + f" ORDER BY {order} {direction_sql} NULLS LAST, s.position")
    return sql, [*params, *wparams]


def _bottom(metric: str, direction: str) -> float | None:
    """The worst value of ``metric`` by its declared range (0 for exact match), or None
    for a score no registered metric declares (``human:*``)."""
    from metric_ops.registry import REGISTRY

    try:
        lo, hi = REGISTRY.get_class(metric).declared_range(metric)
    except KeyError:
        return None
    worst = hi if direction == "minimize" else lo
    return worst if worst not in (float("inf"), float("-inf")) else None


def compare_page(reader: LakeReader, query: CompareQuery) -> ComparePage:
    """One page of the compare view (see :class:`CompareQuery`): the matching samples'
    ids in order, then for those samples only their input, references, each shown model's
    output, status, latency and tokens, and every stored score with its delta against the
    baseline. Raises :class:`ViewError` for an unknown evaluation, model or metric."""
    query, fingerprint, models, metrics = resolve_query(reader, query)
    page = ComparePage(query, fingerprint, models, metrics, prices=_prices(reader, query))
    if not query.metric:
        return page
    direction = dict(zip(metrics["metric"], metrics["direction"])).get(query.metric) or "maximize"
    trials = _has_trials(reader, query.evaluation, fingerprint)
    sql, params = compare_sql(query, fingerprint, direction, _bottom(query.metric, direction), reader.lake.exists("generations"), trials)
    ids = reader.view_ids(replace(query, page=1), sql, params)  # every page of the view, computed once per lake state
    page.total = len(ids)
    start = (query.page - 1) * query.page_size
    if not ids[start:start + query.page_size]:
        return page
    page.rows = page_rows(reader, fingerprint, [query.baseline, *query.models], ids[start:start + query.page_size], metrics, trials)
    return page


def _prices(reader: LakeReader, query: CompareQuery) -> dict[str, Any]:
    """The price entry of each shown model (by slug or spec string), from the evaluation's
    ``runtime.prices`` or ``$FACETLAKE_PRICES`` (resources/backends/planning.py)."""
    from resources.backends.planning import load_prices, price_for

    spec = json.loads(current_evaluation(reader, query.evaluation)["spec"] or "{}")
    prices = load_prices(spec.get("runtime") or {})
    return {m: price_for(prices, m, (spec.get("models") or {}).get(m)) for m in (query.baseline, *query.models)}


def _has_trials(reader: LakeReader, evaluation: str, fingerprint: str) -> bool:
    """Whether the evaluation scores per ``<sample>#<trial>``: repeated trials in its spec,
    or agent episodes stored under it."""
    spec = json.loads(current_evaluation(reader, evaluation)["spec"] or "{}")
    if spec.get("trials"):
        return True
    return reader.lake.exists("episodes") and reader.frame(
        "SELECT count(*) AS n FROM (SELECT 1 FROM episodes WHERE fingerprint = ? LIMIT 1)", [fingerprint])["n"][0] > 0


def page_rows(reader: LakeReader, fingerprint: str, shown: list[str], sample_ids: list[str],
              metrics: pl.DataFrame, trials: bool = False) -> list[dict[str, Any]]:
    """The display rows of ``sample_ids`` (in that order): sample fields, and per model its
    latest generation and ``{metric: (value, status)}``."""
    marks = ", ".join("?" for _ in sample_ids)
    models = ", ".join("?" for _ in shown)
    samples = reader.frame(f"SELECT sample_id, position, input, \"references\", metadata FROM samples "
                           f"WHERE fingerprint = ? AND sample_id IN ({marks})", [fingerprint, *sample_ids])
    gens = pl.DataFrame() if not reader.lake.exists("generations") else reader.frame(
                        f"SELECT model, sample_id, arg_max(output, created_at) AS output, arg_max(status, created_at) AS status, "
                        f"arg_max(error, created_at) AS error, arg_max(latency_s, created_at) AS latency_s, "
                        f"arg_max(tokens_in, created_at) AS tokens_in, "
                        f"arg_max(tokens_out, created_at) AS tokens_out FROM generations WHERE fingerprint = ? "
                        f"AND model IN ({models}) AND sample_id IN ({marks}) GROUP BY ALL", [fingerprint, *shown, *sample_ids])
    # a sample's score: its own row, or the mean over its trials / episodes (<sample>#<trial>)
    scores = reader.frame(
        f"WITH t AS (SELECT model, sample_id AS trial, CASE WHEN sample_id IN ({marks}) THEN sample_id "
        f"ELSE regexp_replace(sample_id, '#[0-9]+$', '') END AS sample_id, metric, arg_max(value, created_at) AS value, "
        f"arg_max(status, created_at) AS status FROM scores WHERE fingerprint = ? AND model IN ({models}) "
        f"AND (sample_id IN ({marks}) OR {'true' if trials else 'false'} AND regexp_replace(sample_id, '#[0-9]+$', '') "
        f"IN ({marks})) GROUP BY model, trial, metric) "
        "SELECT model, sample_id, metric, avg(value) FILTER (WHERE status = 'scored') AS value, CASE WHEN bool_or(status = 'scored') "
        "THEN 'scored' WHEN bool_or(status = 'error') THEN 'error' ELSE 'unscored' END AS status FROM t GROUP BY ALL",
        [*sample_ids, fingerprint, *shown, *sample_ids, *sample_ids]) if reader.lake.exists("scores") else pl.DataFrame()
    by_sample = {r["sample_id"]: r for r in samples.iter_rows(named=True)}
    outputs = {(r["model"], r["sample_id"]): r for r in gens.iter_rows(named=True)}
    values: dict[tuple[str, str], dict[str, tuple[Any, str]]] = {}
    for r in scores.iter_rows(named=True):
        values.setdefault((r["model"], r["sample_id"]), {})[r["metric"]] = (r["value"], r["status"])
    rows = []
    for sid in sample_ids:
        sample = by_sample.get(sid, {"sample_id": sid, "input": "", "references": [], "metadata": None, "position": None})
        rows.append({**sample, "models": {m: {"generation": outputs.get((m, sid), {}), "scores": values.get((m, sid), {})}
                                          for m in shown}})
    return rows


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
