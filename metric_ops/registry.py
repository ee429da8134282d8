"""The metric registry: name/alias -> Metric class, with "did you mean" errors.

Modelled on lm-evaluation-harness's ``lm_eval/api/registry.py``: one dict, aliases,
and an error that lists close matches. Concrete :class:`~metric_ops.base.Metric`
subclasses register themselves when defined.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from metric_ops.base import Metric


class UnknownMetricError(KeyError):
    """No metric of that name or alias is registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class MetricRegistry:
    """Holds every registered metric class by name, alias and emitted score name."""

    def __init__(self) -> None:
        self._by_name: dict[str, type[Metric]] = {}
        self._aliases: dict[str, str] = {}

    def add(self, cls: type[Metric]) -> None:
        """Register ``cls``; raises ``ValueError`` if its name is taken by another class."""
        existing = self._by_name.get(cls.name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"metric name {cls.name!r} is already registered by {existing.__module__}.{existing.__qualname__}")
        self._by_name[cls.name] = cls
        for alias in (*cls.aliases, *cls.emitted()):
            if alias != cls.name:
                self._aliases.setdefault(alias, cls.name)

    def resolve(self, name: str) -> str:
        """Canonical metric name for ``name`` (a name, an alias or an emitted score name)."""
        key = name.strip()
        if key in self._by_name:
            return key
        if key in self._aliases:
            return self._aliases[key]
        lowered = key.lower().replace("-", "_")
        if lowered in self._by_name:
            return lowered
        if lowered in self._aliases:
            return self._aliases[lowered]
        known = sorted({*self._by_name, *self._aliases})
        close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownMetricError(
            f"unknown metric {name!r}{hint} (run `facetlake metrics` to list the {len(self._by_name)} registered metrics)"
        )

    def get_class(self, name: str) -> type[Metric]:
        """The metric class registered under ``name`` (see :meth:`resolve`)."""
        return self._by_name[self.resolve(name)]

    def create(self, name: str, **params: Any) -> Metric:
        """An instance of the metric ``name`` with ``params``."""
        return self.get_class(name)(**params)

    def names(self) -> list[str]:
        """Sorted canonical names."""
        return sorted(self._by_name)

    def __iter__(self) -> Iterator[type[Metric]]:
        return iter(self._by_name[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        try:
            self.resolve(str(name))
        except UnknownMetricError:
            return False
        return True


REGISTRY = MetricRegistry()


def get_metric(name: str, **params: Any) -> "Metric":
    """Instantiate a registered metric by name or alias; raises :class:`UnknownMetricError`."""
    return REGISTRY.create(name, **params)


def list_metrics() -> list[type["Metric"]]:
    """Every registered metric class, sorted by name."""
    return list(REGISTRY)
