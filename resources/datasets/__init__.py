"""The dataset registry: a dataset is a class with ``normalize(row) -> Sample``.

Built in: SelfAware, HaluEval (general and QA formats), the UniEval human-rated files
(SF-RES, QAGS), SQuAD v2 (local file or Hugging Face cache), and a generic file dataset
(CSV / Parquet / JSON / JSONL) with a column mapping. New datasets subclass
:class:`Dataset`; defining the class registers it under its ``kind``.

A dataset's identity in the fingerprint is its content hash (:func:`content_hash`) over
the normalised samples, never its name or path.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from metric_ops.base import Sample
from metric_ops.plugins import Registry
from resources.datasets.values import checked_scale, rating_value, text_values

from resources.datasets.files import (
    ENCODING_FIX,
    DatasetError,
    DatasetWarning,
    TableRows,
    _read_json_or_jsonl,
    _read_table_file,
    _require,
    MAX_INPUT_BYTES_ENV,
    check_input_file,
    load_yaml,
    no_rows_message,
    read_input_bytes,
    read_text,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = PROJECT_ROOT / "data"

# kinds defined in other modules, imported on first use (one line each; kinds defined below register themselves)
DATASETS: Registry[type["Dataset"]] = Registry("dataset kind", base="resources.datasets:Dataset", builtins={
    "bfcl": "resources.datasets.bfcl:BFCLDataset",
    "episodes": "resources.agents.episodes:EpisodesDataset",
    "lm_eval": "resources.lm_eval.bridge:LmEvalDataset",
})


@dataclass
class Dataset:
    """Base class: a dataset source and its row normaliser.

    Subclasses set ``kind`` (registry key), ``version`` (bump when ``normalize`` changes
    its output), ``default_path`` (relative to the project's ``data/`` folder) and
    implement :meth:`normalize`. ``load()`` returns the samples; rows that cannot be
    normalised raise :class:`DatasetError` naming the file, row and missing column.
    """

    path: str | None = None
    name: str | None = None
    limit: int | None = None
    encoding: str | None = None
    _row_number: int = 0  # 1-based number of the row being normalised (set by load)

    kind: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    default_path: ClassVar[str | None] = None
    rating_range: ClassVar[tuple[float, float] | None] = None
    required_fields: ClassVar[tuple[str, ...]] = ("sample_id", "input")
    # the sample field that groups items into clusters when the spec names none (issue 28;
    # docs/analysis.md "Clusters"): a samples column (input, context) or a metadata key
    default_cluster: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            DATASETS[cls.kind] = cls

    # -------------------------------------------------------------- overridable
    def resolved_path(self) -> Path:
        """The file this dataset reads; raises :class:`DatasetError` when none is set."""
        if self.path:
            return Path(os.path.expanduser(self.path))
        if self.default_path:
            return DATA_DIR / self.default_path
        raise DatasetError(f"dataset kind {self.kind!r} needs a path (set path: in the evaluation config)")

    def rows(self) -> list[Any]:
        """Raw rows from the file (list of dicts)."""
        path = self.resolved_path()
        if path.is_symlink():
            check_input_file(path)  # a dangling link or a loop is named as what it is
        if not path.exists():
            raise DatasetError(f"dataset file {path} does not exist; check the path in the evaluation config")
        return _read_table_file(path, self.encoding)

    def normalize(self, row: Mapping[str, Any]) -> Sample:  # pragma: no cover - abstract
        """Turn one raw row into a :class:`Sample`."""
        raise NotImplementedError

    # -------------------------------------------------------------- shared
    @property
    def display_name(self) -> str:
        """The dataset's name in tables (``name`` or the kind)."""
        return self.name or self.kind

    def load(self) -> list[Sample]:
        """Every row normalised, in file order (first ``limit`` rows when set)."""
        path = self.resolved_path()
        rows = self.rows()
        if not rows:
            raise DatasetError(no_rows_message(path, rows))
        lines = getattr(rows, "lines", None)
        if self.limit is not None:
            if self.limit < 1:
                raise DatasetError(f"{path}: limit: {self.limit} selects no rows; use a positive limit or drop it")
            rows = rows[: self.limit]
        samples = []
        self.__dict__.pop("_seen_ids", None)
        for i, row in enumerate(rows):
            where = f"{path}:{lines[i]}: row {i + 1}" if lines and i < len(lines) else f"{path}: row {i + 1}"
            if not isinstance(row, Mapping):
                raise DatasetError(f"{where} is {type(row).__name__}, expected an object")
            self._row_number = i + 1
            try:
                samples.append(self.normalize(row))
            except DatasetError as exc:
                raise DatasetError(f"{where}: {exc}") from None
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"{where}: {exc}") from None
        return samples

    def config(self) -> dict[str, Any]:
        """The dataset's configuration as given (kind, path, name, limit, mapping)."""
        return {"kind": self.kind, "path": self.path, "name": self.display_name, "limit": self.limit, "version": self.version,
                **({"encoding": self.encoding} if self.encoding else {})}


def _ratings(raw: Any, where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)  # QAGS ships its ratings as a Python dict repr
        except (ValueError, SyntaxError):
            raise DatasetError(f"{where}: ratings {raw!r} are neither a mapping nor a mapping literal") from None
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where}: ratings must be a mapping of name -> number, got {type(raw).__name__}")
    return {str(k): (float(v) if v is not None else float("nan")) for k, v in raw.items()}


class UniEvalDataset(Dataset):
    """UniEval-packaged human-rated files (Zhong et al., 2022): SF-RES, QAGS, SummEval...

    Row: ``{doc_id, [system_id], source, reference, system_output, scores: {name: rating}}``.
    ``input`` = source, ``references`` = [reference], ``context`` = [source] (the article
    for factual-consistency metrics), ``metadata.system_output`` = the real system
    output (read by the precomputed backend's ``column=system_output``), ratings = scores.
    """

    kind = "unieval"
    required_fields = ("sample_id", "input", "references")

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        doc_id = str(_require(row, "doc_id", "unieval row"))
        system_id = row.get("system_id")
        source = str(_require(row, "source", "unieval row"))
        reference = row.get("reference")
        return Sample(
            sample_id=f"{doc_id}" if system_id in (None, "", 0, "0") else f"{doc_id}-{system_id}",
            input=source,
            references=(str(reference),) if reference not in (None, "") else (),
            context=(source,),
            metadata={"doc_id": doc_id, "system_id": system_id, "system_output": row.get("system_output")},
            ratings=_ratings(row.get("scores"), f"doc {doc_id}"),
        )


class SFRESDataset(UniEvalDataset):
    """SF-RES data-to-text (Wen et al., 2015) from UniEval: ratings 1-6 (informativeness,
    naturalness, overall)."""

    kind = "sfres"
    default_path = "unieval/sfres.json"
    rating_range = (1.0, 6.0)


class QAGSDataset(UniEvalDataset):
    """QAGS-CNNDM (Wang et al., 2020) from UniEval: human consistency in [0, 1]."""

    kind = "qags"
    default_path = "unieval/qags_cnndm.json"
    rating_range = (0.0, 1.0)
    required_fields = ("sample_id", "input", "context")


class SelfAwareDataset(Dataset):
    """SelfAware (Yin et al., 2023): ``{"example": [{question_id, question, answer, answerable, source}]}``.

    Answerable questions carry their gold answers as references; unanswerable ones have
    no references and ``metadata.answerable = False`` (abstention checks read it).
    """

    kind = "selfaware"
    default_path = "selfaware/SelfAware.json"

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        qid = str(_require(row, "question_id", "selfaware row"))
        answers = row.get("answer") or []
        return Sample(
            sample_id=qid,
            input=str(_require(row, "question", f"question {qid}")),
            references=tuple(str(a) for a in answers),
            metadata={"answerable": bool(row.get("answerable")), "source": row.get("source")},
        )


class HaluEvalDataset(Dataset):
    """HaluEval (Li et al., 2023), general or QA format, detected per row.

    General: ``{ID, user_query, chatgpt_response, hallucination: yes/no, hallucination_spans}``;
    the real ChatGPT response is ``metadata.chatgpt_response`` and the human label is a
    rating ``hallucination`` (1.0 = hallucinated).
    QA: ``{knowledge, question, right_answer, hallucinated_answer}``; references =
    [right_answer], context = [knowledge], ``metadata.hallucinated_answer``.
    """

    kind = "halueval"
    default_path = "halueval/general_data.jsonl"
    rating_range = (0.0, 1.0)

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        if "user_query" in row:
            # one upstream row has an empty ID and one ID occurs twice: fall back to the
            # (stable) row number for an empty ID, suffix a repeated one with it
            sid = str(_require(row, "ID", "halueval general row")) or f"row{self._row_number}"
            seen = self.__dict__.setdefault("_seen_ids", set())
            if sid in seen:
                sid = f"{sid}-row{self._row_number}"
            seen.add(sid)
            label = str(_require(row, "hallucination", f"ID {sid}")).strip().lower()
            if label not in ("yes", "no"):
                raise DatasetError(f"ID {sid}: hallucination label must be 'yes' or 'no', got {label!r}")
            return Sample(
                sample_id=sid,
                input=str(row["user_query"]),
                metadata={
                    "format": "general",
                    "chatgpt_response": row.get("chatgpt_response"),
                    "hallucination_spans": list(row.get("hallucination_spans") or []),
                },
                ratings={"hallucination": 1.0 if label == "yes" else 0.0},
            )
        if "question" in row and "right_answer" in row:
            sid = str(row.get("ID") or row.get("id") or hashlib.sha256(str(row["question"]).encode()).hexdigest()[:16])
            return Sample(
                sample_id=sid,
                input=str(row["question"]),
                references=(str(row["right_answer"]),),
                context=(str(row["knowledge"]),) if row.get("knowledge") else (),
                metadata={"format": "qa", "hallucinated_answer": row.get("hallucinated_answer")},
            )
        raise DatasetError(
            f"row is neither HaluEval general (user_query, chatgpt_response, hallucination) nor QA "
            f"(knowledge, question, right_answer, hallucinated_answer); columns are: {', '.join(map(str, row))}"
        )


class SquadV2Dataset(Dataset):
    """SQuAD v2.0 (Rajpurkar et al., 2018) from a local ``dev-v2.0.json`` or the Hugging
    Face datasets cache (``rajpurkar/squad_v2`` parquet/arrow files) when present.

    Unanswerable questions get the single reference ``""`` so SQuAD v2's rule applies
    (an empty prediction matches). ``context`` = [paragraph].
    """

    kind = "squad_v2"
    default_cluster = "context"  # several questions per passage

    def resolved_path(self) -> Path:
        if self.path:
            return Path(os.path.expanduser(self.path))
        cache = Path(os.environ.get("HF_DATASETS_CACHE", Path.home() / ".cache" / "huggingface" / "datasets"))
        for pattern in ("rajpurkar___squad_v2/**/*validation*.arrow", "**/squad_v2/**/*validation*.parquet"):
            found = sorted(cache.glob(pattern))
            if found:
                return found[0]
        raise DatasetError(
            "SQuAD v2 not found: pass path: /path/to/dev-v2.0.json (or a validation parquet), or "
            f"download rajpurkar/squad_v2 with the datasets library so it lands in {cache}"
        )

    def rows(self) -> list[Any]:
        path = self.resolved_path()
        if path.suffix == ".arrow":
            import pyarrow as pa

            with pa.memory_map(str(path)) as source:
                return pa.ipc.open_stream(source).read_all().to_pylist()
        data = _read_table_file(path, self.encoding) if path.suffix != ".json" else _read_json_or_jsonl(path, self.encoding)
        if isinstance(data, dict) and "data" in data:  # official SQuAD JSON
            rows = []
            for article in data["data"]:
                for paragraph in article["paragraphs"]:
                    for qa in paragraph["qas"]:
                        rows.append(
                            {
                                "id": qa["id"],
                                "title": article.get("title"),
                                "context": paragraph["context"],
                                "question": qa["question"],
                                "answers": {"text": [a["text"] for a in qa.get("answers", [])]},
                            }
                        )
            return rows
        return data

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        sid = str(_require(row, "id", "squad_v2 row"))
        answers = row.get("answers") or {}
        texts = list(answers.get("text", [])) if isinstance(answers, Mapping) else list(answers)
        return Sample(
            sample_id=sid,
            input=str(_require(row, "question", sid)),
            references=tuple(texts) if texts else ("",),
            context=(str(row.get("context", "")),),
            metadata={"title": row.get("title"), "answerable": bool(texts)},
        )


@dataclass
class FileDataset(Dataset):
    """Generic CSV / Parquet / JSON / JSONL file with a column mapping.

    ``mapping`` maps Sample fields to columns: ``sample_id``, ``input`` (required),
    ``references`` / ``context`` (a column holding a string or a list of strings; a
    list of several columns is also accepted), ``ratings`` (list of columns read as
    human ratings). Unmapped columns go to ``metadata``. Without a ``sample_id`` column
    the 1-based row number is the id.
    """

    mapping: Mapping[str, Any] | None = None
    rating_scale: Sequence[float] | None = None  # [low, high]: a rating outside it is an error naming row and column

    kind: ClassVar[str] = "file"

    def _columns(self, field_name: str) -> list[str]:
        value = (self.mapping or {}).get(field_name)
        if value is None:
            return []
        return [value] if isinstance(value, str) else list(value)

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        mapping = dict(self.mapping or {})
        where = os.path.basename(self.path) if self.path else self.resolved_path().name  # per row: no Path objects
        input_col = mapping.get("input", "input")
        if input_col not in row:
            raise DatasetError(
                f"dataset column {input_col!r} not found; columns are: {', '.join(map(str, row))}; "
                "map one with mapping: {input: COLUMN}"
            )
        sid_col = mapping.get("sample_id")
        if sid_col is not None:
            sample_id = str(_require(row, sid_col, where))
        else:
            sample_id = str(row["id"]) if "id" in row else str(getattr(self, "_row_number", 0))

        def texts(field_name: str) -> tuple[str, ...]:  # objects are refused, never stored as their repr (issue 15)
            return tuple(t for col in self._columns(field_name) for t in text_values(_require(row, col, where), col))

        scale = checked_scale(self.rating_scale)
        ratings = {col: rating_value(_require(row, col, where), col, scale) for col in self._columns("ratings")}
        used = {input_col, sid_col, *self._columns("references"), *self._columns("context"), *self._columns("ratings")}
        return Sample(
            sample_id=sample_id,
            input=str(row[input_col]),
            references=texts("references"),
            context=texts("context"),
            metadata={k: v for k, v in row.items() if k not in used},
            ratings=ratings,
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "mapping": dict(self.mapping or {}),
                **({"rating_scale": list(self.rating_scale)} if self.rating_scale is not None else {})}


def default_cluster(kind: str | None) -> str | None:
    """The cluster field a dataset kind declares (None for an unknown kind or none)."""
    return DATASETS[kind].default_cluster if kind in DATASETS else None


def make_dataset(spec: Mapping[str, Any]) -> Dataset:
    """Build a dataset from its config mapping ``{kind, path?, name?, limit?, mapping?}``.

    Raises :class:`DatasetError` for an unknown kind, listing the known ones.
    """
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in DATASETS:
        raise DatasetError(DATASETS.unknown_message(kind))
    cls = DATASETS[kind]
    try:
        return cls(**spec)
    except TypeError as exc:
        raise DatasetError(f"dataset {kind!r}: {exc}") from None


def sample_to_record(sample: Sample) -> dict[str, Any]:
    """A sample as a JSON-ready dict (the content that the dataset hash covers)."""
    return {
        "sample_id": sample.sample_id,
        "input": sample.input,
        "references": list(sample.references),
        "context": list(sample.context),
        "metadata": dict(sample.metadata),
        "ratings": {k: (None if v != v else v) for k, v in sample.ratings.items()},
    }


def content_hash(samples: list[Sample]) -> str:
    """SHA-256 (64 lowercase hex) over the canonical JSON of the normalised samples, in order.

    Two files with the same content in another format, name or path hash the same; any
    change to a sample's text, references, context, metadata or ratings changes it.
    """
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(json.dumps(sample_to_record(sample), sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


__all__ = [
    "checked_scale",
    "rating_value",
    "text_values",
    "ENCODING_FIX",
    "DatasetError",
    "DatasetWarning",
    "TableRows",
    "no_rows_message",
    "read_text",
    "MAX_INPUT_BYTES_ENV",
    "check_input_file",
    "load_yaml",
    "read_input_bytes",
    "PROJECT_ROOT",
    "DATA_DIR",
    "DATASETS",
    "Dataset",
    "UniEvalDataset",
    "SFRESDataset",
    "QAGSDataset",
    "SelfAwareDataset",
    "HaluEvalDataset",
    "SquadV2Dataset",
    "FileDataset",
    "default_cluster",
    "make_dataset",
    "sample_to_record",
    "content_hash",
]
