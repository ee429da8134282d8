"""Linear-time scanning for the tool-call parser (:mod:`metric_ops.toolcalls.parsing`):
the work counter, the balanced-bracket scan, and the detection of attempted call syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator


@dataclass
class ParseWork:
    """The work :func:`parse_tool_calls` did on one output, counted instead of timed:
    ``scanned`` characters stepped over by its scans (bracket matching, block and fence
    search), ``decoded`` characters handed to ``json.loads`` / ``ast.parse``, and
    ``spans`` candidate fragments examined. Each is linear in the output's length."""

    scanned: int = 0
    decoded: int = 0
    spans: int = 0

    @property
    def total(self) -> int:
        """Characters touched in all (``scanned + decoded``)."""
        return self.scanned + self.decoded


def _json_spans(text: str, max_restarts: int = 16, work: ParseWork | None = None) -> Iterator[tuple[int, int]]:
    """(start, end) of top-level balanced ``{...}`` / ``[...]`` spans, string-aware.

    One pass over the text; an opener that never closes (or closes with the wrong
    bracket) restarts the scan one character after it, at most ``max_restarts`` times,
    so the cost stays linear in ``len(text)`` (at most ``max_restarts + 1`` passes;
    ``work.scanned`` counts every character stepped over).
    """
    work = work if work is not None else ParseWork()
    n = len(text)
    i = 0
    restarts = 0
    while i < n:
        if text[i] not in "{[":
            i += 1
            work.scanned += 1
            continue
        start = i
        stack = [text[i]]
        j = i + 1
        in_str = escaped = closed = False
        while j < n:
            c = text[j]
            if in_str:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c in "{[":
                stack.append(c)
            elif c in "}]":
                if (c == "}") != (stack[-1] == "{"):
                    break
                stack.pop()
                if not stack:
                    closed = True
                    break
            j += 1
        work.scanned += j - start + 1
        if closed:
            yield start, j + 1
            i = j + 1
        else:
            restarts += 1
            if restarts > max_restarts:
                return
            i = start + 1


# a line that opens a Python-syntax call: ``name(`` / ``[mod.name(`` followed by a keyword
# argument, a closing parenthesis or the end of the line (so "Paris(France) is" is prose)
_PY_CALL_START = re.compile(r"(?m)^[ \t]*\[?[ \t]*[A-Za-z_][\w.]*\((?:[ \t]*\)|[ \t]*[A-Za-z_]\w*[ \t]*=|[ \t]*$)")
# tool-call markers of chat templates: Hermes/Qwen, Llama 3.x, Mistral, Anthropic-style XML
_CALL_TAG = re.compile(r"<tool_call\b|</?tool_call>|<function[=>\s]|<function_calls>|<\|python_tag\|>|\[TOOL_CALLS\]|<tool_use\b|<invoke\b")


def attempted_call_syntax(text: str) -> str | None:
    """The call syntax ``text`` attempts, if any: ``"python"`` (a line opening a call,
    ``get_weather(city=`` included), ``"tag"`` (a tool-call tag such as ``<tool_call>``,
    ``<function=...>``, ``[TOOL_CALLS]``) or ``"json"`` (the text opens a JSON object or
    array of objects, ``{"`` / ``[{``); None for prose. Used to tell a reply that tried
    to call and could not be parsed (a parse failure) from a deliberate no-call. Linear
    in ``len(text)``."""
    if _CALL_TAG.search(text):
        return "tag"
    if _PY_CALL_START.search(text):
        return "python"
    head = text.lstrip()[:3].replace(" ", "")
    if head.startswith(('{"', "{'", "[{", "[[")):
        return "json"
    return None
