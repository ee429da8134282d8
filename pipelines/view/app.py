"""The results viewer's web app (issue 29): Starlette routes rendering Jinja2 templates on
the server; every page is a GET whose URL is its permalink. Nothing is fetched from outside
the server: the one stylesheet is served from this package.

Routes: ``/`` (evaluations), ``/compare?evaluation=E&...`` (:class:`CompareQuery`),
``/sample/{fingerprint}/{sample_id}?models=...`` (with the review form when the evaluation
declares rubrics), ``POST /review`` (records one review, then redirects back: a reload
never sends it again), ``/queue?evaluation=E&reviewer=R``, ``/history?evaluation=E&metric=M``,
``/static/view.css``, ``/healthz``. The review form and ``POST /review`` are the only writes.
"""

from __future__ import annotations

import contextlib
import difflib
import html
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import polars as pl
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pipelines.view.compare import MODES, OPS, PAGE_SIZE, CompareQuery, compare_page, sort_columns
from pipelines.view.data import (
    LakeReader,
    ViewError,
    current_evaluation,
    evaluation_metrics,
    evaluation_models,
    evaluations,
    leaderboard,
    metric_history,
    sample_record,
)
from resources.lake.resource import LakeStore

HERE = Path(__file__).parent


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


PLOTLY_JS = _plotly_js()  # served by the viewer itself (the package's copy): no CDN


def history_chart(rows: list[dict[str, Any]], metric: str) -> Markup | None:
    """A plotly line chart of ``metric``'s mean per model across scores runs, with the runs
    whose comparison raised the regression alert marked (red crosses); None without rows.
    The figure's script is the page's ``/static/plotly.min.js``."""
    if not rows:
        return None
    import plotly.graph_objects as go

    fig = go.Figure()
    for model in sorted({r["model"] for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        fig.add_trace(go.Scatter(x=[r["finished_at"] for r in mine], y=[r["mean"] for r in mine], mode="lines+markers", name=model))
        alerts = [r for r in mine if r.get("regressed")]
        if alerts:
            fig.add_trace(go.Scatter(x=[r["finished_at"] for r in alerts], y=[r["mean"] for r in alerts], mode="markers",
                                     marker={"symbol": "x", "size": 12, "color": "#b00020"}, name=f"{model}: regression alert"))
    fig.update_layout(title=f"{metric}: mean per model after each scores run", xaxis_title="run finished (UTC)",
                      yaxis_title=metric, margin={"l": 50, "r": 20, "t": 50, "b": 40}, height=360)
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id="history-chart", config={"displaylogo": False}))


def word_diff(base: str | None, other: str | None) -> Markup:
    """``other`` as HTML with the words it adds against ``base`` in ``<ins>`` and those it
    drops in ``<del>`` (difflib over whitespace-split words); escaped."""
    a, b = (base or "").split(), (other or "").split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(html.escape(" ".join(b[j1:j2])))
            continue
        if i2 > i1:
            out.append(f"<del>{html.escape(' '.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{html.escape(' '.join(b[j1:j2]))}</ins>")
    return Markup(" ".join(out))


def confidence_tier(logprob: float | None) -> str:
    """``high`` (p >= 0.9), ``medium`` (p >= 0.5), ``low`` otherwise: the colour of a token."""
    if logprob is None:
        return "none"
    p = math.exp(logprob)
    return "high" if p >= 0.9 else "medium" if p >= 0.5 else "low"


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def template_environment() -> Environment:
    """The Jinja2 environment of the pages, with the live server's links (``page_url``,
    ``sample_url``; an exported bundle replaces them: pipelines/view/export.py)."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    env.globals.update(fmt=_fmt, word_diff=word_diff, tier=confidence_tier, urlencode=urlencode, MODES=MODES, OPS=OPS,
                       page_url=lambda q, n: f"/compare?{urlencode(q.params(page=n))}",
                       sample_url=lambda fp, sid, models: f"/sample/{fp}/{sid}?{urlencode({'models': ','.join(models)})}")
    return env


def _plan(spec_json: str | None):
    """The :class:`ReviewPlan` of a stored spec (empty when it declares no rubric)."""
    import json

    from metric_ops.review import parse_review

    return parse_review((json.loads(spec_json or "{}")).get("review"))


def create_app(lake_root: str, *, reviewer: str | None = None, limits: Any = None) -> Starlette:
    """The viewer over the lake at ``lake_root``; ``reviewer``: the id every review from this
    server is recorded under (None: each review form names its reviewer)."""
    lake = LakeStore(root=lake_root)
    reader = LakeReader(lake, limits)
    env = template_environment()

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(lake=lake_root, **context), status_code=status)

    def failure(exc: Exception) -> HTMLResponse:
        return render("error.html", status=404, message=str(exc))

    def home(request: Request) -> HTMLResponse:
        board = leaderboard(reader)
        boards: dict[str, list[dict[str, Any]]] = {}
        for r in board.iter_rows(named=True):
            boards.setdefault(r["evaluation"], []).append(r)
        return render("evaluations.html", evaluations=evaluations(reader).to_dicts(), boards=boards)

    def compare(request: Request) -> HTMLResponse:
        try:
            page = compare_page(reader, CompareQuery.from_params(request.query_params))
        except ViewError as exc:
            return failure(exc)
        return render("compare.html", page=page, q=page.query,
                      sort_keys=list(sort_columns([page.query.baseline, *page.query.models])))

    def sample(request: Request) -> HTMLResponse:
        fingerprint, sample_id = request.path_params["fingerprint"], request.path_params["sample_id"]
        try:
            record = sample_record(reader, fingerprint, sample_id)
        except ViewError as exc:
            return failure(exc)
        wanted = [m for m in request.query_params.get("models", "").split(",") if m]
        models = {m: record["models"][m] for m in (wanted or sorted(record["models"])) if m in record["models"]}
        row = current_evaluation(reader, fingerprint)
        plan = _plan(row["spec"])
        reviews: dict[str, list[dict[str, Any]]] = {}
        if plan.rubrics:
            from resources.review import latest_reviews

            for r in latest_reviews(lake, fingerprint).filter(pl.col("sample_id") == sample_id).iter_rows(named=True):
                reviews.setdefault(r["model"], []).append(r)
        return render("sample.html", record=record, models=models, fingerprint=fingerprint, evaluation=row["name"],
                      plan=plan, reviews=reviews, reviewer=reviewer or request.query_params.get("reviewer", ""),
                      fixed_reviewer=reviewer, back=str(request.url))

    async def review(request: Request) -> HTMLResponse | RedirectResponse:
        from metric_ops.review import ReviewSpecError
        from resources.review import checked_review, record_reviews, review_targets

        form = await request.form()
        try:
            row = current_evaluation(reader, str(form.get("evaluation", "")))
            sample_id = str(form.get("sample_id", ""))
            record_reviews(lake, row["name"], [checked_review(
                row, _plan(row["spec"]), review_targets(lake, row["fingerprint"]), str(form.get("model", "")), sample_id,
                str(form.get("rubric", "")), reviewer or form.get("reviewer"), form.get("value"), "viewer")])
        except (ViewError, ReviewSpecError) as exc:
            return render("error.html", status=400, message=str(exc))
        back = str(form.get("back") or f"/sample/{row['fingerprint']}/{sample_id}")
        if back.startswith(str(request.base_url)):
            back = "/" + back[len(str(request.base_url)):]
        return RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/", status_code=303)

    def queue(request: Request) -> HTMLResponse:
        from metric_ops.review import ReviewSpecError, assign, check_reviewer
        from resources.review import latest_reviews

        try:
            row = current_evaluation(reader, request.query_params.get("evaluation", ""))
            plan = _plan(row["spec"])
            who = check_reviewer(reviewer or request.query_params.get("reviewer", ""))
            if not plan.rubrics:
                raise ViewError(f"evaluation {row['name']!r} declares no review rubric (docs/viewer.md, Review)")
            ids = reader.frame("SELECT sample_id FROM samples WHERE fingerprint = ? ORDER BY position", [row["fingerprint"]])
            team = list(plan.reviewers) or [who]
            if who not in team:
                raise ViewError(f"reviewer {who!r} is not among the evaluation's reviewers: {', '.join(team)}")
            mine = [s for s, names in assign(ids["sample_id"].to_list(), team, min(plan.reviewers_per_sample, len(team))).items()
                    if who in names]
        except (ViewError, ReviewSpecError) as exc:
            return failure(exc)
        models = evaluation_models(reader, row["fingerprint"])
        done = latest_reviews(lake, row["fingerprint"]).filter(pl.col("reviewer") == who).group_by("sample_id").len()
        needed = len(models) * len(plan.rubrics)
        finished = set(done.filter(pl.col("len") >= needed)["sample_id"].to_list())
        pending = [s for s in mine if s not in finished]
        return render("queue.html", evaluation=row["name"], fingerprint=row["fingerprint"], reviewer=who, assigned=len(mine),
                      pending=pending[:PAGE_SIZE], n_pending=len(pending), models=models)

    def history(request: Request) -> HTMLResponse:
        name, metric = request.query_params.get("evaluation", ""), request.query_params.get("metric", "")
        try:
            row = current_evaluation(reader, name)
            metrics = evaluation_metrics(reader, row["fingerprint"])["metric"].to_list()
            metric = metric or (metrics[0] if metrics else "")
            frame = metric_history(reader, row["name"], metric) if metric else None
        except ViewError as exc:
            return failure(exc)
        rows = frame.to_dicts() if frame is not None and frame.height else []
        return render("history.html", evaluation=row["name"], metric=metric, metrics=metrics, rows=rows,
                      chart=history_chart(rows, metric))

    def agreement_page(request: Request) -> HTMLResponse:
        import json

        try:
            row = current_evaluation(reader, request.query_params.get("evaluation", ""))
        except ViewError as exc:
            return failure(exc)
        stored = reader.frame("SELECT rubric, kind, reviewer_a, reviewer_b, metric, value, n, detail FROM agreement "
                              "WHERE fingerprint = ? ORDER BY rubric, kind, metric, reviewer_a, reviewer_b",
                              [row["fingerprint"]]) if lake.exists("agreement") else pl.DataFrame()
        rows = []
        for r in stored.iter_rows(named=True):
            items = (json.loads(r["detail"] or "{}").get("disagreements") or [])
            rows.append({**r, "disagreements": [dict(zip(("model", "sample_id"), item.split("/", 1))) for item in items]})
        return render("agreement.html", evaluation=row["name"], fingerprint=row["fingerprint"], rows=rows,
                      rubrics=_plan(row["spec"]).rubrics)

    def plotly_js(request: Request) -> FileResponse:
        return FileResponse(PLOTLY_JS, media_type="text/javascript")

    def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # noqa: ANN202 - Starlette's lifespan protocol
        yield
        reader.close()

    app = Starlette(routes=[
        Route("/", home), Route("/compare", compare), Route("/sample/{fingerprint}/{sample_id:path}", sample),
        Route("/history", history), Route("/healthz", healthz), Route("/review", review, methods=["POST"]),
        Route("/queue", queue), Route("/agreement", agreement_page), Route("/static/plotly.min.js", plotly_js),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ], lifespan=lifespan)
    app.state.reader = reader
    return app
