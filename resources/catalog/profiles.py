"""Practitioner profiles (LLM-FACETS): who reads the evaluation decides what is measured
and how it is shown.

A profile is YAML data::

    name: domain_expert
    title: Domain expert
    dimensions: [factual, process]          # transparency dimensions it targets
    metrics: [numeric_accuracy, rag_citations]
    judged_metrics: [faithfulness, g_eval]  # added when metric_params configures them
    output: {form: per_sample, limit: 10}   # technical_table | per_sample | evidence

Shipped profiles live in ``pipelines/profiles/``; an organisation adds its own by putting
YAML files in a folder named by ``$FACETLAKE_PROFILES`` (several folders separated by
``:``; a file there overrides a shipped profile of the same name) or by naming a YAML file
directly. Selecting a profile selects its metrics; a targeted dimension with fewer than
two selected metrics gets a warning, since a number can only be cross-checked by another.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping


from metric_ops.errors import FacetlakeError
from resources.datasets import load_yaml, read_text

SHIPPED = Path(__file__).resolve().parents[2] / "pipelines" / "profiles"
OUTPUT_FORMS = ("technical_table", "per_sample", "evidence")
PROFILES_ENV = "FACETLAKE_PROFILES"


class ProfileError(FacetlakeError, ValueError):
    """A profile is unknown or malformed; the message names the file and the fix."""


class CrossCheckWarning(UserWarning):
    """A targeted dimension has fewer than two metrics."""


@dataclass(frozen=True)
class Profile:
    """A parsed practitioner profile."""

    name: str
    title: str
    dimensions: tuple[str, ...]
    metrics: tuple[str, ...]
    judged_metrics: tuple[str, ...] = ()
    output: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    source: str = ""

    @property
    def form(self) -> str:
        """The output form: technical_table, per_sample or evidence."""
        return str(self.output.get("form", "technical_table"))


def profile_dirs() -> list[Path]:
    """Folders searched for profiles: ``$FACETLAKE_PROFILES`` entries first, then the shipped ones."""
    extra = [Path(p).expanduser() for p in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if p]
    return [*extra, SHIPPED]


def parse_profile(data: Any, source: str) -> Profile:
    """Validate profile data; raises :class:`ProfileError` naming ``source`` and the key (also
    for anything that looks like a secret: a profile is recorded with the evaluations it shapes)."""
    from metric_ops.base import DIMENSIONS
    from metric_ops.secrets import refuse_secrets

    if not isinstance(data, Mapping):
        raise ProfileError(f"{source}: a profile is a mapping with name, dimensions, metrics, output")
    refuse_secrets(data, source, error=ProfileError,
                   fix=lambda _: "a profile names metrics and an output form only; keys come from environment variables")
    for key in ("name", "dimensions", "metrics"):
        if key not in data:
            raise ProfileError(f"{source}: missing key {key!r}")
    dims = tuple(str(d) for d in data["dimensions"])
    bad = [d for d in dims if d not in DIMENSIONS]
    if bad:
        raise ProfileError(f"{source}: unknown dimensions {bad}; known: {', '.join(DIMENSIONS)}")
    output = dict(data.get("output") or {})
    if output.get("form", "technical_table") not in OUTPUT_FORMS:
        raise ProfileError(f"{source}: output.form {output.get('form')!r} is not one of {', '.join(OUTPUT_FORMS)}")
    return Profile(
        name=str(data["name"]), title=str(data.get("title") or data["name"]), dimensions=dims,
        metrics=tuple(str(m) for m in data["metrics"]), judged_metrics=tuple(str(m) for m in data.get("judged_metrics") or ()),
        output=output, description=str(data.get("description") or "").strip(), source=source,
    )


def list_profiles() -> dict[str, Profile]:
    """Every profile found, by name (an earlier folder wins)."""
    found: dict[str, Profile] = {}
    for folder in profile_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.y*ml")):
            profile = parse_profile(load_yaml(read_text(path), str(path)), str(path))
            found.setdefault(profile.name, profile)
    return found


def load_profile(name_or_path: str) -> Profile:
    """A profile by name, or from a YAML file path; raises :class:`ProfileError` listing the known ones."""
    path = Path(name_or_path).expanduser()
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return parse_profile(load_yaml(read_text(path), str(path)), str(path))
    profiles = list_profiles()
    key = name_or_path.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in profiles:
        raise ProfileError(
            f"unknown profile {name_or_path!r}; known: {', '.join(sorted(profiles))} "
            f"(add your own YAML in a folder named by ${PROFILES_ENV})"
        )
    return profiles[key]


def dimension_counts(metrics: Iterable[str]) -> dict[str, list[str]]:
    """Registered metrics grouped by transparency dimension (unknown names skipped)."""
    from metric_ops.registry import REGISTRY

    out: dict[str, list[str]] = {}
    for name in metrics:
        if name in REGISTRY:
            cls = REGISTRY.get_class(name)
            out.setdefault(cls.dimension, []).append(cls.name)
    return out


def profile_metrics(
    profile: str | Profile, metrics: Iterable[str] = (), metric_params: Mapping[str, Any] | None = None, where: str = "profile"
) -> list[str]:
    """The metric list a run gets: ``metrics`` plus the profile's registered metrics, plus
    its judged metrics that ``metric_params`` configures.

    Warns (:class:`CrossCheckWarning`) for every targeted dimension with fewer than two
    selected metrics, and (``UserWarning``) for recommended metrics not installed here.
    """
    from metric_ops.registry import REGISTRY

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    selected = list(dict.fromkeys(metrics))
    missing = []
    for name in prof.metrics:
        if name in REGISTRY:
            selected.append(name)
        else:
            missing.append(name)
    for name in prof.judged_metrics:
        if name in REGISTRY and name in (metric_params or {}):
            selected.append(name)
    selected = list(dict.fromkeys(selected))
    if missing:
        warnings.warn(f"{where}: profile {prof.name}: metrics not available here: {', '.join(missing)}", UserWarning, stacklevel=2)
    by_dim = dimension_counts(selected)
    for dim in prof.dimensions:
        have = by_dim.get(dim, [])
        if len(have) < 2:
            warnings.warn(
                f"{where}: profile {prof.name} targets the {dim} dimension but the run has {len(have)} metric(s) in it "
                f"({', '.join(have) or 'none'}); cross-checking needs two: add one (see `facetlake metrics`)",
                CrossCheckWarning, stacklevel=2,
            )
    return selected


def profile_view(lake: Any, fingerprints: Iterable[str], profile: str | Profile):
    """The run's results in the profile's output form, as a polars frame.

    ``technical_table``: mean, n scored, n total and signature per model x metric;
    ``per_sample``: the lowest-scoring samples of each metric in the targeted dimensions
    (``output.limit`` per metric) with their detail; ``evidence``: per dimension x metric
    the scored/unscored/error counts, plus the outbound calls and how many were anonymised.
    """
    import polars as pl

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    fps = list(fingerprints)
    scores = lake.read("scores").filter(pl.col("fingerprint").is_in(fps))
    if prof.form == "technical_table":
        return (scores.group_by("model", "metric", "dimension", "signature")
                .agg(pl.col("value").mean().alias("mean"), (pl.col("status") == "scored").sum().alias("n_scored"), pl.len().alias("n_total"))
                .sort("model", "dimension", "metric"))
    targeted = scores.filter(pl.col("dimension").is_in(list(prof.dimensions)))
    if prof.form == "per_sample":
        limit = int(prof.output.get("limit", 10))
        scored = targeted.filter(pl.col("status") == "scored")
        ordered = scored.with_columns(
            pl.when(pl.col("direction") == "maximize").then(pl.col("value")).otherwise(-pl.col("value")).alias("_rank")
        ).sort("_rank")
        return ordered.group_by("model", "metric", maintain_order=True).head(limit).select(
            "model", "metric", "sample_id", "value", "direction", "detail")
    frame = (targeted.group_by("dimension", "metric", "locality")
             .agg(*[(pl.col("status") == s).sum().alias(f"n_{s}") for s in ("scored", "unscored", "error")])
             .sort("dimension", "metric"))
    if lake.exists("outbound_ledger"):
        ledger = lake.read("outbound_ledger").filter(pl.col("fingerprint").is_in(fps))
        calls, anonymised = ledger.height, int(ledger["anonymised"].sum()) if ledger.height else 0
    else:
        calls, anonymised = 0, 0
    extra = pl.DataFrame({"dimension": ["(outbound)"], "metric": [f"{calls} calls, {anonymised} anonymised"], "locality": ["external"],
                          "n_scored": [0], "n_unscored": [0], "n_error": [0]}, schema=frame.schema)
    return pl.concat([frame, extra])
