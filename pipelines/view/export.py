"""A compare view as a static bundle (issue 29, ``facetlake view --export DIR``): the same
pages the server renders, written as files that open from ``file://`` (CI artefacts,
evidence): ``index.html`` (page 1), ``page-N.html``, one ``samples/<n>.html`` per sample
shown, and ``view.css``. Counts and rows are those of the live view of the same URL.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from pipelines.view.app import HERE, _plan, template_environment
from pipelines.view.compare import CompareQuery, compare_page
from pipelines.view.data import LakeReader, ViewError, sample_record
from resources.lake.resource import LakeStore

MAX_SAMPLES = 5000


def _sample_file(sample_id: str) -> str:
    """A file name for a sample id (any characters): a short hash keeps it portable."""
    return f"samples/{hashlib.sha256(sample_id.encode()).hexdigest()[:16]}.html"


def export_view(lake_root: str, url: str, out: str | Path, max_samples: int = MAX_SAMPLES) -> dict[str, int]:
    """Write the compare view of ``url`` (``/compare?evaluation=E&mode=regressed&...``, as
    the address bar or the permalink shows it) to folder ``out``; returns ``{"samples":
    total, "pages": n}``. Raises :class:`ViewError` for an unknown evaluation, model or
    metric, or a view of more than ``max_samples`` samples (narrow it, or raise the bound)."""
    parts = urlsplit(url)
    if parts.path.rstrip("/").split("/")[-1] != "compare":
        raise ViewError(f"{url!r} is not a compare view; copy the permalink of a compare page (/compare?evaluation=...)")
    query = CompareQuery.from_params(dict(parse_qsl(parts.query)))
    reader = LakeReader(LakeStore(root=lake_root))
    env = template_environment()
    env.globals.update(page_url=lambda q, n: "index.html" if n == 1 else f"page-{n}.html",
                       sample_url=lambda fp, sid, models: _sample_file(sid))
    target = Path(out)
    (target / "samples").mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "static" / "view.css", target / "view.css")
    try:
        first = compare_page(reader, query)
        if first.total > max_samples:
            raise ViewError(f"the view holds {first.total} samples, more than {max_samples}; narrow it (a mode, a filter, "
                            "a search) or pass --max-samples")
        compare = env.get_template("compare.html")
        sample = env.get_template("sample.html")
        for n in range(1, first.pages + 1):
            page = first if n == 1 else compare_page(reader, CompareQuery(**{**query.__dict__, "page": n}))
            html = compare.render(page=page, q=page.query, lake=lake_root, exported=url, css_url="view.css", home_url="index.html",
                                  sort_keys=[page.query.sort])
            (target / ("index.html" if n == 1 else f"page-{n}.html")).write_text(html, encoding="utf-8")
            shown = [page.query.baseline, *page.query.models]
            for r in page.rows:
                record = sample_record(reader, page.fingerprint, r["sample_id"])
                models = {m: record["models"][m] for m in shown if m in record["models"]}
                (target / _sample_file(r["sample_id"])).write_text(sample.render(
                    record=record, models=models, fingerprint=page.fingerprint, evaluation=page.query.evaluation,
                    plan=_plan(None), reviews={}, lake=lake_root, css_url="../view.css", home_url="../index.html"),
                    encoding="utf-8")
        return {"samples": first.total, "pages": first.pages}
    finally:
        reader.close()
