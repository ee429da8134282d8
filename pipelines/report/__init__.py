"""The evaluation report: one self-contained HTML file per fingerprint.

``facetlake report --fingerprint FP [--compare FP2 ...] --out report.html`` calls
:func:`write_report`. The file carries plotly.js inline (no network needed to open it)
and these sections, each marked ``data-status="present"`` or ``"absent"`` (an absent
section says what is missing and how to get it, instead of drawing an empty chart):

overview, headline (per-metric statistics, pairwise verdicts, trade-off, regression
alert), radar of per-metric medians, box plots per metric, hallucination histogram
(faithfulness in ten bins, bins below 0.7 flagged), correlation heatmap, RAG Triad
pairwise scatter plots, jury agreement histogram, per-sample heatmap (paged), BERTScore
precision vs recall sized by F1, execution timeline of metric values over sample order,
multi-run comparison (radar and grouped bars, up to five runs), and a per-sample view
(question, context, answer, per-claim verdicts, token log-probabilities coloured by
confidence tier with the top-k alternatives on hover).

Data: the lake's ``evaluations``, ``samples``, ``generations``, ``scores``,
``comparisons``, ``correlations``, ``token_logprobs`` and ``runs`` tables. When the
``comparisons``/``correlations`` tables hold nothing for the fingerprint, the same
statistics are computed in memory and the report says so.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Sequence

from pipelines.report.agents import agent_sections, load_agent_data
from pipelines.report.data import ReportData, ReportError, load_report_data
from pipelines.report.html import CSS, Figures, esc
from pipelines.report.samples import section_multirun, section_sample_heatmap, section_samples, section_timeline
from pipelines.report.sections import (
    section_bertscore, section_boxes, section_correlations, section_headline, section_hallucination, section_jury,
    section_overview, section_radar, section_triad,
)
from resources.lake.tables import LakeTables

__all__ = ["ReportData", "ReportError", "build_html", "load_report_data", "write_report"]


def build_html(d: ReportData, sample_limit: int = 30) -> str:
    """The complete report page for ``d`` (plotly.js inlined)."""
    import plotly.offline

    figs = Figures()
    sections = [
        section_overview(d),
        section_headline(d),
        section_radar(d, figs),
        section_boxes(d, figs),
        section_hallucination(d, figs),
        section_correlations(d, figs),
        section_triad(d, figs),
        section_jury(d, figs),
        section_sample_heatmap(d, figs),
        section_bertscore(d, figs),
        section_timeline(d, figs),
        section_multirun(d, figs),
        *agent_sections(d, figs),  # agent episodes, present only when the evaluation has them (issue 17)
        section_samples(d, sample_limit),
    ]
    nav = "".join(f"<a href='#{s.id}'>{esc(s.title.split(':')[0])}</a>" for s in sections)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>facetlake report · {esc(d.evaluation['name'])} · {d.fingerprint[:12]}</title>"
        f"<style>{CSS}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script></head><body>"
        f"<h1>facetlake report: {esc(d.evaluation['name'])}</h1>"
        f"<p class='cap'>fingerprint {d.fingerprint} · generated {when} · self-contained (no network needed)</p>"
        f"<nav>{nav}</nav>" + "".join(s.render() for s in sections) + "</body></html>"
    )


def write_report(
    lake: LakeTables, fingerprint: str, out: str | Path, compare: Sequence[str] = (), force: bool = False, sample_limit: int = 30
) -> tuple[Path, list[tuple[str, bool]]]:
    """Build the report for ``fingerprint`` and write it to ``out``.

    Returns the path and ``(section id, present)`` for every section. Raises
    :class:`ReportError` / ``IncomparableError`` / ``CatalogError`` with what to do.
    """
    data = load_report_data(lake, fingerprint, compare, force)
    data.agents = load_agent_data(lake, data.fingerprint)  # agent episodes (issue 17), None for other evaluations
    page = build_html(data, sample_limit)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    statuses = [(m.group(1), m.group(2) == "present") for m in re.finditer(r"<section id='([^']+)' data-status='(present|absent)'>", page)]
    return path, statuses
