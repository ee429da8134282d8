"""Reading dataset files: text decoding (byte-order marks, a named encoding, a one-line
fix when bytes do not decode), JSON / JSON-lines / CSV / Parquet readers that name the file
and line of any malformed record, and :class:`DatasetError` / :class:`DatasetWarning`.

Part of :mod:`resources.datasets` (the package face exports the public names).
"""

from __future__ import annotations

import codecs
import csv
import errno
import io
import json
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Any, Mapping

from metric_ops.errors import FacetlakeError


class DatasetError(FacetlakeError, ValueError):
    """A dataset file or row is malformed; the message names the file, line and fix."""


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


#: the most bytes facetlake reads from one input file (dataset, spec, outputs) unless
#: $FACETLAKE_MAX_INPUT_BYTES says otherwise (issue 26, fault 4)
MAX_INPUT_BYTES_ENV = "FACETLAKE_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 4 << 30
#: the most nodes a YAML document may hold once its aliases are expanded
MAX_YAML_NODES = 1_000_000


def max_input_bytes() -> int:
    """The input size bound: ``$FACETLAKE_MAX_INPUT_BYTES`` (digits) or 4 GiB."""
    raw = os.environ.get(MAX_INPUT_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    if not raw.isdigit() or int(raw) <= 0:
        raise DatasetError(f"{MAX_INPUT_BYTES_ENV}={raw!r} is not a positive number of bytes, e.g. {DEFAULT_MAX_INPUT_BYTES}")
    return int(raw)


def check_input_file(path: Path) -> int:
    """The size of ``path`` once it is known to be a regular file of bounded size.

    Raises :class:`DatasetError` naming the path for a missing file, a symlink loop, a
    directory, anything that is not a regular file (a device such as ``/dev/zero``, a FIFO
    that would block for ever, a socket; also through a symlink) and a file larger than
    :func:`max_input_bytes` (with the override)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DatasetError(f"{path} does not exist; check the path") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DatasetError(f"{path}: a symlink loop (the link points back to itself); point it at a file") from None
        raise DatasetError(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DatasetError(f"{path} is a directory; name a file in it (.jsonl, .json, .csv, .parquet, .yaml)")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket or other special file"
        raise DatasetError(f"{path} is {kind}, not a regular file; facetlake reads inputs from regular files only "
                           "(copy the data to a file first)")
    cap = max_input_bytes()
    if st.st_size > cap:
        raise DatasetError(f"{path} is {st.st_size:,} bytes, over the {cap:,}-byte input limit; raise it with "
                           f"{MAX_INPUT_BYTES_ENV}=BYTES or split the file")
    return st.st_size


def read_input_bytes(path: Path) -> bytes:
    """The bytes of a regular input file, at most :func:`max_input_bytes` of them (a file
    that grows past the bound while read is refused too); see :func:`check_input_file`."""
    check_input_file(path)
    cap = max_input_bytes()
    with open(path, "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise DatasetError(f"{path} grew past the {cap:,}-byte input limit while it was read; raise {MAX_INPUT_BYTES_ENV} "
                           "or read a finished file")
    return data


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load`` with a key repeated in one mapping refused (naming its line) and
    aliases bounded: a document that expands to more than
    :data:`MAX_YAML_NODES` nodes (an alias bomb, anywhere in the document) raises
    :class:`DatasetError` instead of growing without bound when it is later copied or
    serialised. Raises ``yaml.YAMLError`` for invalid YAML, as safe_load does."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """SafeLoader that refuses a key repeated in one mapping (YAML would keep the last)."""

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden on purpose
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:  # a list or mapping as a key: SafeLoader reports it itself
                continue
            if key in seen:
                raise DatasetError(f"{where}:{key_node.start_mark.line + 1}: the key {key!r} appears twice in one mapping; "
                                   "keep one (YAML would keep the last silently)")
            seen.add(key)
        return loader.construct_mapping(node, deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    sizes: dict[int, int] = {}

    def expanded(node: Any) -> int:  # nodes once every alias is expanded, each shared object counted once per use
        key = id(node)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # a recursive alias counts once, never loops
        if isinstance(node, dict):
            total = 1 + sum(expanded(k) + expanded(v) for k, v in node.items())
        elif isinstance(node, list):
            total = 1 + sum(expanded(v) for v in node)
        else:
            total = 1
        sizes[key] = total
        if total > MAX_YAML_NODES:
            raise DatasetError(f"{where}: the YAML expands to more than {MAX_YAML_NODES:,} values through its aliases "
                               "(&anchor / *alias); write the values out or use fewer aliases")
        return total

    try:
        expanded(data)
    except RecursionError:
        raise DatasetError(f"{where}: the YAML is nested too deeply to read; flatten it") from None
    return data


_SPREADSHEETS = ((b"PK\x03\x04", "an .xlsx/.ods spreadsheet (a zip archive)"), (b"\xd0\xcf\x11\xe0", "an Excel .xls spreadsheet"))


def _refuse_binary(path: Path, data: bytes, encoding: str | None) -> None:
    """Name what a file is when it is not text at all: a spreadsheet saved under a text
    name, or UTF-16 without a byte-order mark (every other byte NUL), instead of an
    encoding hint that cannot help."""
    for magic, what in _SPREADSHEETS:
        if data.startswith(magic):
            raise DatasetError(f"{path}: this is {what}, not text; export it as CSV (File > Save As > CSV UTF-8) "
                               "or save it as .parquet")
    if encoding or any(data.startswith(bom) for bom, _ in _BOMS):
        return
    head = data[:4096]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        odd_nuls = head[1::2].count(0) > head[0::2].count(0)
        guess = "utf-16-le" if odd_nuls else "utf-16-be"
        raise DatasetError(f"{path}: looks like UTF-16 without a byte-order mark (a NUL byte every other byte); set "
                           f"encoding: {guess} in the dataset spec or re-save the file as UTF-8")


def read_text(path: Path, encoding: str | None = None, fix: str = ENCODING_FIX) -> str:
    """The text of ``path`` decoded strictly, without a byte-order mark.

    ``encoding``: any Python codec name; default UTF-8, or UTF-16/32 when the file starts
    with their byte-order mark. A UTF-8 BOM is always dropped. Bytes that do not decode
    raise :class:`DatasetError` naming the file, the line and column, the byte and the
    fix (``fix`` is formatted with ``guess``, a likely encoding); an unknown codec name
    raises :class:`DatasetError` too.
    """
    data = read_input_bytes(path)
    _refuse_binary(path, data, encoding)
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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing a repeated key (JSON itself keeps the last silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(FacetlakeError, ValueError):
    """A key repeated in one JSON object (raised inside the parser, re-raised as DatasetError with the line)."""


def _parse_json(text: str, where: str) -> Any:
    """``json.loads`` with the faults a bare parser reports badly named at ``where`` (file
    and line): a key repeated in one object, nesting too deep for the parser (a bare
    RecursionError), and a lone surrogate escape (``"\\ud800"``, which no table can store)."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise DatasetError(f"{where}: the key {exc.args[0]!r} appears twice in one object; keep one (JSON would keep "
                           "the last silently)") from None
    except RecursionError:
        raise DatasetError(f"{where}: nested too deeply to read (over about 1,000 levels of arrays or objects); "
                           "flatten the record") from None
    if "\\ud" in text.lower():  # only then can a lone surrogate be in the parsed strings
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise DatasetError(f"{where}: holds a lone surrogate escape (\\ud800-\\udfff without its pair), which is "
                               "not text; fix the escape or drop the character") from None
    return value


def _read_jsonl(path: Path, text: str) -> TableRows:
    rows, lines = TableRows(), []
    # lines end at "\n" only, as JSON Lines says (https://jsonlines.org): str.splitlines would also
    # split at U+2028, U+2029 and U+0085, which JSON allows raw inside a string (issue 26, fault 7)
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            try:
                rows.append(_parse_json(line, f"{path}:{lineno}"))
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
        return _parse_json(text, str(path))
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

        check_input_file(path)
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
        if not isinstance(data, (list, dict)):
            raise DatasetError(f"{path}: the JSON document is a single {type(data).__name__} value ({_short_value(data)}), "
                               "not rows; write an array of objects ([{...}, {...}]) or one object per line (.jsonl)")
        return data if isinstance(data, TableRows) else TableRows(data) if isinstance(data, list) else data
    raise DatasetError(f"{path}: unsupported file type {suffix!r}; use .csv, .parquet, .json or .jsonl")


def _short_value(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


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
