"""The results viewer's web app (issue 29): Starlette routes rendering Jinja2 templates on
the server; every page is a GET whose URL is its permalink. Nothing is fetched from outside
the server: the one stylesheet is served from this package.

Routes: ``/`` (evaluations), ``/compare?evaluation=E&...`` (:class:`CompareQuery`),
``/sample/{fingerprint}/{sample_id}?models=...``, ``/history?evaluation=E&metric=M``,
``/static/view.css``, ``/healthz``.
"""

from __future__ import annotations

import contextlib
import difflib
import html
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pipelines.view.data import (
    MODES,
    OPS,
    CompareQuery,
    LakeReader,
    ViewError,
    compare_page,
    current_evaluation,
    evaluation_metrics,
    evaluations,
    metric_history,
    sample_record,
)
from resources.lake.resource import LakeStore

HERE = Path(__file__).parent


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


def create_app(lake_root: str, *, limits: Any = None) -> Starlette:
    """The viewer over the lake at ``lake_root`` (read only)."""
    reader = LakeReader(LakeStore(root=lake_root), limits)
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    env.globals.update(fmt=_fmt, word_diff=word_diff, tier=confidence_tier, urlencode=urlencode, MODES=MODES, OPS=OPS)

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(lake=lake_root, **context), status_code=status)

    def failure(exc: Exception) -> HTMLResponse:
        return render("error.html", status=404, message=str(exc))

    def home(request: Request) -> HTMLResponse:
        return render("evaluations.html", evaluations=evaluations(reader).to_dicts())

    def compare(request: Request) -> HTMLResponse:
        try:
            page = compare_page(reader, CompareQuery.from_params(request.query_params))
        except ViewError as exc:
            return failure(exc)
        return render("compare.html", page=page, q=page.query)

    def sample(request: Request) -> HTMLResponse:
        fingerprint, sample_id = request.path_params["fingerprint"], request.path_params["sample_id"]
        try:
            record = sample_record(reader, fingerprint, sample_id)
        except ViewError as exc:
            return failure(exc)
        wanted = [m for m in request.query_params.get("models", "").split(",") if m]
        models = {m: record["models"][m] for m in (wanted or sorted(record["models"])) if m in record["models"]}
        return render("sample.html", record=record, models=models, fingerprint=fingerprint)

    def history(request: Request) -> HTMLResponse:
        name, metric = request.query_params.get("evaluation", ""), request.query_params.get("metric", "")
        try:
            row = current_evaluation(reader, name)
            metrics = evaluation_metrics(reader, row["fingerprint"])["metric"].to_list()
            metric = metric or (metrics[0] if metrics else "")
            frame = metric_history(reader, row["name"], metric) if metric else None
        except ViewError as exc:
            return failure(exc)
        return render("history.html", evaluation=row["name"], metric=metric, metrics=metrics,
                      rows=frame.to_dicts() if frame is not None and frame.height else [])

    def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # noqa: ANN202 - Starlette's lifespan protocol
        yield
        reader.close()

    app = Starlette(routes=[
        Route("/", home), Route("/compare", compare), Route("/sample/{fingerprint}/{sample_id:path}", sample),
        Route("/history", history), Route("/healthz", healthz),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ], lifespan=lifespan)
    app.state.reader = reader
    return app
