"""Type checks at the lake's boundary (issue 15, kind 7).

The lake used to check column *names* only: a ``value`` holding the string ``"0.5"`` was
converted on the way in, a ``True`` became ``1.0``, and a frame's string column was cast
to float without a word. Every write now checks each column against the table's schema
contract and refuses a mismatch with one line naming the table, the column, the row and
the fix. Conversions that lose nothing are allowed (an integer into a float column, a
narrower integer, ``large_string`` into ``string``, another timestamp unit); a string is
never read as a number, a number never as text, a mapping never as text.
"""

from __future__ import annotations

import datetime as dt
import numbers
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.types as pt


def _kind(t: pa.DataType) -> str:
    if pt.is_floating(t):
        return "float"
    if pt.is_integer(t):
        return "int"
    if pt.is_boolean(t):
        return "bool"
    if pt.is_string(t) or pt.is_large_string(t) or getattr(pt, "is_string_view", lambda _: False)(t):
        return "string"
    if pt.is_timestamp(t) or pt.is_date(t):
        return "timestamp"
    if pt.is_list(t) or pt.is_large_list(t) or getattr(pt, "is_list_view", lambda _: False)(t):
        return "list<" + _kind(t.value_type) + ">"
    if pt.is_null(t):
        return "null"
    return str(t)


_NAMES = {"float": "a number", "int": "an integer", "bool": "true/false", "string": "text", "timestamp": "a timestamp"}


def _expected(t: pa.DataType) -> str:
    kind = _kind(t)
    if kind.startswith("list<"):
        return f"a list of {_NAMES.get(kind[5:-1], kind[5:-1])}"
    return _NAMES.get(kind, kind)


def _fix(kind: str, value: Any) -> str:
    if isinstance(value, str) and kind in ("float", "int"):
        return "convert it where the row is built (float(...) / int(...)) after checking it; a string is never read as a number"
    if isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value)):
        return "pick the text field out of the object (e.g. map the column to its 'text' key) before writing"
    return "give the column the type of the table's schema contract (resources/lake/schemas.py SCHEMAS)"


def _cell_ok(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind == "int":
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "timestamp":
        return isinstance(value, (dt.datetime, dt.date))
    if kind.startswith("list<"):
        inner = kind[5:-1]
        return isinstance(value, (list, tuple)) and all(_cell_ok(inner, v) for v in value)
    return True


def _refuse(table: str, column: str, row: int, value: Any, field: pa.Field) -> None:
    from resources.lake.commit import LakeError

    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    kind = _kind(field.type)
    raise LakeError(f"table {table!r}, column {column!r}, row {row}: {shown} ({type(value).__name__}) is not "
                    f"{_expected(field.type)}; {_fix(kind, value)}")


def check_rows(table: str, schema: pa.Schema, rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse (:class:`resources.lake.tables.LakeError`) the first cell of ``rows`` whose Python
    type does not fit its column in ``schema``; rows are numbered from 1."""
    kinds = [(f.name, _kind(f.type), f) for f in schema]
    for i, row in enumerate(rows, start=1):
        for name, kind, field in kinds:
            value = row.get(name)
            if not _cell_ok(kind, value):
                _refuse(table, name, i, value, field)


def _compatible(have: pa.DataType, want: pa.DataType) -> bool:
    a, b = _kind(have), _kind(want)
    if a == "null" or a == b:
        return True
    if (a, b) == ("int", "float"):
        return True
    if a.startswith("list<") and b.startswith("list<"):
        return a[5:-1] in ("null", b[5:-1])
    return False


def check_table(table: str, schema: pa.Schema, data: pa.Table) -> None:
    """Refuse a frame whose column types do not fit ``schema`` (naming the first non-null
    row of the offending column); lossless widenings pass."""
    for field in schema:
        if field.name not in data.column_names:
            continue
        column = data.column(field.name)
        if _compatible(column.type, field.type):
            continue
        if _kind(column.type) == "float" and _kind(field.type) == "int":
            import pyarrow.compute as pc

            finite = pc.drop_null(column)
            if len(finite) == 0 or pc.all(pc.equal(finite, pc.floor(finite))).as_py():
                continue  # whole numbers computed as floats (e.g. a count): lossless
        values = column.to_pylist()
        row = next((i for i, v in enumerate(values, start=1) if v is not None), 1)
        _refuse(table, field.name, row, values[row - 1] if values else None, field)


def string_list_column(name: str, seqs: Sequence[Sequence[str]]) -> "Any":
    """A polars ``List(String)`` Series of ``seqs`` (one list per row; an empty sequence is an
    empty list, never null), built from one flat string column and its offsets.

    Same values as ``pl.Series(name, [list(s) for s in seqs], dtype=pl.List(pl.String))``,
    which converts every inner list through Python (about 1 s per 100k rows); this costs a
    few milliseconds. Raises ``TypeError`` when an element is not a string (or None)."""
    import itertools

    import numpy as np
    import polars as pl

    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = pl.Series(list(itertools.chain.from_iterable(seqs)), dtype=pl.String, strict=True)
    # string_view values: no re-validation of the text buffers when the list is assembled
    values = flat.to_arrow(compat_level=pl.CompatLevel.newest())
    # offsets from their buffer: pa.array(ndarray) would import pandas
    offsets_array = pa.Array.from_buffers(pa.int64(), offsets.size, [None, pa.py_buffer(offsets)])
    return pl.Series(name, pa.LargeListArray.from_arrays(offsets_array, values))


__all__ = ["check_rows", "check_table", "string_list_column"]
