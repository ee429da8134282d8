"""One lazy registry for plugin kinds (backends, dataset kinds): the built-ins are listed
by name in one table each (``"kind": "module:Class"``) and imported on first use, so no
module is imported for its side effect, none imports its registry back while it loads,
and reading the lake (``facetlake sql``) loads none of them (lm-evaluation-harness's
registry pattern).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any


class LazyRegistry(MutableMapping):
    """kind -> class. ``entries`` values are classes or ``"module:Class"`` strings (imported
    when first looked up). ``base``: every class added must subclass it (``TypeError``
    naming ``what`` otherwise). Membership, iteration and ``len`` import nothing."""

    def __init__(self, entries: Mapping[str, Any], base: type | None = None, what: str = "plugin") -> None:
        self._entries: dict[str, Any] = dict(entries)
        self._base, self._what = base, what

    def __getitem__(self, kind: str) -> Any:
        entry = self._entries[kind]
        if isinstance(entry, str):
            module, name = entry.split(":")
            entry = self._entries[kind] = getattr(importlib.import_module(module), name)
        return entry

    def __setitem__(self, kind: str, cls: Any) -> None:
        if self._base is not None and not (isinstance(cls, type) and issubclass(cls, self._base)):
            raise TypeError(f"{self._what} {kind!r} must be a {self._base.__name__} subclass, not {cls!r}")
        self._entries[kind] = cls

    def __delitem__(self, kind: str) -> None:
        del self._entries[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
