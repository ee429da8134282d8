"""Token log-probability records shared by every live backend.

A record is one generated token of one sample::

    {"token": " Paris", "logprob": -0.105, "char_start": 10, "char_end": 16,
     "top_logprobs": [{"token": " Paris", "logprob": -0.105}, {"token": " Lyon", "logprob": -2.9}]}

``logprob`` is a natural logarithm of the model's probability of the token (the raw,
untempered distribution for the transformers backend; what the server returns for an
API; vLLM's sampler log-probabilities). ``char_start``/``char_end`` are offsets into the
stored ``output`` text, so later analyses (hallucination spans, annotation spans) can
join tokens to characters. A ``logprob`` is stored exactly as the backend gave it,
``-inf`` (probability 0) included: it travels through Arrow and Delta as a float64
``-inf`` (only a missing value is null), so no token's value is dropped at ingestion. Where a token's text cannot be located in the output (a
partial UTF-8 byte, a special token) its span is empty (``char_start == char_end``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

Top = Sequence[tuple[str, float]]


def align_pieces(pieces: Sequence[str], output: str) -> list[tuple[int, int]]:
    """Character spans of consecutive token texts ``pieces`` inside ``output``.

    Each piece is searched for at the running cursor (a piece that does not start there
    is searched for in the next 8 characters, to tolerate servers that normalise
    whitespace); an unlocatable piece gets an empty span at the cursor. Spans are
    non-decreasing and within ``[0, len(output)]``.
    """
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in pieces:
        if piece and output.startswith(piece, cursor):
            start = cursor
        elif piece:
            found = output.find(piece, cursor, cursor + 8 + len(piece))
            start = found if found >= 0 else -1
        else:
            start = -1
        if start < 0:
            spans.append((cursor, cursor))
            continue
        end = start + len(piece)
        spans.append((start, end))
        cursor = end
    return spans


def make_records(
    pieces: Sequence[str],
    logprobs: Sequence[float | None],
    tops: Sequence[Top] | None,
    output: str,
    spans: Sequence[tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """Records (see module docstring) for one output; ``spans`` default to :func:`align_pieces`."""
    spans = list(spans) if spans is not None else align_pieces(pieces, output)
    records = []
    for i, piece in enumerate(pieces):
        lp = logprobs[i]
        top = tops[i] if tops is not None and i < len(tops) else ()
        records.append(
            {
                "token": piece,
                # kept as given: -inf is probability 0, a value (never stored as null);
                # NaN/+inf are kept too, so the metrics report them instead of skipping
                "logprob": None if lp is None else float(lp),
                "char_start": int(spans[i][0]),
                "char_end": int(spans[i][1]),
                "top_logprobs": [{"token": t, "logprob": float(v)} for t, v in top if v is not None and math.isfinite(float(v))],
            }
        )
    return records


def table_rows(records: Iterable[dict[str, Any]], *, model: str, fingerprint: str, sample_id: str, run_id: str) -> list[dict[str, Any]]:
    """Rows for the ``token_logprobs`` table (``top_logprobs`` serialised as a JSON list)."""
    return [
        {
            "model": model,
            "fingerprint": fingerprint,
            "sample_id": sample_id,
            "position": i,
            "token": r["token"],
            "logprob": r["logprob"],
            "char_start": r["char_start"],
            "char_end": r["char_end"],
            "top_logprobs": json.dumps(r.get("top_logprobs") or [], ensure_ascii=False),
            "run_id": run_id,
        }
        for i, r in enumerate(records)
    ]
