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
        # names contained in what was typed, or containing it ("bleu_score" -> bleu), then close spellings
        inside = sorted((k for k in known if len(k) >= 3 and (k in lowered or lowered in k)), key=lambda k: (abs(len(k) - len(lowered)), k))
        close = list(dict.fromkeys([*inside[:3], *difflib.get_close_matches(lowered, known, n=3, cutoff=0.6)]))[:3]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownMetricError(
            f"unknown metric {name!r}{hint} (run `facetlake metrics` to list the {len(self._by_name)} registered metrics)"
        )

    def get_class(self, name: str) -> type[Metric]:
        """The metric class registered under ``name`` (see :meth:`resolve`)."""
        return self._by_name[self.resolve(name)]

    def create(self, name: str, **params: Any) -> Metric:
        """An instance of the metric ``name`` with ``params``, checked and converted by
        :func:`check_params` first (raises :class:`MetricParamError` naming the parameter)."""
        cls = self.get_class(name)
        return cls(**check_params(cls, params))

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


class MetricParamError(ValueError):
    """A metric parameter is unknown or has a value of the wrong kind."""


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


# scalar parameter types: (what the error says is expected, an example value)
_SCALARS: dict[type, tuple[str, str]] = {
    bool: ("true or false", "true"),
    int: ("a whole number", "3"),
    float: ("a number", "0.5"),
    str: ("text", "VALUE"),
}


def _scalar(value: Any, hint: type) -> Any:
    """``value`` as ``hint`` (bool, int, float or str); raises ``ValueError``.

    bool: a bool, 0/1 or true/false/yes/no/on/off/1/0 text; int: an int, a whole float or
    integer text; float: an int, a float or numeric text; str: text or a number. A bool
    is never read as a number or as text."""
    if hint is bool:
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):  # True and False included
            return bool(value)
        raise ValueError(value)
    if isinstance(value, bool):
        raise ValueError(value)
    if hint is str:
        if isinstance(value, (str, int, float)):
            return str(value)
        raise ValueError(value)
    if isinstance(value, str):
        return hint(value.strip())  # int("3"), float("0.5"); ValueError otherwise
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, hint) or (hint is float and isinstance(value, int)):
        return hint(value)
    raise ValueError(value)


def _convert(metric: str, key: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the annotated type ``hint``; raises MetricParamError."""
    import collections.abc as cabc
    import types
    import typing

    def bad(expected: str, example: str) -> MetricParamError:
        return MetricParamError(f"{metric}: parameter {key} must be {expected}, got {value!r} (e.g. --param {key}={example})")

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in {"none", "null", ""} and type(None) in typing.get_args(hint)):
            return None
        if len(options) == 1:
            return _convert(metric, key, value, options[0])
        return value
    if hint in _SCALARS:
        try:
            return _scalar(value, hint)
        except ValueError:
            raise bad(*_SCALARS[hint]) from None
    if origin in (cabc.Sequence, list, tuple) and origin is not None:
        (item,) = typing.get_args(hint)[:1] or (Any,)
        items = value
        if isinstance(value, str):
            text = value.strip()
            if text[:1] in "([" and text[-1:] in ")]":
                text = text[1:-1]
            items = [t.strip() for t in text.split(",") if t.strip()]
        if not isinstance(items, (list, tuple)):
            raise bad("a list", "0.1,0.2,0.3" if item is float else "a,b")
        if item in (bool, int, float, str):
            try:
                return [_scalar(v, item) for v in items]
            except ValueError:
                raise bad(f"a list of {item.__name__} values", "0.1,0.2,0.3" if item is float else "a,b") from None
        return list(items)
    return value


def check_params(cls: type[Metric], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against ``cls.__init__``'s signature and converted to its
    annotated types: bool (true/false/yes/no/1/0), int, float, str, optional values
    (none/null), and lists (a YAML list or comma-separated text, e.g. ``0.1,0.2,0.3``).

    Raises :class:`MetricParamError` for a parameter the metric does not take (listing
    the ones it does) or a value of the wrong kind (naming parameter, expected kind and
    an example). Parameters of a metric taking ``**kwargs`` pass through unchecked."""
    import inspect
    import typing

    signature = inspect.signature(cls.__init__)
    accepted = {n: p for n, p in list(signature.parameters.items())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that cannot be evaluated: check names only
        hints = {}
    out = {}
    for key, value in params.items():
        if key not in accepted:
            if open_ended:
                out[key] = value
                continue
            valid = ", ".join(accepted) or "none"
            raise MetricParamError(f"{cls.name} takes no parameter {key!r}; its parameters: {valid}")
        hint = hints.get(key)
        out[key] = value if hint is None or hint is Any else _convert(cls.name, key, value, hint)
    return out


REGISTRY = MetricRegistry()


def get_metric(name: str, **params: Any) -> "Metric":
    """Instantiate a registered metric by name or alias; raises :class:`UnknownMetricError`."""
    return REGISTRY.create(name, **params)


def list_metrics() -> list[type["Metric"]]:
    """Every registered metric class, sorted by name."""
    return list(REGISTRY)
