"""Checked conversion of dataset cells into sample fields (issue 15, kind 7).

A reference cell holding an object (``{"text": "x"}``) used to be stored as its Python
text ``"{'text': 'x'}"``, and ratings far outside their scale (-3, 1e9 on a 1-5 scale)
went in without a word. Here a text field takes text (strings; numbers are written as
text) or a list of them, and a rating takes a finite number (or a numeric cell of a
CSV file, where every cell is text) inside the declared ``rating_scale``. Anything else
is a :class:`~resources.datasets.DatasetError` naming the column, the value and the fix
(the caller adds the file and row).
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any, Sequence

from resources.datasets.files import DatasetError


def _error(message: str) -> Exception:
    return DatasetError(message)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_values(value: Any, column: str) -> list[str]:
    """The texts of one cell of a text column (``references`` / ``context``): a string (a
    JSON list written as a string is read as that list), a number (as text), or a list of
    those. Raises ``DatasetError`` for an object, a nested list or a boolean."""
    if value is None:
        return []
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, numbers.Real) and not isinstance(item, bool):
            out.append(str(item))
        elif item is None:
            continue
        else:
            kind = "an object" if isinstance(item, dict) else type(item).__name__
            raise _error(f"column {column!r} holds {kind} {_shown(item)}, not text; map the column to a text field "
                         f"(e.g. flatten {column}.text into its own column) or write the text itself")
    return out


def rating_value(value: Any, column: str, scale: Sequence[float] | None = None) -> float:
    """One rating as a float (NaN for an empty cell). A number, or a numeric string (CSV
    cells are text); must be finite and, with a declared ``scale`` ``[low, high]``, inside it.
    Raises ``DatasetError`` naming the column, the value and the fix."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise _error(f"rating column {column!r} holds {_shown(value)} ({type(value).__name__}), not a number; "
                     "write the rating as a number")
    try:
        number = float(value)
    except ValueError:
        raise _error(f"rating column {column!r} holds {_shown(value)}, not a number; write the rating as a number "
                     "(leave the cell empty when there is none)") from None
    if math.isnan(number):
        return number
    if math.isinf(number):
        raise _error(f"rating column {column!r} holds {_shown(value)}, which is not finite; fix the value or leave the cell empty")
    if scale is not None:
        low, high = float(scale[0]), float(scale[1])
        if not low <= number <= high:
            raise _error(f"rating column {column!r} holds {number:g}, outside the declared rating scale [{low:g}, {high:g}]; "
                         "fix the value, or widen rating_scale in the dataset block if the scale is wider")
    return number


def checked_scale(scale: Any) -> tuple[float, float] | None:
    """A dataset's ``rating_scale: [low, high]`` (None when unset); raises ``DatasetError`` when malformed."""
    if scale is None:
        return None
    ok = isinstance(scale, (list, tuple)) and len(scale) == 2 and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in scale) and scale[0] < scale[1]
    if not ok:
        raise _error(f"rating_scale must be [low, high] with low < high (e.g. rating_scale: [1, 5]), got {_shown(scale)}")
    return float(scale[0]), float(scale[1])


__all__ = ["checked_scale", "rating_value", "text_values"]
