"""Heuristic reference systems (``heuristic:NAME``): outputs computed from the input alone.

They are not models (nothing is learned or generated); they are the floor a real system has to clear, and they give the
demo a second system to compare on real data (SF-RES and QAGS ship one real system
output each). Spec strings::

    heuristic:lead-3       the first three sentences of the input (the standard extractive
                          summarisation baseline for CNN/DM; See et al., 2017, ACL)
    heuristic:lead-N       the first N sentences (N >= 1)
    heuristic:copy-input   the input verbatim (e.g. the dialogue act itself for data-to-text)

Sentences are split with NLTK's Punkt tokenizer in its default (untrained) settings, so
no model download is needed. ``tokens_out`` is the whitespace word count, as for the
precomputed backend; latency is not measured (None), since nothing is generated.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Mapping

from resources.backends import GenerationRequest, GenerationResult, ModelBackend, ModelSpecError

_LEAD = re.compile(r"^lead-(\d+)$")


class HeuristicBackend(ModelBackend):
    """Outputs derived from each sample's input (see the module docstring for the names)."""

    kind = "heuristic"
    measures_throughput = False  # a string rule over the input, not a model: no throughput to report

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec)
        self.runtime = dict(runtime or {})
        self.name = spec.split(":", 1)[1].strip()
        match = _LEAD.match(self.name)
        if match:
            self.n_sentences: int | None = int(match.group(1))
            if self.n_sentences < 1:
                raise ModelSpecError(f"{spec!r}: lead-N needs N >= 1, e.g. heuristic:lead-3")
        elif self.name == "copy-input":
            self.n_sentences = None
        else:
            raise ModelSpecError(f"{spec!r}: unknown heuristic {self.name!r}; known: lead-N (e.g. lead-3), copy-input")

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"backend": "heuristic", "heuristic": self.name}
        if self.n_sentences is not None:
            ident["sentence_splitter"] = "nltk PunktSentenceTokenizer (default parameters)"
        return ident

    def output_for(self, text: str) -> str:
        """The heuristic output for one input text."""
        if self.n_sentences is None:
            return text
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        return " ".join(PunktSentenceTokenizer().tokenize(text)[: self.n_sentences])

    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        for request in requests:
            sid = request.sample.sample_id
            text = request.sample.input
            if not text or not text.strip():
                yield GenerationResult(sid, None, "error", f"sample {sid} has an empty input; the {self.name} heuristic needs one")
                continue
            output = self.output_for(text)
            yield GenerationResult(sid, output, "ok", tokens_out=len(output.split()))
