"""The compare view of the results viewer (issue 29): :class:`CompareQuery` (a view as its
URL says), :func:`compare_sql` (the view's filtered, sorted samples in SQL) and
:func:`compare_page` (one page: the matching samples' ids once per lake state, then the
outputs and scores of that page's samples only). Reads through
:class:`pipelines.view.data.LakeReader`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from metric_ops.stats.trials import TRIAL_SEPARATOR
from pipelines.view.data import LakeReader, ViewError, current_evaluation, evaluation_metrics, evaluation_models

MODES = ("all", "regressed", "improved", "both_wrong", "errors", "unscored")
# repeated trials and agent episodes are scored per <sample>#<trial> (metric_ops/stats/trials.py):
# the sample id of such a row, and a sample's value and status over its trials (their mean)
TRIAL_BASE = f"regexp_replace(sample_id, '{TRIAL_SEPARATOR}[0-9]+$', '')"
TRIAL_MEAN = ("avg(value) FILTER (WHERE status = 'scored') AS value, CASE WHEN bool_or(status = 'scored') THEN 'scored' "
              "WHEN bool_or(status = 'error') THEN 'error' ELSE 'unscored' END AS status")
OPS = {"lt": "<", "le": "<=", "eq": "=", "ge": ">=", "gt": ">"}
PAGE_SIZE = 50


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


def resolve_query(reader: LakeReader, query: CompareQuery) -> tuple[CompareQuery, str, list[str], pl.DataFrame, dict[str, Any]]:
    """``query`` with its defaults filled from the lake (baseline: the spec's ``baseline``
    or the first model; models: the others; metric: the first stored metric), checked:
    raises :class:`ViewError` naming the unknown model, metric, mode, operator or sort.
    Returns (query, fingerprint, models, metrics, the evaluation's stored spec)."""
    row = current_evaluation(reader, query.evaluation)
    fingerprint = row["fingerprint"]
    models = evaluation_models(reader, fingerprint)
    if not models:
        raise ViewError(f"evaluation {row['name']!r} has no stored generations yet; run `facetlake run` on it first")
    metrics = evaluation_metrics(reader, fingerprint)
    names = metrics["metric"].to_list()
    spec = json.loads(row["spec"] or "{}")
    spec_baseline = spec.get("baseline")
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
    return resolved, fingerprint, models, metrics, spec


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
        (f"f AS (SELECT model, CASE WHEN sample_id IN (SELECT sample_id FROM s) THEN sample_id ELSE {TRIAL_BASE} END "
         f"AS sample_id, {TRIAL_MEAN} FROM f1 GROUP BY ALL)") if trials else "f AS (SELECT * FROM f1)",
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
    from assets.comparisons import value_ranges

    declared = value_ranges([metric]).get(metric)
    if declared is None:
        return None
    lo, hi = declared
    worst = hi if direction == "minimize" else lo
    return worst if worst not in (float("inf"), float("-inf")) else None


def compare_page(reader: LakeReader, query: CompareQuery) -> ComparePage:
    """One page of the compare view (see :class:`CompareQuery`): the matching samples'
    ids in order, then for those samples only their input, references, each shown model's
    output, status, latency and tokens, and every stored score with its delta against the
    baseline. Raises :class:`ViewError` for an unknown evaluation, model or metric."""
    query, fingerprint, models, metrics, spec = resolve_query(reader, query)
    page = ComparePage(query, fingerprint, models, metrics, prices=_prices(spec, query))
    if not query.metric:
        return page
    direction = dict(zip(metrics["metric"], metrics["direction"])).get(query.metric) or "maximize"
    trials = _has_trials(reader, spec, fingerprint)
    sql, params = compare_sql(query, fingerprint, direction, _bottom(query.metric, direction), reader.lake.exists("generations"), trials)
    ids = reader.view_ids(replace(query, page=1), sql, params)  # every page of the view, computed once per lake state
    page.total = len(ids)
    start = (query.page - 1) * query.page_size
    if not ids[start:start + query.page_size]:
        return page
    page.rows = page_rows(reader, fingerprint, [query.baseline, *query.models], ids[start:start + query.page_size], metrics, trials)
    return page


def _prices(spec: dict[str, Any], query: CompareQuery) -> dict[str, Any]:
    """The price entry of each shown model (by slug or spec string), from the evaluation's
    ``runtime.prices`` or ``$FACETLAKE_PRICES`` (resources/backends/planning.py)."""
    from resources.backends.planning import load_prices, price_for

    prices = load_prices(spec.get("runtime") or {})
    return {m: price_for(prices, m, (spec.get("models") or {}).get(m)) for m in (query.baseline, *query.models)}


def _has_trials(reader: LakeReader, spec: dict[str, Any], fingerprint: str) -> bool:
    """Whether the evaluation scores per ``<sample>#<trial>``: repeated trials in its
    ``spec``, or agent episodes stored under it."""
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
        f"ELSE {TRIAL_BASE} END AS sample_id, metric, arg_max(value, created_at) AS value, "
        f"arg_max(status, created_at) AS status FROM scores WHERE fingerprint = ? AND model IN ({models}) "
        f"AND (sample_id IN ({marks}) OR {'true' if trials else 'false'} AND {TRIAL_BASE} IN ({marks})) "
        f"GROUP BY model, trial, metric) SELECT model, sample_id, metric, {TRIAL_MEAN} FROM t GROUP BY ALL",
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
