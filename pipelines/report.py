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
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import polars as pl

from resources.lake import LakeStore

MAX_RUNS = 5
HALLUCINATION_FLAG = 0.7
PAGE_SIZE = 50
TRIAD = ("faithfulness", "answer_relevance", "context_relevance")
BERTSCORE = ("bertscore_precision", "bertscore_recall", "bertscore_f1")
# confidence tiers of a generated token by its probability p = exp(logprob)
TIERS = (("high", 0.9), ("medium", 0.5), ("low", 0.0))
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


class ReportError(ValueError):
    """The report cannot be built (unknown fingerprint, nothing scored); the message says what to run."""


@dataclass
class ReportData:
    """Everything one report reads, already filtered to its fingerprint(s)."""

    fingerprint: str
    evaluation: dict[str, Any]
    samples: pl.DataFrame
    generations: pl.DataFrame
    scores: pl.DataFrame
    comparisons: list[dict[str, Any]]
    comparisons_source: str
    correlations: list[dict[str, Any]]
    correlations_source: str
    token_logprobs: pl.DataFrame
    runs: list[dict[str, Any]]  # multi-run entries: label, fingerprint, model, run_id, means {metric: mean}
    compare_differences: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, int | None] = field(default_factory=dict)
    baseline: str | None = None
    agents: dict[str, Any] | None = None  # agent episodes (issue 17): pipelines/report_agents.py


# ----------------------------------------------------------------------------- loading
def _read(lake: LakeStore, table: str, where: dict[str, Any]) -> pl.DataFrame:
    if not lake.exists(table):
        return pl.DataFrame()
    return lake.read(table, where=where)


def _run_entries(lake: LakeStore, fingerprints: Sequence[str], max_runs: int) -> list[dict[str, Any]]:
    """Up to ``max_runs`` scored runs (model x Dagster run), newest first, with their means.

    Each run's rows are read by Delta time travel at the scores version that run wrote,
    so earlier runs of the same partition stay comparable after a re-run replaced them.
    """
    if not lake.exists("runs"):
        return []
    runs = lake.read("runs", where={"asset": "scores"}).filter(pl.col("fingerprint").is_in(list(fingerprints)))
    runs = runs.sort("finished_at", descending=True)
    entries: list[dict[str, Any]] = []
    seen = set()
    for r in runs.iter_rows(named=True):
        key = (r["fingerprint"], r["model"], r["run_id"])
        if key in seen or r["table_version"] is None:
            continue
        seen.add(key)
        try:
            frame = lake.read("scores", where={"fingerprint": r["fingerprint"], "model": r["model"]}, version=int(r["table_version"]))
        except Exception:  # noqa: BLE001 - a vacuumed version is skipped, not fatal
            continue
        frame = frame.filter((pl.col("status") == "scored") & pl.col("value").is_finite() & ~pl.col("metric").str.starts_with("human:"))
        if frame.height == 0:
            continue
        means = dict(frame.group_by("metric").agg(pl.col("value").mean()).iter_rows())
        when = r["finished_at"].strftime("%Y-%m-%d %H:%M") if r["finished_at"] else ""
        entries.append({"label": f"{r['model']} @ {r['fingerprint'][:8]} · {r['run_id'][:8]} ({when})",
                        "fingerprint": r["fingerprint"], "model": r["model"], "run_id": r["run_id"], "means": means,
                        "scores_version": int(r["table_version"])})
        if len(entries) >= max_runs:
            break
    return entries


def load_report_data(
    lake: LakeStore, fingerprint: str, compare: Sequence[str] = (), force: bool = False, max_runs: int = MAX_RUNS
) -> ReportData:
    """Read what the report needs for ``fingerprint`` (a unique prefix is enough).

    ``compare``: other fingerprints whose runs join the multi-run comparison; refused
    (:class:`assets.comparisons.IncomparableError`, naming the differing inputs) when
    their fingerprint inputs differ, unless ``force``. Raises :class:`ReportError` when
    the fingerprint has no scores.
    """
    from assets.comparisons import comparison_rows, require_comparable
    from assets.correlations import correlation_table
    from resources.catalog import evaluation_row, evaluation_spec
    from pipelines.report_agents import load_agent_data

    evaluation = evaluation_row(lake, fingerprint)
    fp = evaluation["fingerprint"]
    others = [evaluation_row(lake, c)["fingerprint"] for c in compare]
    diffs = require_comparable(lake, [fp, *others], force=force) if others else {}
    scores = _read(lake, "scores", {"fingerprint": fp})
    if scores.height == 0:
        raise ReportError(f"no scores under fingerprint {fp[:12]} ({evaluation['name']}); run `facetlake run CONFIG` first")
    comps = _read(lake, "comparisons", {"fingerprint": fp})
    if comps.height:
        comparisons = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in comps.iter_rows(named=True)]
        comparisons_source = f"comparisons table, run {comps['run_id'][0][:8]}"
    else:
        rows, _, _ = comparison_rows(lake, fp, "report")
        comparisons = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in rows]
        comparisons_source = "computed for this report (the comparisons asset has not been materialised for this fingerprint)"
    corr = _read(lake, "correlations", {"fingerprint": fp})
    if corr.height:
        correlations = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in corr.iter_rows(named=True)]
        correlations_source = f"correlations table, run {corr['run_id'][0][:8]}"
    else:
        rows, _ = correlation_table(lake, fp, "report")
        correlations = [dict(r, detail=json.loads(r["detail"] or "{}")) for r in rows]
        correlations_source = "computed for this report (the correlations asset has not been materialised for this fingerprint)"
    spec = evaluation_spec(lake, fp)
    return ReportData(
        fingerprint=fp,
        evaluation=evaluation,
        samples=_read(lake, "samples", {"fingerprint": fp}),
        generations=_read(lake, "generations", {"fingerprint": fp}),
        scores=scores,
        comparisons=comparisons,
        comparisons_source=comparisons_source,
        correlations=correlations,
        correlations_source=correlations_source,
        token_logprobs=_read(lake, "token_logprobs", {"fingerprint": fp}),
        runs=_run_entries(lake, [fp, *others], max_runs),
        compare_differences={k: {kk: list(vv) for kk, vv in v.items()} for k, v in diffs.items()},
        versions={t: lake.version(t) for t in ("samples", "generations", "scores", "comparisons", "correlations", "token_logprobs", "runs")},
        baseline=getattr(spec, "baseline", None),
        agents=load_agent_data(lake, fp),
    )


# ----------------------------------------------------------------------------- helpers
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


def _scored(scores: pl.DataFrame) -> pl.DataFrame:
    """Scored per-sample rows. Corpus rows (``sample_id`` null: one corpus-level value per
    model, e.g. corpus BLEU) are not per-sample values and stay out of the per-sample
    views; the headline shows them with their resampled interval."""
    return scores.filter((pl.col("status") == "scored") & pl.col("value").is_not_null() & pl.col("value").is_finite()
                         & pl.col("sample_id").is_not_null())


def _metric_ranges(scores: pl.DataFrame) -> dict[str, tuple[float, float, str]]:
    """Per score name: (low, high, direction) used to scale values to [0, 1] (declared
    value range, else the observed range)."""
    from assets.comparisons import value_ranges

    ok = _scored(scores)
    declared = value_ranges(sorted(set(ok["metric"].to_list())))
    out = {}
    for metric, lo, hi, direction in ok.group_by("metric").agg(
        pl.col("value").min().alias("lo"), pl.col("value").max().alias("hi"), pl.col("direction").first()
    ).iter_rows():
        low, high = declared.get(metric, (lo, hi))
        if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
            low, high = lo, hi
        out[metric] = (float(low), float(high), direction)
    return out


def _scale(value: float | None, rng: tuple[float, float, str]) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    low, high, direction = rng
    s = 0.5 if high == low else min(1.0, max(0.0, (value - low) / (high - low)))
    return s if direction == "maximize" else 1.0 - s


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

    def div(self, fig: Any, height: int = 420) -> str:
        self.count += 1
        fig.update_layout(margin=dict(l=50, r=20, t=40, b=40), template="plotly_white", height=height)
        return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig{self.count}", default_height=height,
                           config={"displaylogo": False, "responsive": True})


# ----------------------------------------------------------------------------- sections
def section_overview(d: ReportData) -> Section:
    ev = d.evaluation
    models = sorted(set(d.scores["model"].to_list()))
    rows = [
        {"field": "evaluation", "value": ev["name"]},
        {"field": "dataset", "value": f"{ev['dataset']} (content SHA-256 {ev['dataset_hash'][:16]}…)"},
        {"field": "fingerprint", "value": d.fingerprint},
        {"field": "samples", "value": d.samples.height},
        {"field": "models", "value": ", ".join(models)},
        {"field": "baseline (regression alert)", "value": d.baseline or "none configured"},
        {"field": "Delta versions read", "value": ", ".join(f"{k} v{v}" for k, v in d.versions.items() if v is not None)},
        {"field": "comparisons from", "value": d.comparisons_source},
        {"field": "correlations from", "value": d.correlations_source},
    ]
    for fp, diff in d.compare_differences.items():
        rows.append({"field": f"compared with {fp[:12]} (forced)",
                     "value": "; ".join(f"{k}: {v[0]} vs {v[1]}" for k, v in diff.items()) or "same inputs"})
    return Section("overview", "Overview", True, html_table(rows, ["field", "value"], "kv"))


def section_headline(d: ReportData) -> Section:
    stats = [r for r in d.comparisons if r["kind"] == "model_metric"]
    if not stats:
        return absent("headline", "Per-metric statistics", "no scored metrics under this fingerprint")
    rows = [{"metric": r["metric"], "direction": r["direction"], "model": r["model"],
             "winner": "★" if r["is_winner"] else "", "mean": r["mean"], "median": r["median"],
             "95% CI": "∅" if r["ci_low"] is None else f"[{r['ci_low']:.4g}, {r['ci_high']:.4g}] ({r['ci_method']})",
             "scored / total": f"{r['n_scored']} / {r['n_total']}"} for r in sorted(stats, key=lambda r: (r["metric"], r["model"]))]
    body = "<h3>Per metric and model</h3>" + html_table(rows)
    corpus = sorted({r["metric"] for r in stats if (r.get("detail") or {}).get("level") == "corpus"})
    if corpus:
        body += (f"<p class='cap'>Corpus-level scores ({esc(', '.join(corpus))}): one value per model over every scored segment "
                 "(mean = the corpus score, no median; scored = segments); the interval resamples the segments' sufficient "
                 "statistics, and pairs are compared by approximate randomisation and paired bootstrap over the segments both "
                 "models scored.</p>")
    pw = [r for r in d.comparisons if r["kind"] == "pairwise"]
    if pw:
        prow = [{"baseline": r["baseline"], "candidate": r["model"], "metric": r["metric"], "pairs": r["n_pairs"],
                 "delta": r["delta"], "relative change": r["relative_change"], "retention": r["retention"], "test": r["test"],
                 "p": r["p_value"], "p (Holm)": r["p_holm"], "effect": f"{fmt(r['effect_size'], 3)} ({r['effect_size_name']})" if r["effect_size_name"] else "n/a (corpus-level)",
                 "verdict": r["verdict"]} for r in sorted(pw, key=lambda r: (r["model"], r["metric"]))]
        alpha = pw[0]["detail"].get("alpha", 0.05)
        body += ("<h3>Pairwise (paired tests over the same samples; Holm-corrected over each metric's model pairs, "
                 f"α = {alpha})</h3>" + html_table(prow))
        regressed = [r for r in pw if r["verdict"] == "regressed" and d.baseline and r["baseline"] == d.baseline]
        if d.baseline:
            if regressed:
                items = "".join(f"<li><b>{esc(r['model'])}</b> on <b>{esc(r['metric'])}</b>: Δ {fmt(r['delta'])} "
                                f"(p Holm {fmt(r['p_holm'], 2)})</li>" for r in regressed)
                body += f"<div class='alert'><b>Regression alert</b> against baseline {esc(d.baseline)}:<ul>{items}</ul></div>"
            else:
                body += f"<p class='ok'>No significant regression against baseline {esc(d.baseline)}.</p>"
        changes = [r for r in d.comparisons if r["kind"] == "sample_change"]
        if changes:
            crow = [{"candidate": r["model"], "metric": r["metric"], "change": r["verdict"], "sample": r["sample_id"],
                     "baseline value": r["baseline_mean"], "candidate value": r["mean"]}
                    for r in sorted(changes, key=lambda r: (r["model"], r["metric"], r["verdict"]))]
            body += ("<details><summary>Regressed / improved / still-wrong samples "
                     f"({len(crow)} listed)</summary>{html_table(crow)}</details>")
    else:
        body += "<p class='absent'>one model under this fingerprint: no pairwise comparison (add a second model to the spec)</p>"
    trade = [r for r in d.comparisons if r["kind"] == "tradeoff"]
    if trade:
        trow = []
        for r in sorted(trade, key=lambda r: (r["metric"], r["model"])):
            res = r["detail"].get("resources", {})
            trow.append({"metric": r["metric"], "model": r["model"], "mean": r["mean"], "latency s/sample": res.get("latency_s"),
                         "tokens in": res.get("tokens_in"), "tokens out": res.get("tokens_out"), "cost": None if res.get("cost") is None else f"{res['cost']:.4g} {res.get('cost_currency') or ''}".strip(),
                         "size": res.get("size"), "Pareto-optimal on": ", ".join(r["detail"].get("pareto_optimal_on", [])) or "-"})
        body += f"<details><summary>Trade-off: quality against latency, tokens, cost and size</summary>{html_table(trow)}</details>"
    return Section("headline", "Per-metric statistics and verdicts", True, body)


def section_radar(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    ok = _scored(d.scores)
    if ok.height == 0:
        return absent("radar", "Radar of per-metric medians", "no scored values")
    ranges = _metric_ranges(d.scores)
    med = ok.group_by(["model", "metric"]).agg(pl.col("value").median().alias("median"))
    metrics = sorted(ranges)
    fig = go.Figure()
    for i, model in enumerate(sorted(set(med["model"].to_list()))):
        m = dict(med.filter(pl.col("model") == model).select("metric", "median").iter_rows())
        r = [_scale(m.get(k), ranges[k]) for k in metrics]  # None (a gap), never 0, where a model has no value
        raw = [fmt(m.get(k)) for k in metrics]
        fig.add_trace(go.Scatterpolar(r=r + r[:1], theta=metrics + metrics[:1], name=model, fill="toself", opacity=0.6,
                                      customdata=raw + raw[:1], hovertemplate="%{theta}: median %{customdata}<extra>" + model + "</extra>",
                                      line=dict(color=PALETTE[i % len(PALETTE)])))
    fig.update_layout(polar=dict(radialaxis=dict(range=[0, 1])))
    caption = ("<p class='cap'>Medians scaled to [0, 1] by each metric's declared range (the observed range where none is "
               "declared); minimised metrics are inverted, so outward is better. Hover for the raw median.</p>")
    return Section("radar", "Radar of per-metric medians", True, figs.div(fig, 480) + caption)


def section_boxes(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ok = _scored(d.scores)
    if ok.height == 0:
        return absent("boxes", "Box plots per metric", "no scored values")
    metrics = sorted(set(ok["metric"].to_list()))
    models = sorted(set(ok["model"].to_list()))
    cols = 3
    nrows = math.ceil(len(metrics) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=metrics, vertical_spacing=min(0.12, 0.5 / max(nrows, 1)))
    for k, metric in enumerate(metrics):
        for i, model in enumerate(models):
            values = ok.filter((pl.col("metric") == metric) & (pl.col("model") == model))["value"].to_list()
            if values:
                fig.add_trace(go.Box(y=values, name=model, legendgroup=model, showlegend=k == 0, boxmean=True,
                                     marker_color=PALETTE[i % len(PALETTE)]), row=k // cols + 1, col=k % cols + 1)
    return Section("boxes", "Box plots per metric", True, figs.div(fig, 260 * nrows + 60)
                   + "<p class='cap'>Raw values of scored samples; the dashed line is the mean.</p>")


def section_hallucination(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    ok = _scored(d.scores).filter(pl.col("metric") == "faithfulness")
    title = "Hallucination histogram (faithfulness)"
    if ok.height == 0:
        return absent("hallucination", title, "no faithfulness scores under this fingerprint: add the judged RAG Triad metric "
                      "`faithfulness` (needs a judge) to the evaluation's metrics and rescore with `facetlake score -m faithfulness`")
    edges = np.linspace(0.0, 1.0, 11)
    labels = [f"{edges[i]:.1f}–{edges[i + 1]:.1f}" for i in range(10)]
    fig = go.Figure()
    flagged_total = 0
    for i, model in enumerate(sorted(set(ok["model"].to_list()))):
        values = np.clip(ok.filter(pl.col("model") == model)["value"].to_numpy(), 0.0, 1.0)
        counts, _ = np.histogram(values, bins=edges)
        flagged_total += int((values < HALLUCINATION_FLAG).sum())
        flagged = [edges[b + 1] <= HALLUCINATION_FLAG + 1e-9 for b in range(10)]
        fig.add_trace(go.Bar(
            x=labels, y=counts.tolist(), name=model,
            marker=dict(color=PALETTE[i % len(PALETTE)],
                        line=dict(color=["#d62728" if f else "#333333" for f in flagged], width=[2.5 if f else 0.5 for f in flagged]),
                        pattern=dict(shape=["/" if f else "" for f in flagged], fgcolor="#d62728")),
            customdata=["flagged (below %.1f)" % HALLUCINATION_FLAG if f else "" for f in flagged],
            hovertemplate="faithfulness %{x}: %{y} samples %{customdata}<extra>" + model + "</extra>"))
    fig.add_vrect(x0=-0.5, x1=6.5, fillcolor="#d62728", opacity=0.07, line_width=0,
                  annotation_text=f"flagged: faithfulness < {HALLUCINATION_FLAG}", annotation_position="top left")
    fig.update_layout(barmode="group", xaxis_title="faithfulness (fraction of supported claims)", yaxis_title="samples")
    return Section("hallucination", title, True, figs.div(fig)
                   + f"<p class='cap'>Ten bins; the bins below {HALLUCINATION_FLAG} (red outline, hatched, shaded band) are flagged as likely hallucination: "
                     f"{flagged_total} scored samples in all.</p>")


def section_correlations(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    rows = [r for r in d.correlations if r["spearman"] is not None]
    title = "Correlation heatmap (Spearman)"
    if not rows:
        return absent("correlations", title, "no correlations: fewer than two score names with at least three shared, non-constant samples")
    parts = []
    for model in sorted({r["model"] for r in rows})[:MAX_RUNS]:
        mine = [r for r in d.correlations if r["model"] == model]
        names = sorted({r["metric_a"] for r in mine} | {r["metric_b"] for r in mine})
        index = {n: i for i, n in enumerate(names)}
        z = np.full((len(names), len(names)), np.nan)
        np.fill_diagonal(z, 1.0)
        for r in mine:
            if r["spearman"] is not None:
                z[index[r["metric_a"]], index[r["metric_b"]]] = z[index[r["metric_b"]], index[r["metric_a"]]] = r["spearman"]
        text = [["" if math.isnan(v) else f"{v:.2f}" for v in row] for row in z]
        zl = [[None if math.isnan(v) else float(v) for v in row] for row in z]
        fig = go.Figure(go.Heatmap(z=zl, x=names, y=names, zmin=-1, zmax=1, colorscale="RdBu", text=text, texttemplate="%{text}",
                                   hovertemplate="%{y} vs %{x}: rho %{z:.3f}<extra></extra>"))
        fig.update_layout(title=f"{model}", yaxis=dict(autorange="reversed"))
        parts.append(figs.div(fig, 120 + 40 * len(names)))
    divergent = [r for r in d.correlations if r["divergent"]]
    meta = [r for r in d.correlations if r["kind"] == "metric-human"]
    body = "".join(parts)
    if meta:
        body += "<h3>Meta-evaluation: metric vs human rating</h3>" + html_table(
            [{"model": r["model"], "metric": r["metric_b"] if r["metric_a"].startswith("human:") else r["metric_a"],
              "human": r["metric_a"] if r["metric_a"].startswith("human:") else r["metric_b"], "n": r["n"],
              "pearson": r["pearson"], "spearman": r["spearman"], "kendall": r["kendall"]} for r in meta])
    if divergent:
        body += "<h3>Divergent same-dimension pairs (Pearson r &lt; 0.5, sign flipped once per minimised score)</h3>" + html_table(
            [{"model": r["model"], "metric a": r["metric_a"], "metric b": r["metric_b"], "pearson": r["pearson"],
              "most disagreeing samples": ", ".join(str(s["sample_id"]) for s in r["detail"].get("most_disagreeing", []))}
             for r in divergent])
    body += "<p class='cap'>Empty cells: undefined (constant scores or fewer than three shared samples), never zero.</p>"
    return Section("correlations", title, True, body)


def _pivot(scores: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    ok = _scored(scores).filter(pl.col("metric").is_in(list(names)))
    if ok.height == 0:
        return pl.DataFrame()
    return ok.pivot(on="metric", index=["model", "sample_id"], values="value", aggregate_function="first")


def section_triad(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    title = "RAG Triad: pairwise scatter"
    wide = _pivot(d.scores, TRIAD)
    present = [m for m in TRIAD if m in wide.columns]
    pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1:]]
    if not pairs:
        return absent("triad", title, "needs at least two of faithfulness, answer_relevance and context_relevance "
                      f"(present: {', '.join(present) or 'none'}); add the judged RAG Triad metrics to the evaluation")
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[f"{a} vs {b}" for a, b in pairs])
    for i, model in enumerate(sorted(set(wide["model"].to_list()))):
        w = wide.filter(pl.col("model") == model)
        for k, (a, b) in enumerate(pairs):
            sub = w.select("sample_id", a, b).drop_nulls()
            fig.add_trace(go.Scatter(x=sub[a].to_list(), y=sub[b].to_list(), mode="markers", name=model, legendgroup=model,
                                     showlegend=k == 0, text=sub["sample_id"].to_list(), marker=dict(color=PALETTE[i % len(PALETTE)], opacity=0.7),
                                     hovertemplate=f"sample %{{text}}<br>{a} %{{x:.3f}}<br>{b} %{{y:.3f}}<extra>{model}</extra>"),
                          row=1, col=k + 1)
            fig.update_xaxes(title_text=a, range=[-0.05, 1.05], row=1, col=k + 1)
            fig.update_yaxes(title_text=b, range=[-0.05, 1.05], row=1, col=k + 1)
    return Section("triad", title, True, figs.div(fig, 420))


def _detail_rows(scores: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for r in scores.filter(pl.col("detail").is_not_null()).iter_rows(named=True):
        try:
            detail = json.loads(r["detail"])
        except (TypeError, ValueError):
            continue
        if isinstance(detail, dict):
            out.append({**r, "detail_obj": detail})
    return out


def section_jury(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Jury agreement"
    rows = [r for r in _detail_rows(d.scores.filter(pl.col("detail").str.contains('"agreement"')))
            if isinstance(r["detail_obj"].get("agreement"), (int, float))]
    if not rows:
        return absent("jury", title, "no jury scores with an agreement value: add the `jury` metric (several judges) to the evaluation")
    fig = go.Figure()
    for i, metric in enumerate(sorted({r["metric"] for r in rows})):
        values = [float(r["detail_obj"]["agreement"]) for r in rows if r["metric"] == metric]
        fig.add_trace(go.Histogram(x=values, name=metric, xbins=dict(start=0.0, end=1.0001, size=0.1), opacity=0.75,
                                   marker_color=PALETTE[i % len(PALETTE)]))
    fig.update_layout(barmode="overlay", xaxis_title="agreement between jurors (1 = unanimous)", yaxis_title="samples")
    return Section("jury", title, True, figs.div(fig))


def section_sample_heatmap(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Per-sample heatmap"
    ok = _scored(d.scores)
    if ok.height == 0:
        return absent("sample-heatmap", title, "no scored values")
    ranges = _metric_ranges(d.scores)
    metrics = sorted(ranges)
    order = (d.samples.sort("position")["sample_id"].to_list() if d.samples.height else sorted(set(ok["sample_id"].to_list())))
    parts = []
    for model in sorted(set(ok["model"].to_list()))[:MAX_RUNS]:
        wide = ok.filter(pl.col("model") == model).pivot(on="metric", index="sample_id", values="value", aggregate_function="first")
        lookup = {r["sample_id"]: r for r in wide.iter_rows(named=True)}
        metrics = [m for m in sorted(ranges) if m in wide.columns]  # only the scores this model has
        ids = [s for s in order if s in lookup]
        pages = [ids[i:i + PAGE_SIZE] for i in range(0, len(ids), PAGE_SIZE)] or [[]]
        fig = go.Figure()
        for p, page in enumerate(pages):
            z = [[_scale(lookup[s].get(m), ranges[m]) for m in metrics] for s in page]
            raw = [[fmt(lookup[s].get(m)) for m in metrics] for s in page]
            fig.add_trace(go.Heatmap(z=z, x=metrics, y=[str(s) for s in page], zmin=0, zmax=1, colorscale="Viridis", visible=p == 0,
                                     customdata=raw, hovertemplate="sample %{y}<br>%{x}: %{customdata}<extra></extra>",
                                     colorbar=dict(title="scaled")))
        steps = [dict(method="update", label=str(p + 1), args=[{"visible": [q == p for q in range(len(pages))]},
                                                               {"title.text": f"{model}: samples {p * PAGE_SIZE + 1}–{p * PAGE_SIZE + len(page)} of {len(ids)}"}])
                 for p, page in enumerate(pages)]
        fig.update_layout(title=f"{model}: samples 1–{len(pages[0])} of {len(ids)}", yaxis=dict(autorange="reversed", type="category"),
                          sliders=[dict(active=0, currentvalue=dict(prefix="page "), pad=dict(t=40), steps=steps)])
        parts.append(figs.div(fig, 760))
    return Section("sample-heatmap", title, True, "".join(parts)
                   + f"<p class='cap'>{PAGE_SIZE} samples per page in dataset order; colour = value scaled to [0, 1], "
                     "minimised metrics inverted (bright is better); blank = not scored.</p>")


def section_bertscore(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "BERTScore precision vs recall"
    wide = _pivot(d.scores, BERTSCORE)
    if not all(m in wide.columns for m in BERTSCORE):
        return absent("bertscore", title, "no BERTScore scores under this fingerprint: add `bertscore` to the metrics and "
                      "rescore with `facetlake score -m bertscore`")
    fig = go.Figure()
    for i, model in enumerate(sorted(set(wide["model"].to_list()))):
        w = wide.filter(pl.col("model") == model).drop_nulls(BERTSCORE)
        f1 = np.clip(w["bertscore_f1"].to_numpy(), 0, 1)
        fig.add_trace(go.Scatter(x=w["bertscore_precision"].to_list(), y=w["bertscore_recall"].to_list(), mode="markers", name=model,
                                 text=w["sample_id"].to_list(), customdata=w["bertscore_f1"].to_list(),
                                 marker=dict(size=(4 + 16 * f1).tolist(), color=PALETTE[i % len(PALETTE)], opacity=0.6, line=dict(width=0.5, color="#333")),
                                 hovertemplate="sample %{text}<br>P %{x:.3f} R %{y:.3f} F1 %{customdata:.3f}<extra>" + model + "</extra>"))
    fig.update_layout(xaxis_title="BERTScore precision", yaxis_title="BERTScore recall")
    return Section("bertscore", title, True, figs.div(fig) + "<p class='cap'>Marker size grows with F1.</p>")


def section_timeline(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = "Execution timeline: metric values over sample order"
    ok = _scored(d.scores)
    if ok.height == 0 or d.samples.height == 0:
        return absent("timeline", title, "no scored values with stored samples")
    ranges = _metric_ranges(d.scores)
    pos = d.samples.select("sample_id", "position")
    joined = ok.join(pos, on="sample_id", how="inner").sort("position")
    window = max(1, min(25, joined["position"].n_unique() // 10))
    fig = go.Figure()
    for i, model in enumerate(sorted(set(joined["model"].to_list()))):
        for k, metric in enumerate(sorted(ranges)):
            sub = joined.filter((pl.col("model") == model) & (pl.col("metric") == metric))
            if sub.height == 0:
                continue
            scaled = [_scale(v, ranges[metric]) for v in sub["value"].to_list()]
            rolling = pl.Series(scaled, dtype=pl.Float64).rolling_mean(window, min_samples=1).to_list()
            fig.add_trace(go.Scatter(x=sub["position"].to_list(), y=rolling, mode="lines", name=f"{model} · {metric}",
                                     line=dict(color=PALETTE[k % len(PALETTE)], dash="solid" if i == 0 else ["dash", "dot", "dashdot"][(i - 1) % 3]),
                                     hovertemplate="position %{x}<br>rolling mean %{y:.3f}<extra>%{fullData.name}</extra>"))
    fig.update_layout(xaxis_title="sample position (dataset order)", yaxis_title=f"scaled value, rolling mean of {window}", yaxis=dict(range=[0, 1]))
    return Section("timeline", title, True, figs.div(fig, 460)
                   + "<p class='cap'>Drift, bursts of failures or a bad data slice show up as dips; values scaled as in the radar.</p>")


def section_multirun(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = f"Multi-run comparison (up to {MAX_RUNS} runs)"
    runs = d.runs[:MAX_RUNS]
    if len(runs) < 2:
        return absent("multirun", title, f"{len(runs)} scored run(s) found in `runs` for this fingerprint: run the evaluation again "
                      "(or add a model), or pass --compare FP2 to compare another evaluation's runs")
    shared = sorted(set.intersection(*[set(r["means"]) for r in runs]))
    if not shared:
        return absent("multirun", title, "the runs share no metric")
    ranges = _metric_ranges(d.scores)
    radar = go.Figure()
    bars = go.Figure()
    for i, r in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        scaled = [(_scale(r["means"][m], ranges[m]) if m in ranges else None) or 0.0 for m in shared]
        radar.add_trace(go.Scatterpolar(r=scaled + scaled[:1], theta=shared + shared[:1], name=r["label"], fill="toself", opacity=0.5,
                                        line=dict(color=color)))
        bars.add_trace(go.Bar(x=shared, y=[r["means"][m] for m in shared], name=r["label"], marker_color=color))
    radar.update_layout(polar=dict(radialaxis=dict(range=[0, 1])))
    bars.update_layout(barmode="group", yaxis_title="mean (raw units)")
    table = html_table([{"run": r["label"], "fingerprint": r["fingerprint"][:12], "model": r["model"], "Dagster run": r["run_id"],
                         "scores version": r["scores_version"]} for r in runs])
    return Section("multirun", title, True, figs.div(radar, 480) + figs.div(bars, 420) + table
                   + "<p class='cap'>Each run's scores are read by Delta time travel at the version it wrote.</p>")


def _tier(logprob: float) -> str:
    p = math.exp(logprob)
    return next(name for name, floor in TIERS if p >= floor)


def render_tokens(output: str, tokens: pl.DataFrame) -> str:
    """The output as spans coloured by confidence tier; hover shows p and the top-k alternatives."""
    parts = []
    for t in tokens.sort("position").iter_rows(named=True):
        lp = t["logprob"]
        if lp is None or not math.isfinite(lp):
            parts.append(f"<span class='tok'>{esc(t['token'])}</span>")
            continue
        try:
            alts = json.loads(t["top_logprobs"] or "[]")
        except ValueError:
            alts = []
        hover = f"p = {math.exp(lp):.3f} (logprob {lp:.3f})"
        if alts:
            hover += "\ntop-k: " + ", ".join(f"{a.get('token')!r} {math.exp(a.get('logprob', -math.inf)):.3f}" for a in alts)
        parts.append(f"<span class='tok tier-{_tier(lp)}' title='{esc(hover)}'>{esc(t['token'])}</span>")
    return "<div class='tokens'>" + "".join(parts) + "</div>"


def section_samples(d: ReportData, limit: int = 30) -> Section:
    title = "Per-sample view"
    if d.samples.height == 0:
        return absent("samples", title, "no stored samples")
    details = _detail_rows(d.scores.filter(pl.col("detail").str.contains('"claims"|"context_sentences"|"jurors"|"reasoning"')))
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in details:
        by_key.setdefault((r["model"], r["sample_id"]), []).append(r)
    tokens = d.token_logprobs
    token_keys = set(map(tuple, tokens.select("model", "sample_id").unique().rows())) if tokens.height else set()
    regressed = {r["sample_id"] for r in d.comparisons if r["kind"] == "sample_change" and r["verdict"] == "regressed"}
    order = d.samples.sort("position")
    rich = {s for _, s in by_key} | {s for _, s in token_keys}
    picked = [s for s in order["sample_id"].to_list() if s in rich]
    picked += [s for s in order["sample_id"].to_list() if s in regressed and s not in picked]
    picked += [s for s in order["sample_id"].to_list() if s not in picked]
    picked = picked[:limit]
    gens = {(r["model"], r["sample_id"]): r for r in d.generations.iter_rows(named=True)} if d.generations.height else {}
    values = {}
    for r in d.scores.iter_rows(named=True):
        values.setdefault((r["model"], r["sample_id"]), []).append(r)
    models = sorted(set(d.scores["model"].to_list()))
    samples = {r["sample_id"]: r for r in order.iter_rows(named=True)}
    blocks = []
    for sid in picked:
        s = samples[sid]
        ctx = "".join(f"<blockquote>{esc(c)}</blockquote>" for c in (s["context"] or []))
        refs = "".join(f"<li>{esc(x)}</li>" for x in (s["references"] or []))
        inner = [f"<div class='q'><b>Question / input</b><p>{esc(s['input'])}</p></div>"]
        if ctx:
            inner.append(f"<details><summary>Context ({len(s['context'])} passage(s))</summary>{ctx}</details>")
        if refs:
            n_chars = sum(len(x) for x in (s["references"] or []))
            inner.append(f"<details><summary>References ({len(s['references'])}, {n_chars} characters)</summary><ul>{refs}</ul></details>"
                         if n_chars > 300 else f"<div><b>References</b><ul>{refs}</ul></div>")
        for model in models:
            g = gens.get((model, sid))
            answer = "∅ (no generation)" if g is None else (g["output"] if g["status"] == "ok" else f"error: {g['error']}")
            mt = tokens.filter((pl.col("model") == model) & (pl.col("sample_id") == sid)) if (model, sid) in token_keys else None
            ans_html = render_tokens(answer, mt) if mt is not None and mt.height else f"<p>{esc(answer)}</p>"
            score_cells = ", ".join(f"{esc(r['metric'])} {fmt(r['value'], 3) if r['status'] == 'scored' else esc(r['status'])}"
                                    for r in sorted(values.get((model, sid), []), key=lambda r: r["metric"]))
            extra = []
            shown_claims: set[str] = set()
            for r in by_key.get((model, sid), []):
                det = r["detail_obj"]
                claims_key = json.dumps(det.get("claims"), sort_keys=True) if det.get("claims") else ""
                if claims_key and claims_key not in shown_claims:  # faithfulness and hallucination share one claim list
                    shown_claims.add(claims_key)
                    claims = "".join(
                        f"<tr class='v-{esc(c.get('verdict'))}'><td>{esc(c.get('claim'))}</td><td>{esc(c.get('verdict'))}</td>"
                        f"<td>{esc(c.get('evidence'))}</td></tr>" for c in det["claims"])
                    extra.append(f"<b>Claims ({esc(r['metric'])})</b><table class='claims'><thead><tr><th>claim</th><th>verdict</th>"
                                 f"<th>evidence</th></tr></thead><tbody>{claims}</tbody></table>")
                if det.get("context_sentences"):
                    sents = "".join(f"<li class='{'rel' if c.get('relevant') else 'irrel'}'>{esc(c.get('sentence'))}</li>"
                                    for c in det["context_sentences"])
                    extra.append(f"<b>Context sentences ({esc(r['metric'])}: relevant in green)</b><ul>{sents}</ul>")
                if det.get("jurors"):
                    jur = "".join(f"<li>{esc(j.get('judge'))}: {fmt(j.get('score'), 3)} — {esc(j.get('reasoning'))}</li>" for j in det["jurors"])
                    agree = f" (agreement {fmt(det.get('agreement'), 3)})" if det.get("agreement") is not None else ""
                    extra.append(f"<b>Jurors ({esc(r['metric'])}){agree}</b><ul>{jur}</ul>")
                if det.get("reasoning") and isinstance(det["reasoning"], str):
                    extra.append(f"<details><summary>Judge reasoning ({esc(r['metric'])})</summary><p>{esc(det['reasoning'])}</p></details>")
            inner.append(f"<div class='answer'><h4>{esc(model)}</h4>{ans_html}<p class='scores'>{score_cells}</p>{''.join(extra)}</div>")
        flag = " <span class='badge'>regressed</span>" if sid in regressed else ""
        blocks.append(f"<details class='sample' data-sample='{esc(sid)}'><summary>sample {esc(sid)}{flag}: "
                      f"{esc(s['input'][:100])}</summary>{''.join(inner)}</details>")
    legend = ("<p class='cap'>Token colours by probability p = exp(logprob): <span class='tok tier-high'>high p ≥ 0.9</span> "
              "<span class='tok tier-medium'>medium 0.5 ≤ p &lt; 0.9</span> <span class='tok tier-low'>low p &lt; 0.5</span>; "
              "hover a token for p and the top-k alternatives. "
              + ("No token log-probabilities are stored for this fingerprint (generate with `logprobs: true`)." if tokens.height == 0 else "")
              + f" Showing {len(picked)} of {d.samples.height} samples: those with judge details or log-probabilities first, then regressed ones.</p>")
    return Section("samples", title, True, legend + "".join(blocks))


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


def build_html(d: ReportData, sample_limit: int = 30) -> str:
    """The complete report page for ``d`` (plotly.js inlined)."""
    import plotly.offline

    from pipelines.report_agents import agent_sections

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
    lake: LakeStore, fingerprint: str, out: str | Path, compare: Sequence[str] = (), force: bool = False, sample_limit: int = 30
) -> tuple[Path, list[tuple[str, bool]]]:
    """Build the report for ``fingerprint`` and write it to ``out``.

    Returns the path and ``(section id, present)`` for every section. Raises
    :class:`ReportError` / ``IncomparableError`` / ``CatalogError`` with what to do.
    """
    data = load_report_data(lake, fingerprint, compare, force)
    page = build_html(data, sample_limit)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    import re

    statuses = [(m.group(1), m.group(2) == "present") for m in re.finditer(r"<section id='([^']+)' data-status='(present|absent)'>", page)]
    return path, statuses
