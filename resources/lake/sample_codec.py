"""Row codecs of the ``samples`` table and the package versions recorded with every run:
shared by the assets (which write and read them) and the evidence export (which reads
them), so they live below both (issue 19: no import from resources back into assets).

``sample_frame`` / ``sample_rows`` encode Samples as table rows; ``samples_from_frame``
decodes them; ``load_stored_samples`` reads one fingerprint's samples through the lake
store, cached per table version.
"""

from __future__ import annotations

import json
import platform
from typing import Any, Iterable

import polars as pl

from metric_ops.base import Sample, library_version
from metric_ops.errors import FacetlakeError
from resources.lake.tables import LakeTables


class SamplesMissingError(FacetlakeError, LookupError):
    """No samples are stored for the fingerprint; the message says to materialise them first."""


KEY_PACKAGES = ("facetlake", "dagster", "deltalake", "polars", "duckdb", "sacrebleu", "rouge-score", "nltk",
                "transformers", "sentence-transformers", "torch")


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change a number, plus Python's."""
    return {"python": platform.python_version(), **{p: library_version(p) for p in KEY_PACKAGES}}


def sample_rows(samples: Iterable[Sample], fingerprint: str, dataset: str, dataset_hash: str) -> list[dict[str, Any]]:
    """Rows for the ``samples`` table."""
    return [
        {
            "fingerprint": fingerprint,
            "dataset": dataset,
            "dataset_hash": dataset_hash,
            "position": i,
            "sample_id": s.sample_id,
            "input": s.input,
            "references": list(s.references),
            "context": list(s.context),
            "metadata": json.dumps(dict(s.metadata), ensure_ascii=False, default=str),
            "ratings": json.dumps({k: (None if v != v else v) for k, v in s.ratings.items()}),
        }
        for i, s in enumerate(samples)
    ]


def sample_frame(samples: list[Sample], fingerprint: str, dataset: str, dataset_hash: str) -> pl.DataFrame:
    """The rows of :func:`sample_rows` as one polars frame built column by column (what the
    ``samples`` asset writes: no dict per row). Empty metadata / ratings are ``{}``."""
    def meta(m: Any) -> str:
        return json.dumps(dict(m), ensure_ascii=False, default=str) if m else "{}"

    def rate(r: Any) -> str:
        return json.dumps({k: (None if v != v else v) for k, v in r.items()}) if r else "{}"

    from resources.lake.types import string_list_column

    n = len(samples)
    return pl.DataFrame({
        "fingerprint": [fingerprint] * n, "dataset": [dataset] * n, "dataset_hash": [dataset_hash] * n,
        "position": list(range(n)), "sample_id": [s.sample_id for s in samples], "input": [s.input for s in samples],
        # list columns from flat strings and offsets (a Python list per row costs ~1 s per 100k samples)
        "references": string_list_column("references", [s.references for s in samples]),
        "context": string_list_column("context", [s.context for s in samples]),
        "metadata": [meta(s.metadata) for s in samples], "ratings": [rate(s.ratings) for s in samples],
    }, schema_overrides={"position": pl.Int64})


def samples_from_frame(frame: pl.DataFrame) -> list[Sample]:
    """Samples back from ``samples`` table rows (in stored order).

    Built from whole columns (no dict per row); empty ``metadata`` / ``ratings`` JSON
    (``{}``, the usual case) is not parsed."""
    if "position" in frame.columns:
        frame = frame.sort("position")
    columns = {name: frame.get_column(name).to_list() for name in ("sample_id", "input", "references", "context", "metadata", "ratings")}
    out = []
    for sample_id, text, references, context, metadata, ratings in zip(*columns.values()):
        out.append(
            Sample(
                sample_id=sample_id,
                input=text,
                references=tuple(references or ()),
                context=tuple(context or ()),
                metadata=json.loads(metadata) if metadata and metadata != "{}" else {},
                ratings={k: (float("nan") if v is None else float(v)) for k, v in json.loads(ratings).items()}
                if ratings and ratings != "{}" else {},
            )
        )
    return out


_SAMPLES_CACHE: dict[tuple, list[Sample]] = {}


def load_stored_samples(lake: LakeTables, fingerprint: str) -> list[Sample]:
    """The stored samples of ``fingerprint``; raises a clear error when absent.

    Kept in memory per process for the table version read (keyed by the table's
    location, its Delta table id and version, and the fingerprint): one in-process run
    reads and decodes an evaluation's samples once, not once per asset (generations,
    annotations, scores, analysis). Any write to ``samples`` makes a new version, so a
    stale list is never returned. Callers get their own list; the Samples are frozen.
    """
    key = None
    if lake.exists("samples"):
        delta = lake.delta("samples")
        key = (lake.uri("samples"), delta.metadata().id, delta.version(), fingerprint)
        if key in _SAMPLES_CACHE:
            return list(_SAMPLES_CACHE[key])
    frame = lake.read("samples", where={"fingerprint": fingerprint})
    if frame.height == 0:
        raise SamplesMissingError(f"no samples stored for fingerprint {fingerprint[:12]}; materialise the samples asset for it first")
    samples = samples_from_frame(frame)
    if key is not None:
        _SAMPLES_CACHE.clear()  # one evaluation at a time: bounded memory
        _SAMPLES_CACHE[key] = samples
    return list(samples)
