"""The report's summary sections: overview, statistics and verdicts, radar, box plots,
hallucination histogram, correlations, RAG Triad, jury agreement, BERTScore."""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from pipelines.report.data import BERTSCORE, HALLUCINATION_FLAG, MAX_RUNS, TRIAD, ReportData, _metric_ranges, _scale, _scored
from assets.comparisons import trials_table
from metric_ops.gates import row_detail
from pipelines.report.html import PALETTE, Figures, Section, absent, esc, fmt, html_table


def _rests_on_text(ev: dict[str, Any]) -> str:
    """The evaluation's dataset version, adapter and template hashes and metric versions, one line."""
    from resources.catalog.versions import rests_on

    r = rests_on(ev)
    parts = [f"adapter {r['adapter']} (SHA-256 {r['adapter_sha256'][:12]}…)"]
    if r["template_sha256"]:
        parts.append(f"prompt template SHA-256 {r['template_sha256'][:12]}…")
    parts.append("metrics " + ", ".join(f"{m} v{v}" for m, v in sorted(r["metric_versions"].items())))
    if r["pin"]:
        parts.append(f"dataset pinned at {str(r['pin'])[:12]}…")
    return "; ".join(parts)


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
        {"field": "rests on (issue 31)", "value": _rests_on_text(ev)},
        {"field": "comparisons from", "value": d.comparisons_source},
        {"field": "correlations from", "value": d.correlations_source},
    ]
    for fp, diff in d.compare_differences.items():
        rows.append({"field": f"compared with {fp[:12]} (forced)",
                     "value": "; ".join(f"{k}: {v[0]} vs {v[1]}" for k, v in diff.items()) or "same inputs"})
    body = html_table(rows, ["field", "value"], "kv")
    if d.spend:  # model and judge calls paid and reused per run step (issue 30)
        body += (f"<details><summary>Calls and spend per run ({sum(r['calls sent'] for r in d.spend)} calls sent, "
                 f"{sum(r['calls reused'] for r in d.spend)} reused)</summary>{html_table(d.spend)}</details>")
    return Section("overview", "Overview", True, body)


def _delta_ci(row: dict[str, Any]) -> str:
    """The paired difference's interval of a pairwise row as text ("" when not computed)."""
    det = row_detail(row)
    low, high = det.get("delta_ci_low"), det.get("delta_ci_high")
    return "" if low is None or high is None else f"[{low:+.4g}, {high:+.4g}]"


def section_headline(d: ReportData) -> Section:
    stats = [r for r in d.comparisons if r["kind"] == "model_metric"]
    if not stats:
        return absent("headline", "Per-metric statistics", "no scored metrics under this fingerprint")
    rows = [{"metric": r["metric"], "direction": r["direction"], "model": r["model"],
             "winner": "★" if r["is_winner"] else "", "mean": r["mean"], "median": r["median"],
             "95% CI": "∅" if r["ci_low"] is None else f"[{r['ci_low']:.4g}, {r['ci_high']:.4g}] ({r['ci_method']})",
             "scored / total": f"{r['n_scored']} / {r['n_total']}",
             "tie group": row_detail(r).get("tie_group", "")} for r in sorted(stats, key=lambda r: (r["metric"], r["model"]))]
    body = "<h3>Per metric and model</h3>" + html_table(rows)
    if any(row_detail(r).get("tie_group") is not None for r in stats):
        body += ("<p class='cap'>Tie group: models statistically indistinguishable by the Holm-adjusted paired tests; "
                 "group 1 is tied with the best (docs/analysis.md).</p>")
    repeated = trials_table(d.comparisons)
    if repeated.height:
        body += ("<h3>Repeated trials</h3>" + html_table(repeated.to_dicts())
                 + "<p class='cap'>Each sample was evaluated k times (<code>trials:</code> in the spec). The interval resamples "
                   "samples, then their trials; flip rate = share of trial pairs that disagree; pass@k = chance that at least "
                   "one of k trials passes, pass^k = that all k pass (Chen et al. 2021; Yao et al. 2024).</p>")
    corpus = sorted({r["metric"] for r in stats if (r.get("detail") or {}).get("level") == "corpus"})
    if corpus:
        body += (f"<p class='cap'>Corpus-level scores ({esc(', '.join(corpus))}): one value per model over every scored segment "
                 "(mean = the corpus score, no median; scored = segments); the interval resamples the segments' sufficient "
                 "statistics, and pairs are compared by approximate randomisation and paired bootstrap over the segments both "
                 "models scored.</p>")
    pw = [r for r in d.comparisons if r["kind"] == "pairwise"]
    if pw:
        prow = [{"baseline": r["baseline"], "candidate": r["model"], "metric": r["metric"], "pairs": r["n_pairs"],
                 "delta": r["delta"], "Δ 95% CI": _delta_ci(r), "detectable": row_detail(r).get("mde"),
                 "relative change": r["relative_change"], "retention": r["retention"], "test": r["test"],
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
    models = sorted(set(med["model"].to_list()))
    by_model = {model: dict(med.filter(pl.col("model") == model).select("metric", "median").iter_rows()) for model in models}
    # only the metrics every model has: a polygon over a missing value draws an edge across it
    # (issue 26: human ratings exist for the dataset's own system only); the others are named
    metrics = sorted(k for k in ranges if all(by_model[model].get(k) is not None for model in models))
    left_out = sorted(set(ranges) - set(metrics))
    if not metrics:
        return absent("radar", "Radar of per-metric medians", "no metric is scored for every model")
    fig = go.Figure()
    for i, model in enumerate(models):
        m = by_model[model]
        r = [_scale(m.get(k), ranges[k]) for k in metrics]
        raw = [fmt(m.get(k)) for k in metrics]
        fig.add_trace(go.Scatterpolar(r=r + r[:1], theta=metrics + metrics[:1], name=model, fill="toself", opacity=0.6,
                                      customdata=raw + raw[:1], hovertemplate="%{theta}: median %{customdata}<extra>" + model + "</extra>",
                                      line=dict(color=PALETTE[i % len(PALETTE)])))
    fig.update_layout(polar=dict(radialaxis=dict(range=[0, 1])))
    caption = ("<p class='cap'>Medians scaled to [0, 1] by each metric's declared range (the observed range where none is "
               "declared); minimised metrics are inverted, so outward is better. Hover for the raw median.</p>")
    if left_out:
        caption += f"<p class='cap'>Not scored for every model, so left out of the radar: {esc(', '.join(left_out))}.</p>"
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
