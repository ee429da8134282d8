"""Model backends: one abstract interface, several implementations chosen by a spec string.

Spec strings (``facetlake`` names a model this way everywhere)::

    precomputed:PATH             outputs from a JSONL/CSV/Parquet/JSON file with sample_id + output
    precomputed:column=NAME      outputs from a field of the sample's metadata (e.g. system_output)
    hf:PATH                      a local transformers causal LM          (live generation issue)
    vllm:NAME                    vLLM's offline engine                   (live generation issue)
    api:MODEL@BASE_URL           an OpenAI-compatible endpoint           (live generation issue)

A backend turns :class:`GenerationRequest` objects into :class:`GenerationResult` objects;
the ``generations`` asset writes them. A failed sample is a result with status ``error``
and its message: the run goes on.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Mapping

import dagster as dg

from metric_ops.base import Sample
from metric_ops.plugins import Registry
from metric_ops.errors import FacetlakeError

SPEC_EXAMPLES = (
    "precomputed:outputs.jsonl, precomputed:column=system_output, hf:/models/tiny-llm, "
    "vllm:Qwen/Qwen2.5-0.5B-Instruct, api:gpt-4o-mini@https://api.openai.com/v1"
)


class ModelSpecError(FacetlakeError, ValueError):
    """A model spec string is malformed; the message shows a right one."""


class BackendError(FacetlakeError, RuntimeError):
    """A backend could not be built or used (missing file, missing column, ...)."""


class OutputIdsWarning(UserWarning):
    """A precomputed outputs file and its dataset share some sample ids but not all: the
    message names the file, the ids only in the file and the samples with no output."""


ID_FIX = ("check that the file belongs to this dataset and that its sample_id values are the dataset's ids "
          "(the dataset's id column is mapped with dataset: {mapping: {sample_id: COLUMN}})")


@dataclass
class OutputIdMatch:
    """How an outputs file's sample ids meet a dataset's (:meth:`PrecomputedBackend.match_ids`).

    ``unknown``: ids of the file that are not in the dataset (file order); ``missing``: the
    dataset's sample ids with no row in the file (dataset order)."""

    path: Path
    n_outputs: int
    n_samples: int
    unknown: list[str]
    missing: list[str]

    @property
    def matched(self) -> int:
        """Samples of the dataset that have a row in the file."""
        return self.n_samples - len(self.missing)

    def message(self) -> str | None:
        """One line for the user when some ids do not match (None when every id does)."""
        if not self.unknown and not self.missing:
            return None
        parts = [f"precomputed outputs file {self.path}: {self.matched} of the dataset's {self.n_samples} samples have an output"]
        if self.unknown:
            parts.append(f"{len(self.unknown)} of its {self.n_outputs} sample ids are not in the dataset "
                         f"(e.g. {_examples(self.unknown)}) and are ignored")
        if self.missing:
            parts.append(f"{len(self.missing)} {'sample has' if len(self.missing) == 1 else 'samples have'} no output (e.g. {_examples(self.missing)}): "
                         "they are unscored (status error), not scored as zero")
        if self.unknown:
            parts.append(ID_FIX)
        return "; ".join(parts)


def _examples(ids: list[str], n: int = 5) -> str:
    return ", ".join(repr(i) for i in ids[:n]) + (", ..." if len(ids) > n else "")


@dataclass
class GenerationRequest:
    """One request to a model: the rendered prompt for one sample."""

    sample: Sample
    prompt: str
    messages: list[dict[str, str]] | None = None
    # multiple-choice adapters in log-likelihood mode: score each continuation after
    # ``prompt`` instead of generating (see resources/prompting/adapters.py); labels name them
    continuations: list[str] | None = None
    labels: list[str] | None = None


@dataclass
class GenerationResult:
    """A model's answer to one request; ``output`` is None when ``status == "error"``.

    ``extra`` may hold ``token_logprobs``: a list with one dict per generated token,
    ``{"token": str, "logprob": float (natural log), "char_start": int, "char_end": int
    (offsets into ``output``), "top_logprobs": [{"token": str, "logprob": float}, ...]}``
    (written to the ``token_logprobs`` table), and ``choice_logprobs`` for
    multiple-choice log-likelihood requests.
    """

    sample_id: str
    output: str | None
    status: str = "ok"
    error: str | None = None
    latency_s: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ModelBackend(abc.ABC):
    """A model behind some transport. Subclasses set ``kind`` and ``locality``."""

    kind: ClassVar[str]
    locality: ClassVar[str] = "local"
    # whether generation time measures the model: False where outputs are read, not produced
    # (throughput and latency of reading a file mean nothing and are left out)
    measures_throughput: ClassVar[bool] = True
    #: a backend that generates (hf, vllm, api): stored outputs are kept and resumed, batches
    #: are written as they finish; ``False`` for backends that read outputs made elsewhere
    live: ClassVar[bool] = False

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        self.spec = spec
        self.runtime: dict[str, Any] = dict(runtime or {})

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """What identifies the model (checkpoint, endpoint, file hash); enters provenance."""

    @abc.abstractmethod
    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        """One result per request, in order. Per-request failures are results with status ``error``."""

    def loglikelihood(self, requests: list[GenerationRequest], settings: Mapping[str, Any]) -> list[GenerationResult]:
        """Score each request's ``continuations`` after its prompt (multiple choice).

        Backends that can return prompt log-probabilities override this; the default
        raises :class:`BackendError` naming the backends that can.
        """
        raise BackendError(
            f"the {self.kind} backend cannot score continuations (multiple_choice mode: loglikelihood); "
            "use hf:, vllm: or an api: server with /v1/completions echo+logprobs, or mode: joint"
        )


_PARSED_OUTPUTS: dict[tuple[str, int, int], dict[str, Any]] = {}


class PrecomputedBackend(ModelBackend):
    """Outputs produced elsewhere: a file (``precomputed:PATH``) or a sample field
    (``precomputed:column=NAME``, e.g. the real system outputs in SF-RES and QAGS, or
    HaluEval's ``chatgpt_response``).

    File formats: JSONL/JSON (objects with ``sample_id`` and ``output``), CSV or Parquet
    with those columns. A sample with no output is an ``error`` result naming it.
    """

    kind = "precomputed"
    measures_throughput = False

    def __init__(self, spec: str, runtime: Mapping[str, Any] | None = None) -> None:
        super().__init__(spec, runtime)
        target = spec.split(":", 1)[1]
        self.column: str | None = None
        self.path: Path | None = None
        if target.startswith("column="):
            self.column = target.split("=", 1)[1]
            if not self.column:
                raise ModelSpecError(f"{spec!r}: name the column, e.g. precomputed:column=system_output")
        else:
            self.path = Path(target).expanduser()
        self._outputs: dict[str, Any] | None = None

    def _load_file(self, keep: bool = False) -> dict[str, Any]:
        """``sample_id -> output`` from the outputs file; raises :class:`BackendError` naming
        the file and line for unreadable bytes (UTF-8 expected; a byte-order mark is
        dropped), malformed rows, a missing column, a repeated sample id or no rows.

        ``keep``: hold the parsed file for this process's next load of the same file state
        (path, size, modification time), which takes it: the CLI checks every outputs file
        before the run and the run's generations then read each again (issue 14)."""
        assert self.path is not None
        if not self.path.exists():
            raise BackendError(f"precomputed outputs file {self.path} does not exist")
        st = self.path.stat()
        key = (str(self.path.resolve()), st.st_size, st.st_mtime_ns)
        outputs = _PARSED_OUTPUTS.pop(key, None)
        if outputs is None:
            outputs = self._parse_file()
        if keep:
            _PARSED_OUTPUTS[key] = outputs
        return outputs

    def _parse_file(self) -> dict[str, Any]:
        from resources.datasets import DatasetError
        from resources.datasets.files import _read_table_file

        assert self.path is not None
        try:
            rows = _read_table_file(self.path, fix="re-save the outputs file as UTF-8 (it looks like {guess})")
        except DatasetError as exc:
            raise BackendError(str(exc)) from None
        if isinstance(rows, dict):
            rows = next((v for v in rows.values() if isinstance(v, list)), [])
        if not rows:
            header = getattr(rows, "header", None)
            raise BackendError(f"precomputed outputs file {self.path} has no rows"
                               + (f" (only a header: {', '.join(header)})" if header else "") + "; add one row per sample with sample_id and output")
        lines = getattr(rows, "lines", None)
        outputs: dict[str, Any] = {}
        first_line: dict[str, str] = {}
        for i, row in enumerate(rows, start=1):
            where = f"{self.path}:{lines[i - 1]}" if lines else f"{self.path}: row {i}"
            if not isinstance(row, dict):
                raise BackendError(f"{where}: row is {type(row).__name__}, expected an object with sample_id and output")
            for col in ("sample_id", "output"):
                if col not in row:
                    raise BackendError(f"{where}: column {col!r} not found; columns are: {', '.join(map(str, row))}")
            sid = str(row["sample_id"])
            if sid in outputs:
                raise BackendError(f"{where}: sample_id {sid!r} repeats the row at {first_line[sid]}; keep one output per sample")
            outputs[sid] = row["output"]
            first_line[sid] = f"line {lines[i - 1]}" if lines else f"row {i}"
        return outputs

    def check_file(self, keep: bool = False) -> int:
        """Read and check the outputs file now (before any run); returns its row count.
        Raises :class:`BackendError` as :meth:`_load_file`. No-op (0) for ``column=``.
        ``keep``: this process's run reads the file next (:meth:`_load_file`)."""
        if self.path is None:
            return 0
        self._outputs = self._load_file(keep=keep)
        return len(self._outputs)

    def match_ids(self, sample_ids: Iterable[str], keep: bool = False) -> OutputIdMatch | None:
        """Compare the outputs file's sample ids with the dataset's ``sample_ids`` (read the
        file first if not read yet). None for ``column=`` (outputs come from the samples).

        Raises :class:`BackendError` naming the file, how many of its ids are unknown, up to
        5 of them beside the dataset's, and the fix when no id matches (nothing would be
        scored); also as :meth:`_load_file` for an unreadable file. A partial match is
        returned for the caller to report (:meth:`OutputIdMatch.message`). ``keep``: as
        :meth:`check_file` (this process's run reads the file next)."""
        if self.path is None:
            return None
        if self._outputs is None:
            self._outputs = self._load_file(keep=keep)
        wanted = [str(s) for s in sample_ids]
        known = set(wanted)
        unknown = [sid for sid in self._outputs if sid not in known]
        missing = [sid for sid in wanted if sid not in self._outputs]
        match = OutputIdMatch(self.path, len(self._outputs), len(wanted), unknown, missing)
        if wanted and match.matched == 0:
            raise BackendError(
                f"precomputed outputs file {self.path}: none of its {len(self._outputs)} sample ids is in the dataset "
                f"({len(wanted)} samples): {len(unknown)} unknown ids, e.g. {_examples(unknown)}; the dataset's ids look like "
                f"{_examples(wanted, 3)}; {ID_FIX}; nothing was run")
        return match

    def identity(self) -> dict[str, Any]:
        if self.column is not None:
            return {"backend": "precomputed", "column": self.column}
        import hashlib

        digest = hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path and self.path.exists() else None
        return {"backend": "precomputed", "file": str(self.path), "file_sha256": digest}

    def generate(self, requests: Iterable[GenerationRequest], settings: Mapping[str, Any]) -> Iterator[GenerationResult]:
        if self.path is not None and self._outputs is None:
            self._outputs = self._load_file()
        for request in requests:
            sid = request.sample.sample_id
            if self.column is not None:
                value = request.sample.metadata.get(self.column)
                where = f"sample field {self.column!r}"
            else:
                value = (self._outputs or {}).get(sid)
                where = f"file {self.path}"
            if value is None:
                yield GenerationResult(sid, None, "error", f"no precomputed output for sample {sid} in {where}")
                continue
            if not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            yield GenerationResult(sid, value, "ok", tokens_out=len(value.split()))


def check_output_ids(models: Mapping[str, str], sample_ids: Iterable[str], keep: bool = False) -> list[OutputIdMatch]:
    """Check every ``precomputed:FILE`` model of ``models`` (slug -> spec) against the
    dataset's ``sample_ids`` before anything runs (:meth:`PrecomputedBackend.match_ids`).

    A partial match is an :class:`OutputIdsWarning` naming the model and the file (the CLI
    prints it as a one-line warning); no match at all raises :class:`BackendError` (model
    and file named, with the fix). A file that does not exist yet is not checked here (a
    demo or a script may write it after registration; the generations asset then reports
    each sample without an output as an error). Returns the matches of the files checked.
    ``keep``: this process's run reads the files next."""
    import warnings

    ids = [str(s) for s in sample_ids]
    found = []
    for slug, spec in models.items():
        if not spec.startswith("precomputed:") or spec.startswith("precomputed:column="):
            continue
        backend = PrecomputedBackend(spec)
        if backend.path is not None and not backend.path.exists():
            continue
        try:
            match = backend.match_ids(ids, keep=keep)
        except BackendError as exc:
            raise BackendError(f"model {slug}: {exc}") from None
        if match is not None:
            found.append(match)
            if match.message():
                warnings.warn(f"model {slug}: {match.message()}", OutputIdsWarning, stacklevel=2)
    return found


# one line per backend kind (spec prefix); a new backend adds its line here
BACKENDS: Registry[type[ModelBackend]] = Registry("backend", base=ModelBackend, builtins={
    "hf": "resources.backends.hf:HFBackend",                      # a local transformers causal LM (issue 7)
    "vllm": "resources.backends.vllm:VLLMBackend",                # vLLM's offline engine, imported lazily (issue 7)
    "api": "resources.backends.api:APIBackend",                   # an OpenAI-compatible endpoint (issue 7)
    "heuristic": "resources.backends.heuristic:HeuristicBackend",        # reference systems: lead-3, copy-input (issue 8)
    "lm_eval": "resources.lm_eval.bridge:LmEvalOutputBackend",   # lm-eval's outputs (issue 18)
})
BACKENDS.register("precomputed", PrecomputedBackend)                # defined above: rows read from a file


def parse_model_spec(spec: str) -> tuple[str, str]:
    """Split a spec into (kind, target); raises :class:`ModelSpecError` with examples."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelSpecError(f"model spec {spec!r} is malformed; write KIND:TARGET, e.g. {SPEC_EXAMPLES}")
    kind, target = spec.split(":", 1)
    if kind not in BACKENDS:
        raise ModelSpecError(f"unknown backend {kind!r} in {spec!r}; known: {BACKENDS.names()}; e.g. {SPEC_EXAMPLES}")
    if not target:
        raise ModelSpecError(f"model spec {spec!r} names no target; e.g. {SPEC_EXAMPLES}")
    if kind == "api" and "@" not in target:
        raise ModelSpecError(f"{spec!r}: an API spec is api:MODEL@BASE_URL, e.g. api:gpt-4o-mini@https://api.openai.com/v1")
    return kind, target


class ModelBackends(dg.ConfigurableResource):
    """Builds the backend for a model spec string; the one place backends are chosen.

    Every backend kind is listed in :data:`BACKENDS` (``hf``, ``vllm``, ``api``, ...).
    """

    def backend_for(self, spec: str, runtime: Mapping[str, Any] | None = None) -> ModelBackend:
        """The backend for ``spec`` with the evaluation's ``runtime`` options (batch size,
        concurrency, key variable name, ...); raises :class:`ModelSpecError` / :class:`BackendError`."""
        kind, _ = parse_model_spec(spec)
        return BACKENDS[kind](spec, runtime)


def render_prompt(adapter: Mapping[str, Any], sample: Sample) -> str:
    """The prompt for ``sample`` under a ``generation`` adapter's ``template``.

    Placeholders: ``{input}``, ``{context}`` (passages joined by blank lines),
    ``{references}``. Raises :class:`KeyError`-derived ``ValueError`` for an unknown one.
    """
    template = adapter.get("template", "{input}")
    try:
        return template.format(input=sample.input, context="\n\n".join(sample.context), references="\n".join(sample.references))
    except KeyError as exc:
        raise ValueError(f"prompt template uses unknown placeholder {exc}; known: {{input}}, {{context}}, {{references}}") from None


__all__ = [
    "SPEC_EXAMPLES",
    "ModelSpecError",
    "BackendError",
    "OutputIdMatch",
    "OutputIdsWarning",
    "GenerationRequest",
    "GenerationResult",
    "ModelBackend",
    "PrecomputedBackend",
    "check_output_ids",
    "BACKENDS",
    "parse_model_spec",
    "ModelBackends",
    "render_prompt",
]
