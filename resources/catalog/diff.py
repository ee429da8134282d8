"""Which samples changed between two fingerprints of an evaluation (issue 31,
``facetlake datasets diff``).

A changed dataset file gives an evaluation a new fingerprint; the earlier one stays as
history with its ``samples`` rows. This compares the stored samples of two fingerprints by
sample id: ids only in the newer one are *added*, ids only in the older one *removed*, and
ids in both whose stored fields differ are *changed*, with the fields named
(:data:`SAMPLE_FIELDS`; ``position`` is ignored: a reordered file changes no sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import polars as pl

from resources.catalog.reads import CatalogError, evaluation_row
from resources.lake.resource import LakeStore

#: the stored fields of a sample compared (``samples`` columns)
SAMPLE_FIELDS = ("input", "references", "context", "metadata", "ratings")


@dataclass(frozen=True)
class SampleDiff:
    """Added, removed and changed sample ids from ``older`` to ``newer`` (partition keys
    ``name@fp12``); ``changed`` maps each id to the fields that differ; ``unchanged`` counts
    the ids whose every field is equal. Ids are in dataset order (the newer one's)."""

    older: str
    newer: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unchanged: int = 0

    def summary(self) -> str:
        """One line: "N added, M removed, K changed samples (U unchanged)"."""
        return (f"{len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed samples "
                f"({self.unchanged} unchanged)")

    def frame(self) -> pl.DataFrame:
        """One row per differing sample: sample_id, change (added / removed / changed), fields."""
        rows = ([{"sample_id": s, "change": "added", "fields": ""} for s in self.added]
                + [{"sample_id": s, "change": "removed", "fields": ""} for s in self.removed]
                + [{"sample_id": s, "change": "changed", "fields": ", ".join(f)} for s, f in self.changed.items()])
        return pl.DataFrame(rows, schema={"sample_id": pl.String, "change": pl.String, "fields": pl.String})


def fingerprint_history(lake: LakeStore, name: str) -> list[dict[str, Any]]:
    """The ``evaluations`` rows of evaluation ``name`` (every fingerprint it had), oldest first."""
    frame = lake.read("evaluations", where={"name": name})
    return frame.sort("registered_at").to_dicts() if frame.height else []


def stored_samples(lake: LakeStore, fingerprint: str) -> dict[str, Any]:
    """``{sample id: Sample}`` of a fingerprint, in dataset order (the lake's decoded samples,
    :func:`resources.lake.sample_codec.load_stored_samples`); :class:`CatalogError` when none are stored."""
    from resources.lake.sample_codec import SamplesMissingError, load_stored_samples

    try:
        return {s.sample_id: s for s in load_stored_samples(lake, fingerprint)}
    except SamplesMissingError as exc:
        raise CatalogError(f"{exc} (`facetlake run SPEC.yaml`)") from None


def sample_diff(lake: LakeStore, evaluation: str, older: str | None = None, newer: str | None = None) -> SampleDiff:
    """The sample differences of ``evaluation`` (a name or any reference
    :func:`resources.catalog.evaluation_row` takes) from ``older`` to ``newer``.

    ``newer`` defaults to the evaluation's current fingerprint (or the one ``evaluation``
    names), ``older`` to the fingerprint registered before ``newer``. Both may be
    fingerprints (a unique prefix), ``name@fp12`` keys, or ``~N`` (N fingerprints before the
    current one). Raises :class:`CatalogError` when the evaluation has a single fingerprint
    and no ``older`` is given, or a reference names nothing."""
    base = evaluation_row(lake, evaluation)
    name = base["name"]
    history = fingerprint_history(lake, name)
    fps = [r["fingerprint"] for r in history]

    def resolve(ref: str | None, default: str | None) -> str:
        if ref is None:
            if default is None:
                raise CatalogError(f"evaluation {name!r} has one fingerprint ({fps[0][:12]}); nothing to compare it with. "
                                   "Name two: `facetlake datasets diff EVAL FROM TO` (fingerprints or name@fp12)")
            return default
        ref = ref.strip()
        if ref.startswith("~") and ref[1:].isdigit():
            current = fps.index(base["fingerprint"])
            if current - int(ref[1:]) < 0:
                raise CatalogError(f"{ref}: evaluation {name!r} has only {current} earlier fingerprint(s)")
            return fps[current - int(ref[1:])]
        found = [fp for fp in fps if fp.startswith(ref.split("@", 1)[-1].split(":", 1)[0])]
        if len(found) == 1:
            return found[0]
        return evaluation_row(lake, ref)["fingerprint"]  # another evaluation's fingerprint, or a clear error

    new_fp = resolve(newer, base["fingerprint"])
    position = fps.index(new_fp) if new_fp in fps else len(fps)
    old_fp = resolve(older, fps[position - 1] if position > 0 else None)
    old, new = stored_samples(lake, old_fp), stored_samples(lake, new_fp)
    key = lambda fp: f"{name}@{fp[:12]}"  # noqa: E731
    return compare_samples(old, new, key(old_fp), key(new_fp))


def sample_fields(sample: Any) -> dict[str, Any]:
    """The compared fields of a :class:`metric_ops.base.Sample` (empty text and mappings as
    None; a missing rating, NaN once decoded, as None so two missing ratings are equal)."""
    ratings = {k: (None if v != v else v) for k, v in dict(sample.ratings).items()}
    return {"input": _norm(sample.input), "references": _norm(list(sample.references)), "context": _norm(list(sample.context)),
            "metadata": dict(sample.metadata) or None, "ratings": ratings or None}


def compare_samples(old: Mapping[str, Any], new: Mapping[str, Any], older: str, newer: str) -> SampleDiff:
    """:class:`SampleDiff` of two ``{sample id: Sample}`` mappings (new's order)."""
    added = tuple(s for s in new if s not in old)
    removed = tuple(s for s in old if s not in new)
    changed: dict[str, tuple[str, ...]] = {}
    same = 0
    for sid, row in new.items():
        if sid not in old:
            continue
        a, b = sample_fields(old[sid]), sample_fields(row)
        fields = tuple(f for f in SAMPLE_FIELDS if a[f] != b[f])
        if fields:
            changed[sid] = fields
        else:
            same += 1
    return SampleDiff(older, newer, added, removed, changed, same)


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if hasattr(value, "to_list"):
        return _norm(value.to_list())
    return value if value not in ("", None) else None


__all__ = ["SAMPLE_FIELDS", "SampleDiff", "compare_samples", "fingerprint_history", "sample_diff", "sample_fields", "stored_samples"]
