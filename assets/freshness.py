"""Whether an evaluation's verdicts were computed from the scores stored now.

The verdicts of an evaluation are the tables computed from its ``scores``: ``summary``,
``comparisons`` (with its regression check), ``correlations``, and for an agent
evaluation ``episode_summary``, for an lm-eval evaluation ``lm_eval_summary``, for a reviewed one ``agreement``
(:func:`verdict_assets`). Each of these assets records in its ``runs`` row a **scores
marker** (:func:`scores_marker`, under ``provenance.reads.scores_marker``) of the score
rows it read, and writes that row last, after its table and its Dagster events. So:

    a verdict table is fresh for an evaluation iff the latest ``runs`` row of that asset
    and evaluation carries the marker of the evaluation's score rows stored now
    (and, for ``comparisons``, the baseline the spec names now).

This holds whatever was killed when: a process killed after a scores commit and before
the verdicts leaves the new score rows with an old verdict marker (stale); one killed
after a verdict table's commit and before its ``runs`` row leaves the older marker (stale,
recomputed: the recomputation is incremental and idempotent); only a completed verdict
run makes it fresh. Callers: ``facetlake run`` / ``score`` (their skip paths too), the
launch and submit paths (pipelines/runs/runner.py) and the ``analysis_sensor``
(pipelines/sensors.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

import polars as pl

from resources.lake.resource import LakeStore

# the verdict assets computed from an evaluation's scores, in materialisation order
BASE_VERDICTS = ("summary", "comparisons", "correlations")
AGENT_VERDICTS = ("episode_summary",)
LM_EVAL_VERDICTS = ("lm_eval_summary",)
REVIEW_VERDICTS = ("agreement",)
ALL_VERDICTS = (*BASE_VERDICTS, *AGENT_VERDICTS, *LM_EVAL_VERDICTS, *REVIEW_VERDICTS)
# the score columns the marker is computed from
MARKER_COLUMNS = ("model", "metric", "signature", "run_id", "status", "sample_id")


def scores_marker(scores: pl.DataFrame) -> str | None:
    """A SHA-256 (64 hex) of what an evaluation's score rows are: per model x score name x
    signature, the scores runs (Dagster run ids) that wrote them, the number of rows, of
    ``scored`` / ``error`` rows and of corpus rows (``sample_id`` null).

    ``scores``: rows of one fingerprint with at least :data:`MARKER_COLUMNS` (other columns
    are ignored; row order does not matter). Any rewrite of a partition's rows comes from
    a new run id, so a rescore, a re-run, a new model or a removed metric changes the
    marker; integer counts only, so two reads of the same rows always agree. ``None`` when
    there are no rows."""
    if scores.height == 0:
        return None
    missing = [c for c in ("model", "metric", "status", "sample_id") if c not in scores.columns]
    if missing:
        raise ValueError(f"scores_marker needs the score columns {', '.join(missing)}; read them with the other MARKER_COLUMNS")
    text = {c: (pl.col(c).cast(pl.String).fill_null("") if c in scores.columns else pl.lit("")) for c in ("signature", "run_id")}
    per_key = (
        scores.select(pl.col("model"), pl.col("metric"), text["signature"].alias("signature"), text["run_id"].alias("run_id"),
                      pl.col("status"), pl.col("sample_id").is_null().alias("corpus"))
        .group_by(["model", "metric", "signature"])
        .agg(
            pl.col("run_id").unique().sort().str.join(",").alias("runs"),
            pl.len().cast(pl.Int64).alias("n"),
            (pl.col("status") == "scored").sum().cast(pl.Int64).alias("n_scored"),
            (pl.col("status") == "error").sum().cast(pl.Int64).alias("n_error"),
            pl.col("corpus").sum().cast(pl.Int64).alias("n_corpus"),
        )
        .sort(["model", "metric", "signature"])
    )
    return hashlib.sha256(json.dumps(per_key.rows(), separators=(",", ":")).encode()).hexdigest()


def stored_scores_markers(lake: LakeStore, fingerprints: Iterable[str], version: int | None = None) -> dict[str, str | None]:
    """:func:`scores_marker` of each fingerprint's stored score rows (at Delta ``version``,
    default the latest), from one read of :data:`MARKER_COLUMNS`; ``None`` for a
    fingerprint without scores."""
    wanted = sorted(set(fingerprints))
    out: dict[str, str | None] = dict.fromkeys(wanted)
    if not wanted or not lake.exists("scores"):
        return out
    frame = lake.read("scores", where={"fingerprint": wanted}, columns=["fingerprint", *MARKER_COLUMNS], version=version)
    for (fp,), part in frame.partition_by("fingerprint", as_dict=True).items():
        out[fp] = scores_marker(part)
    return out


@dataclass
class Freshness:
    """The verdicts of one evaluation fingerprint: ``marker`` of its stored scores (None:
    no scores, nothing to summarise), ``assets`` that apply to it, and ``stale``, those whose
    latest run did not read these scores (in :data:`ALL_VERDICTS` order)."""

    fingerprint: str
    marker: str | None
    assets: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


def verdict_assets(lake: LakeStore, fingerprint: str, spec: Any = None) -> list[str]:
    """The verdict assets of one evaluation: :data:`BASE_VERDICTS`, plus ``episode_summary``
    when agent episodes are stored under it, plus ``lm_eval_summary`` when its spec has an
    ``lm_eval`` section, plus ``agreement`` when it declares review rubrics. ``spec``: its :class:`~resources.catalog.spec.EvaluationSpec` if the
    caller has it."""
    from resources.catalog import evaluation_spec
    from resources.agents.episodes import has_episodes

    spec = spec if spec is not None else evaluation_spec(lake, fingerprint)
    return [*BASE_VERDICTS, *(AGENT_VERDICTS if has_episodes(lake, fingerprint) else ()),
            *(LM_EVAL_VERDICTS if getattr(spec, "lm_eval", None) else ()),
            *(REVIEW_VERDICTS if getattr(spec, "review", None) else ())]


def freshness(lake: LakeStore, fingerprints: Iterable[str]) -> dict[str, Freshness]:
    """Per evaluation fingerprint (64 hex), which of its verdicts are older than its scores
    (see the module docstring). One read of the scores' marker columns and one of the
    verdict rows of ``runs`` for all of them. Raises :class:`~resources.catalog.CatalogError`
    for a fingerprint that is not registered."""
    from resources.catalog import evaluation_spec

    wanted = sorted(set(fingerprints))
    markers = stored_scores_markers(lake, wanted)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    if wanted and lake.exists("runs"):
        runs = lake.read("runs", where={"fingerprint": wanted, "asset": list(ALL_VERDICTS)},
                         columns=["fingerprint", "asset", "finished_at", "provenance"])
        for row in runs.sort("finished_at").unique(subset=["fingerprint", "asset"], keep="last").iter_rows(named=True):
            try:
                latest[(row["fingerprint"], row["asset"])] = json.loads(row["provenance"] or "{}")
            except (TypeError, ValueError):
                latest[(row["fingerprint"], row["asset"])] = {}
    out = {}
    for fp in wanted:
        state = Freshness(fp, markers[fp])
        if state.marker is not None:
            spec = evaluation_spec(lake, fp)
            state.assets = verdict_assets(lake, fp, spec)
            for asset in state.assets:
                reads = (latest.get((fp, asset)) or {}).get("reads") or {}
                if reads.get("scores_marker") != state.marker or (
                        asset == "comparisons" and reads.get("baseline") != getattr(spec, "baseline", None)):
                    state.stale.append(asset)
        out[fp] = state
    return out


def active_fingerprints(lake: LakeStore, fingerprints: Iterable[str] | None = None) -> list[str]:
    """The current fingerprints of active (not archived) evaluations, in the order given
    (all of them, sorted, when ``fingerprints`` is None): the only ones whose verdicts are
    recomputed (history and archived rows are read-only)."""
    if not lake.exists("evaluations"):
        return []
    evals = lake.read("evaluations", columns=["fingerprint", "status", "archived"])
    active = evals.filter((pl.col("status") == "current") & ~pl.col("archived"))["fingerprint"].to_list()
    return sorted(set(active)) if fingerprints is None else [fp for fp in dict.fromkeys(fingerprints) if fp in set(active)]


def stale_verdicts(lake: LakeStore, fingerprint: str) -> list[str]:
    """The verdict assets of one evaluation (64-hex fingerprint) older than its stored
    scores; empty when every verdict is fresh or there are no scores (:func:`freshness`)."""
    return freshness(lake, [fingerprint])[fingerprint].stale


__all__ = ["ALL_VERDICTS", "active_fingerprints", "BASE_VERDICTS", "Freshness", "freshness", "scores_marker", "stale_verdicts",
           "stored_scores_markers", "verdict_assets"]
