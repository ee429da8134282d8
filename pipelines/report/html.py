"""HTML pieces of the report: escaping and number formatting, tables, sections (present or
absent, with why), plotly figures as divs, the palette and the page's CSS."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Sequence

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def esc(value: Any) -> str:
    """HTML-escaped text of ``value`` (None becomes an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits, ∅ for None/NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "∅"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return esc(value)


def html_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None, cls: str = "") -> str:
    """An HTML table of ``rows`` (values escaped, floats formatted)."""
    if not rows:
        return "<p class='absent'>no rows</p>"
    columns = list(columns or rows[0].keys())
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass
class Section:
    """One report section: id, title, status (present/absent), HTML body."""

    id: str
    title: str
    present: bool
    body: str

    def render(self) -> str:
        status = "present" if self.present else "absent"
        return (f"<section id='{esc(self.id)}' data-status='{status}'><h2>{esc(self.title)}</h2>"
                f"{self.body}</section>")


def absent(section_id: str, title: str, why: str) -> Section:
    """A section whose data is absent: says why and what to run."""
    return Section(section_id, title, False, f"<p class='absent'>{esc(why)}</p>")


class Figures:
    """Plotly figures rendered as divs (plotly.js is inlined once in the page head)."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, fig: Any, height: int = 420, top: int = 40) -> str:
        """``fig`` as a div ``height`` px tall with ``top`` px above the plot area."""
        self.count += 1
        fig.update_layout(margin=dict(l=50, r=20, t=top, b=40), template="plotly_white", height=height)
        return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig{self.count}", default_height=height,
                           config={"displaylogo": False, "responsive": True})


CSS = """
body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:0 auto;max-width:1200px;padding:16px 24px;color:#222}
h1{font-size:1.6em} h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em} h3{margin-top:1.2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0} th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4} .absent{color:#8a6d3b;background:#fcf8e3;padding:8px;border-left:4px solid #f0ad4e}
.alert{background:#f2dede;border-left:4px solid #d9534f;padding:8px} .ok{background:#dff0d8;padding:8px;border-left:4px solid #5cb85c}
.cap{color:#555;font-size:.85em} nav a{margin-right:10px;font-size:.9em} .tok{padding:1px 0;border-radius:2px;white-space:pre-wrap}
.tier-high{background:#c8e6c9} .tier-medium{background:#fff59d} .tier-low{background:#ffcdd2}
.tokens{font-family:monospace;line-height:1.8;margin:.4em 0} details.sample{border:1px solid #ddd;margin:6px 0;padding:6px;border-radius:4px}
.v-supported td{background:#e8f5e9} .v-unsupported td{background:#fff8e1} .v-contradicted td{background:#ffebee}
li.rel{color:#2e7d32} li.irrel{color:#999} .badge{background:#d9534f;color:#fff;border-radius:3px;padding:0 4px;font-size:.8em}
blockquote{margin:4px 0 4px 12px;padding-left:8px;border-left:3px solid #ccc;color:#444;font-size:.9em} .answer{margin-top:8px}
table.kv td:first-child{font-weight:bold}
"""
