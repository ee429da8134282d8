"""The report's per-sample sections: the paged per-sample heatmap, the execution timeline,
the multi-run comparison and the per-sample view (claims, jurors, token log-probabilities)."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from pipelines.report.data import MAX_RUNS, PAGE_SIZE, TIERS, ReportData, _metric_ranges, _scale, _scored, unchanged_text
from pipelines.report.html import PALETTE, Figures, Section, absent, esc, fmt, html_table
from pipelines.report.sections import _detail_rows


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
        # y: the sample ids themselves (category axis: "12" is a name, not a position); x: the score names
        # along the top, so the page slider below the chart never runs into them however long they are
        fig.update_layout(title=dict(text=f"{model}: samples 1–{len(pages[0])} of {len(ids)}", y=0.99, yanchor="top"),
                          yaxis=dict(autorange="reversed", type="category", title="sample id"),
                          xaxis=dict(side="top", tickangle=-30, automargin=True),
                          sliders=[dict(active=0, currentvalue=dict(prefix="page "), pad=dict(t=30), steps=steps)])
        # room above the plot for the title and the angled score names
        parts.append(figs.div(fig, 760 + 4 * max((len(m) for m in metrics), default=0), top=50 + 4 * max((len(m) for m in metrics), default=0)))
    return Section("sample-heatmap", title, True, "".join(parts)
                   + f"<p class='cap'>{PAGE_SIZE} samples per page in dataset order; colour = value scaled to [0, 1], "
                     "minimised metrics inverted (bright is better); blank = not scored.</p>")


def section_timeline(d: ReportData, figs: Figures) -> Section:
    """One small panel per score name (its own y axis, in the score's units), one line per
    model: the rolling mean over sample order. Issue 26 fault 10: one axis with a line per
    model x score (about 20) and a scrolling legend was unreadable."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    title = "Execution timeline: metric values over sample order"
    ok = _scored(d.scores)
    if ok.height == 0 or d.samples.height == 0:
        return absent("timeline", title, "no scored values with stored samples")
    pos = d.samples.select("sample_id", "position")
    joined = ok.join(pos, on="sample_id", how="inner").sort("position")
    if joined.height == 0:
        return absent("timeline", title, "no scored values with stored samples")
    window = max(1, min(25, joined["position"].n_unique() // 10))
    metrics = sorted(set(joined["metric"].to_list()))
    models = sorted(set(joined["model"].to_list()))
    fig = make_subplots(rows=len(metrics), cols=1, shared_xaxes=True, subplot_titles=metrics,
                        vertical_spacing=min(0.08, 0.5 / max(len(metrics), 1)))
    for k, metric in enumerate(metrics):
        for i, model in enumerate(models):
            sub = joined.filter((pl.col("model") == model) & (pl.col("metric") == metric))
            if sub.height == 0:
                continue
            rolling = sub["value"].cast(pl.Float64).rolling_mean(window, min_samples=1).to_list()
            fig.add_trace(go.Scatter(x=sub["position"].to_list(), y=rolling, mode="lines", name=model, legendgroup=model,
                                     showlegend=k == 0, line=dict(color=PALETTE[i % len(PALETTE)]),
                                     hovertemplate=f"position %{{x}}<br>{metric} rolling mean %{{y:.4g}}<extra>{esc(model)}</extra>"),
                          row=k + 1, col=1)
    fig.update_xaxes(title_text="sample position (dataset order)", row=len(metrics), col=1)
    fig.update_layout(legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0, xanchor="left"), margin=dict(t=60))
    return Section("timeline", title, True, figs.div(fig, 150 * len(metrics) + 120)
                   + f"<p class='cap'>One panel per score, in its own units; one line per model: the rolling mean of {window} "
                     "samples. Drift, bursts of failures or a bad data slice show up as dips.</p>")


def multirun_bars(runs: list[dict[str, Any]], metrics: list[str], cols: int = 3) -> Any:
    """Small multiples: one bar chart per score name, one bar per run, each on its own y axis
    in that score's raw units (BLEU's 0-100 beside ROUGE's 0-1 stays readable). A run
    without the score has no bar there (never a zero)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    nrows = math.ceil(len(metrics) / cols)
    fig = make_subplots(rows=nrows, cols=min(cols, len(metrics)), subplot_titles=metrics,
                        vertical_spacing=min(0.15, 0.6 / max(nrows, 1)))
    for i, r in enumerate(runs):
        for k, m in enumerate(metrics):
            fig.add_trace(go.Bar(x=[r["label"]], y=[r["means"].get(m)], name=r["label"], legendgroup=r["label"], showlegend=k == 0,
                                 marker_color=PALETTE[i % len(PALETTE)], hovertemplate=f"{m}: %{{y:.4g}}<extra>{r['label']}</extra>"),
                          row=k // cols + 1, col=k % cols + 1)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(bargap=0.15, legend=dict(orientation="h", y=-0.05, yanchor="top"))
    return fig


def section_multirun(d: ReportData, figs: Figures) -> Section:
    import plotly.graph_objects as go

    title = f"Multi-run comparison (up to {MAX_RUNS} runs)"
    runs = d.runs[:MAX_RUNS]
    if len(runs) < 2:
        repeats = "; ".join(f"{r['label']}: {unchanged_text(r)}" for r in runs if r.get("unchanged_by"))
        return absent("multirun", title, f"{len(runs)} scored run(s) found in `runs` for this fingerprint"
                      + (f" ({repeats})" if repeats else "") + ": a run is a change of scores; change the model or the "
                      "data and run again (or add a model), or pass --compare FP2 to compare another evaluation's runs")
    metrics = sorted(set().union(*[set(r["means"]) for r in runs]))  # every score of any run, not only the shared ones
    ranges = _metric_ranges(d.scores)
    radar = go.Figure()
    for i, r in enumerate(runs):
        scaled = [_scale(r["means"].get(m), ranges[m]) if m in ranges else None for m in metrics]  # None: a gap, never 0
        radar.add_trace(go.Scatterpolar(r=scaled + scaled[:1], theta=metrics + metrics[:1], name=r["label"], fill="toself", opacity=0.5,
                                        line=dict(color=PALETTE[i % len(PALETTE)])))
    radar.update_layout(polar=dict(radialaxis=dict(range=[0, 1])))
    bars = multirun_bars(runs, metrics)
    table = html_table([{"run": r["label"], "fingerprint": r["fingerprint"][:12], "model": r["model"], "Dagster run": r["run_id"],
                         "scores version": r["scores_version"],
                         "rescored by": ", ".join(x[:8] for x in r.get("rescored_by", [])) or "-",
                         "scores": len(r["means"]), "re-runs": unchanged_text(r)} for r in runs])
    missing = [f"{r['label']}: {', '.join(m for m in metrics if m not in r['means'])}" for r in runs if set(metrics) - set(r["means"])]
    note = (f"<p class='cap'>Not scored in every run (no bar, a gap in the radar): {esc('; '.join(missing))}.</p>" if missing else "")
    return Section("multirun", title, True, figs.div(radar, 480) + figs.div(bars, 240 * math.ceil(len(metrics) / 3) + 80) + table + note
                   + "<p class='cap'>One run = one change of a model's scores; a later `facetlake score -m` adds its metrics "
                     "to that run instead of counting as a run, and a re-run that changed no score is listed as 'unchanged since' "
                     "the run it repeated. Each run's scores are read by Delta time travel at the version it "
                     "(or its last rescore) wrote; each bar chart has its own axis in the score's raw units.</p>")


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
