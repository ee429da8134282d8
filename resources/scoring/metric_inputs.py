"""What a metric is handed in the ``scores`` asset beyond the raw outputs.

- ``use_annotation`` in a metric's parameters (``metric_params: {exact_match:
  {use_annotation: answer}}``) makes the metric score that annotator's extracted value
  (from the ``annotations`` table) instead of the raw output; a sample whose annotator
  extracted nothing has no output and is ``unscored``. The parameter is not passed to
  the metric; its signature gains ``|annotation:NAME``.
- Metrics that declare ``uses_token_logprobs = True`` (metric_ops/confidence.py) get
  ``sample.metadata["token_logprobs"]``: the sample's tokens from the ``token_logprobs``
  table, in position order (only those overlapping the annotation's span when scoring an
  annotation). A sample with no stored tokens gets no key (the metric leaves it unscored).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from metric_ops.base import Metric, Sample
from metric_ops.errors import FacetlakeError
from metric_ops.registry import REGISTRY
from resources.lake.resource import LakeStore

ANNOTATION_PARAM = "use_annotation"


class MetricInputError(FacetlakeError, ValueError):
    """A metric was told to score an annotation that does not exist."""


def build_metric(name: str, params: Mapping[str, Any]) -> tuple[Metric, str | None]:
    """The metric ``name`` built with ``params`` minus ``use_annotation``, and that annotation
    name (None when scoring the raw output). The signature of an annotation-scoring metric
    ends in ``|annotation:NAME``."""
    params = dict(params)
    annotation = params.pop(ANNOTATION_PARAM, None)
    metric = REGISTRY.create(name, **params)
    if annotation:
        base = metric.signature
        metric.signature = lambda: f"{base()}|annotation:{annotation}"  # type: ignore[method-assign]
        metric.use_annotation = str(annotation)  # type: ignore[attr-defined]  # in its identity (metric_ops/identity.py)
    return metric, (str(annotation) if annotation else None)


class MetricInputs:
    """Per-partition loader: samples and outputs as each metric should see them."""

    def __init__(self, lake: LakeStore, model: str, fingerprint: str, samples: Sequence[Sample], outputs: Sequence[str | None]) -> None:
        self.lake, self.model, self.fingerprint = lake, model, fingerprint
        self.samples, self.outputs = list(samples), list(outputs)
        self._annotations: dict[str, dict[str, dict[str, Any]]] | None = None
        self._tokens: dict[str, list[dict[str, Any]]] | None = None

    def annotations(self) -> dict[str, dict[str, dict[str, Any]]]:
        """annotator -> sample_id -> annotations row."""
        if self._annotations is None:
            frame = self.lake.read("annotations", where={"model": self.model, "fingerprint": self.fingerprint})
            self._annotations = {}
            for r in frame.iter_rows(named=True):
                self._annotations.setdefault(r["annotator"], {})[r["sample_id"]] = r
        return self._annotations

    def tokens(self) -> dict[str, list[dict[str, Any]]]:
        """sample_id -> token records in position order."""
        if self._tokens is None:
            frame = self.lake.read(
                "token_logprobs", where={"model": self.model, "fingerprint": self.fingerprint},
                columns=["sample_id", "position", "token", "logprob", "char_start", "char_end"],
            ).sort(["sample_id", "position"])
            self._tokens = {}
            for r in frame.iter_rows(named=True):
                self._tokens.setdefault(r["sample_id"], []).append(r)
        return self._tokens

    def _annotation_on_raw_output(self, annotation: str) -> bool:
        from resources.catalog import evaluation_spec

        configs = {a.get("name"): a for a in evaluation_spec(self.lake, self.fingerprint).annotators}
        return not configs.get(annotation, {}).get("source")

    def prepare(self, name: str, params: Mapping[str, Any]) -> tuple[Metric, list[Sample], list[str | None]]:
        """(metric, samples, outputs) for metric ``name`` with ``params``; raises
        :class:`MetricInputError` when ``use_annotation`` names no stored annotator."""
        metric, annotation = build_metric(name, params)
        samples, outputs = self.samples, self.outputs
        spans: dict[str, tuple[int | None, int | None]] = {}
        if annotation:
            by_annotator = self.annotations()
            if annotation not in by_annotator:
                raise MetricInputError(
                    f"metric {name!r} is told to score annotation {annotation!r}, but the annotations table has "
                    f"{sorted(by_annotator) or 'none'} for this partition; add the annotator under annotators: or fix use_annotation"
                )
            rows = by_annotator[annotation]
            outputs = [
                (rows[s.sample_id]["value"] if s.sample_id in rows and o is not None else None) for s, o in zip(samples, outputs)
            ]
            if self._annotation_on_raw_output(annotation):  # offsets are into the raw output only then
                spans = {sid: (r["span_start"], r["span_end"]) for sid, r in rows.items()}
        if getattr(metric, "uses_token_logprobs", False):
            tokens = self.tokens()
            prepared = []
            for s in samples:
                records = tokens.get(s.sample_id)
                if records is not None and spans:
                    start, end = spans.get(s.sample_id, (None, None))
                    records = [] if start is None else [t for t in records if t["char_end"] > start and t["char_start"] < end]
                prepared.append(s if records is None else dataclasses.replace(s, metadata={**s.metadata, "token_logprobs": records}))
            samples = prepared
        return metric, samples, outputs
