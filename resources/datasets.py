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
import codecs
import csv
import hashlib
import io
import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from metric_ops.base import Sample
from metric_ops.registry import Registry
from resources.dataset_values import checked_scale, rating_value, text_values
from metric_ops.errors import FacetlakeError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"


class DatasetError(FacetlakeError, ValueError):
    """A dataset file or row is malformed; the message names the file, line and fix."""


DATASETS: Registry[type["Dataset"]] = Registry("dataset kind", base="resources.datasets:Dataset", builtins={
    "bfcl": "resources.bfcl:BFCLDataset", "episodes": "resources.episodes:EpisodesDataset",
    "lm_eval": "resources.lm_eval_bridge:LmEvalDataset"})  # kinds defined in other modules, imported on first use

# byte-order marks, longest first (a UTF-32 LE mark starts like a UTF-16 LE one)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)
ENCODING_FIX = "set encoding: {guess} in the dataset spec (dataset: {{kind: ..., path: ..., encoding: {guess}}}) or re-save the file as UTF-8"


class TableRows(list):
    """Rows read from a file (a list), with ``lines[i]``: the 1-based line where row ``i``
    starts (None for formats without lines, e.g. Parquet) and ``header`` (CSV)."""

    lines: list[int] | None = None
    header: list[str] | None = None
    physical_lines: int | None = None


def _guess_encoding(data: bytes) -> str:
    """A likely single-byte encoding for bytes that are not UTF-8 (cp1252 when they decode
    as it, else latin-1, which decodes anything)."""
    try:
        data.decode("cp1252")
        return "cp1252"
    except UnicodeDecodeError:
        return "latin-1"


def read_text(path: Path, encoding: str | None = None, fix: str = ENCODING_FIX) -> str:
    """The text of ``path`` decoded strictly, without a byte-order mark.

    ``encoding``: any Python codec name; default UTF-8, or UTF-16/32 when the file starts
    with their byte-order mark. A UTF-8 BOM is always dropped. Bytes that do not decode
    raise :class:`DatasetError` naming the file, the line and column, the byte and the
    fix (``fix`` is formatted with ``guess``, a likely encoding); an unknown codec name
    raises :class:`DatasetError` too.
    """
    data = path.read_bytes()
    if encoding:
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            raise DatasetError(f"{path}: unknown encoding {encoding!r}; use a Python codec name such as utf-8, cp1252, latin-1, utf-16") from None
        chosen = "utf-8-sig" if name == "utf-8" else encoding
    else:
        chosen = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(chosen)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = " ".join(f"0x{b:02X}" for b in data[exc.start : min(exc.end, exc.start + 4)])
        label = "UTF-8" if chosen in ("utf-8", "utf-8-sig") else chosen
        raise DatasetError(
            f"{path}:{line}: not valid {label}: byte {bad} at column {column} cannot be decoded ({exc.reason}); "
            + fix.format(guess=_guess_encoding(data))
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _read_jsonl(path: Path, text: str) -> TableRows:
    rows, lines = TableRows(), []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
                                   "each line of a JSON-lines file holds one complete JSON object") from None
            lines.append(lineno)
    rows.lines = lines
    return rows


def _read_json_or_jsonl(path: Path, encoding: str | None = None, fix: str = ENCODING_FIX) -> Any:
    """A JSON document, or the rows of a JSON-lines file (``.jsonl``, or ``.json`` holding
    one object per line). Raises :class:`DatasetError` naming the file and line."""
    text = read_text(path, encoding, fix)
    if path.suffix.lower() == ".jsonl":
        return _read_jsonl(path, text)
    if not text.strip():
        return TableRows()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            return _read_jsonl(path, text)  # JSON lines saved as .json (BFCL does this)
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def _read_csv(path: Path, text: str) -> TableRows:
    """Rows of a CSV text as dicts, every record checked.

    Strict quoting (a quote left open to the end of the file, or text after a closing
    quote, is an error naming the line where the record starts); every row must have as
    many cells as the header; the header's names must be unique and non-empty. A quoted
    cell may hold line breaks: such records are counted, and when any exist a
    :class:`UserWarning` reports rows read against lines in the file, naming the
    records (and any line inside a cell that looks like a row of its own).
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows, lines = TableRows(), []
    header: list[str] | None = None
    multiline: list[tuple[int, int, bool]] = []
    while True:
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DatasetError(
                f"{path}:{start}: not valid CSV ({exc}, reading the row that starts on line {start}, "
                f"at line {reader.line_num}); close the quote opened on line {start}, and double a quote "
                'inside a quoted cell ("")'
            ) from None
        if not record or (len(record) == 1 and not record[0].strip() and header is not None and len(header) > 1):
            continue  # blank line
        if header is None:
            header = list(record)
            duplicates = sorted({c for c in header if header.count(c) > 1})
            if duplicates or "" in header:
                problem = f"repeats column(s) {', '.join(map(repr, duplicates))}" if duplicates else "has an empty column name"
                raise DatasetError(f"{path}:{start}: the header {problem}; give every column a unique name")
            continue
        if len(record) != len(header):
            raise DatasetError(
                f"{path}:{start}: row has {len(record)} cells but the header has {len(header)} columns "
                f"({', '.join(header)}); quote cells that contain commas, and check for a missing or extra delimiter"
            )
        end = reader.line_num
        if end > start:
            # a line inside a cell "looks like a row" when it parses to the header's width
            # and its first cell has the shape of this row's first cell (s1 / s2, 17 / 18)
            looks_like_row = any(
                len(cells := next(csv.reader([piece]), [])) == len(header) and _shape(cells[0]) == _shape(record[0]) != ""
                for cell in record if "\n" in cell or "\r" in cell
                for piece in cell.splitlines()[1:]
            )
            multiline.append((start, end, looks_like_row))
        rows.append(dict(zip(header, record)))
        lines.append(start)
    rows.lines, rows.header = lines, header
    rows.physical_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if multiline:
        suspicious = [f"line {a}" for a, b, looks in multiline if looks]
        spans = ", ".join(f"{a}-{b}" for a, b, _ in multiline[:5]) + (" ..." if len(multiline) > 5 else "")
        warnings.warn(
            f"{path}: {len(rows)} rows read from {rows.physical_lines - 1} lines after the header: {len(multiline)} "
            f"row(s) hold line breaks inside quoted cells (lines {spans})"
            + (f"; the cell opened on {', '.join(suspicious[:3])} contains lines that look like rows of their own: "
               "check that its quote is closed where the cell ends" if suspicious else ""),
            DatasetWarning, stacklevel=3,
        )
    return rows


def _shape(cell: str) -> str:
    """Character classes of a cell, runs collapsed: ``s12`` -> ``a9``, ``row-7`` -> ``a-9``."""
    classes = re.sub(r"[A-Za-z]+", "a", re.sub(r"\d+", "9", cell.strip()))
    return re.sub(r"\s+", " ", classes)


class DatasetWarning(UserWarning):
    """A dataset file loaded, but not one row per line (quoted line breaks); the message
    gives rows read against lines in the file."""


def _read_table_file(path: Path, encoding: str | None = None, fix: str = ENCODING_FIX) -> TableRows:
    """Rows of a CSV / Parquet / JSON / JSON-lines file as a :class:`TableRows` list.

    Text files are decoded with ``encoding`` (default UTF-8; a byte-order mark is
    dropped). Raises :class:`DatasetError` naming the file and line for any malformed
    input (bad bytes, bad JSON, bad CSV quoting or cell counts)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv(path, read_text(path, encoding, fix))
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return TableRows(pq.read_table(path).to_pylist())
        except Exception as exc:  # noqa: BLE001 - re-raised with the file named
            raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    if suffix in (".json", ".jsonl"):
        data = _read_json_or_jsonl(path, encoding, fix)
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
            if len(lists) > 1:
                raise DatasetError(f"{path}: the JSON object holds several arrays of rows; keep one (or use JSON lines)")
            if lists:
                data = lists[0]
            elif any(isinstance(v, list) for v in data.values()) and all(isinstance(v, list) and not v for v in data.values() if isinstance(v, list)):
                data = []  # {"rows": []}: no rows
            else:
                data = [data]  # one JSON-lines row saved as .json
        return data if isinstance(data, TableRows) else TableRows(data) if isinstance(data, list) else data
    raise DatasetError(f"{path}: unsupported file type {suffix!r}; use .csv, .parquet, .json or .jsonl")


def no_rows_message(path: Path, rows: Any) -> str:
    """The one-line refusal for a file without data rows (names the header when there is one)."""
    header = getattr(rows, "header", None)
    what = f"only a header: {', '.join(header)}" if header else "it is empty"
    return f"{path}: the file has no rows ({what}); add rows or point path: at the right file"


def _require(row: Mapping[str, Any], column: str, where: str) -> Any:
    if column not in row:
        raise DatasetError(
            f"{where}: column {column!r} not found; columns are: {', '.join(map(str, row))}"
        )
    return row[column]


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
