"""One plugin registry for metrics, datasets, adapters and annotators (and backends).

Modelled on lm-evaluation-harness's ``lm_eval/api/registry.py`` (``Registry(Generic[T])``):
a name -> object table with

- a base-class check on registration (a class that is not a subclass of the registry's
  base is refused with :class:`RegistryError`);
- aliases (any number of extra names resolving to one canonical name);
- built-ins listed lazily by name: ``{"name": "package.module:Object"}``, imported on first
  use, so listing names imports nothing;
- "did you mean" errors (:mod:`difflib` close matches) for unknown names.

Lowest layer: imports nothing from the project but :mod:`metric_ops.errors`.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, ClassVar, Generic, Iterable, Iterator, Mapping, TypeVar

from metric_ops.errors import FacetlakeError

T = TypeVar("T")

class RegistryError(FacetlakeError, TypeError):
    """A registration was refused: the object is not a subclass of the registry's base,
    or a name is taken by another object."""

class NameTakenError(RegistryError, ValueError):
    """A unique registration named a name another class holds (:meth:`Registry.register`
    with ``unique``)."""

class UnknownNameError(FacetlakeError, KeyError):
    """No entry of that name or alias is registered (the message lists close matches)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""

def _load(target: str) -> Any:
    """The object named by ``"package.module:attr"`` (attr may be dotted)."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj

def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_")

class Registry(Generic[T]):
    """Name -> registered object (usually a class), with aliases and lazy built-ins.

    ``kind``: what an entry is, for messages ("metric", "dataset kind" ...);
    ``base``: a class, or ``"module:Class"`` resolved on first check, every registered
    class must subclass (``None``: no check); ``builtins``: ``{name: "module:attr"}``
    imported on first use; ``aliases``: ``{alias: name}``; ``hint``: text appended to the
    unknown-name error (``{n}`` is the number of names); ``error``: the exception class
    raised for an unknown name (a subclass of :class:`UnknownNameError`); ``taken``: the one
    raised when a unique registration names a name another class holds (a subclass of
    :class:`NameTakenError`).

    Dict-like for callers written against a plain dict: ``reg[name]``, ``name in reg``,
    ``reg.get(name)``, ``reg.items()``, ``sorted(reg)`` (names), ``reg[name] = cls``.
    """

    def __init__(self, kind: str, *, base: type | str | None = None, builtins: Mapping[str, str] | None = None,
                 aliases: Mapping[str, str] | None = None, hint: str = "", error: type[UnknownNameError] = UnknownNameError,
                 taken: type[NameTakenError] = NameTakenError) -> None:
        self.kind = kind
        self._base = base
        self._objects: dict[str, T] = {}
        self._lazy: dict[str, str] = dict(builtins or {})
        self._aliases: dict[str, str] = dict(aliases or {})
        self._hint = hint
        self._error = error
        self._taken = taken

    # ------------------------------------------------------------------ registration
    @property
    def base(self) -> type | None:
        """The base class every entry must subclass (resolved on first use), or None."""
        if isinstance(self._base, str):
            self._base = _load(self._base)
        return self._base  # type: ignore[return-value]

    def check(self, name: str, obj: Any) -> None:
        """Raise :class:`RegistryError` unless ``obj`` is a subclass (or instance) of the base."""
        base = self.base
        if base is None:
            return
        ok = issubclass(obj, base) if isinstance(obj, type) else isinstance(obj, base)
        if not ok:
            raise RegistryError(f"{self.kind} {name!r}: {obj!r} is not a subclass of {base.__module__}.{base.__qualname__}; "
                                f"derive it from {base.__qualname__} to register it")

    def register(self, name: str, obj: T | None = None, *, aliases: Iterable[str] = (), unique: bool = False) -> Any:
        """Register ``obj`` under ``name`` (and ``aliases``); without ``obj``, a decorator.

        Raises :class:`RegistryError` when ``obj`` fails the base-class check, and with
        ``unique`` the registry's ``taken`` error (default :class:`NameTakenError`) when
        ``name`` is held by another class (a different qualified name).
        Otherwise registering again under the same name replaces the entry (a module
        reloaded, a test's toy class)."""
        if obj is None:
            def decorator(target: T) -> T:
                self.register(name, target, aliases=aliases, unique=unique)
                return target
            return decorator
        self.check(name, obj)
        existing = self.registered(name)
        if unique and existing is not None and getattr(existing, "__qualname__", None) != getattr(obj, "__qualname__", None):
            raise self._taken(f"{self.kind} name {name!r} is already registered by "
                              f"{existing.__module__}.{existing.__qualname__}; choose another name")
        self._objects[name] = obj
        for alias in aliases:
            if alias != name:
                self._aliases.setdefault(alias, name)
        return obj

    def registered(self, name: str) -> T | None:
        """The object registered under exactly ``name`` so far, or None: no alias
        resolution and no import of a lazily listed built-in."""
        return self._objects.get(name)

    def register_lazy(self, name: str, target: str, *, aliases: Iterable[str] = ()) -> None:
        """List ``name`` as ``"module:attr"``, imported (and checked) on first use."""
        self._lazy[name] = target
        for alias in aliases:
            if alias != name:
                self._aliases.setdefault(alias, name)

    def pop(self, name: str, *default: Any) -> Any:
        """Remove ``name`` (and its aliases) and return its entry, like ``dict.pop`` (a
        test's toy class, a plugin withdrawn); raises :class:`UnknownNameError` without a default."""
        if name not in self._objects and name not in self._lazy:
            if default:
                return default[0]
            raise self._error(self.unknown_message(name))
        obj = self._objects.pop(name, None)
        target = self._lazy.pop(name, None)
        self._aliases = {a: n for a, n in self._aliases.items() if n != name}
        return obj if obj is not None else target

    def __setitem__(self, name: str, obj: T) -> None:
        self.register(name, obj)

    # ------------------------------------------------------------------ look-up
    def _find(self, name: str) -> str | None:
        key = name.strip()
        for candidate in (key, _normal(key)):
            if candidate in self._objects or candidate in self._lazy:
                return candidate
            if candidate in self._aliases:
                return self._aliases[candidate]
        return None

    def load_all(self) -> None:
        """Import every lazily listed built-in (their import may register aliases)."""
        for name in list(self._lazy):
            if name not in self._objects:
                self._materialise(name)

    def _materialise(self, name: str) -> T:
        obj = self._objects.get(name)
        if obj is None:
            obj = _load(self._lazy[name])
            if name not in self._objects:  # importing may have registered it already
                self.register(name, obj)
            obj = self._objects[name]
        return obj

    def resolve(self, name: str) -> str:
        """Canonical name for ``name`` (a name or an alias; case and ``-``/``_`` forgiven).

        Raises the registry's :class:`UnknownNameError` listing close matches."""
        found = self._find(name)
        if found is None and any(n not in self._objects for n in self._lazy):
            self.load_all()  # aliases declared by built-ins are known once they are imported
            found = self._find(name)
        if found is None:
            raise self._error(self.unknown_message(name))
        return found

    def unknown_message(self, name: str) -> str:
        """"unknown <kind> 'x'; did you mean a, b?" plus the registry's hint."""
        lowered = _normal(str(name))
        known = sorted({*self._objects, *self._lazy, *self._aliases})
        inside = sorted((k for k in known if len(k) >= 3 and (k in lowered or lowered in k)),
                        key=lambda k: (abs(len(k) - len(lowered)), k))
        close = list(dict.fromkeys([*inside[:3], *difflib.get_close_matches(lowered, known, n=3, cutoff=0.6)]))[:3]
        did = f"; did you mean {', '.join(close)}?" if close else ""
        tail = self._hint.format(n=len(self.names())) if self._hint else f" (known: {', '.join(self.names())})"
        return f"unknown {self.kind} {name!r}{did}{tail}"

    def get_entry(self, name: str) -> T:
        """The object registered under ``name`` (imported now if listed lazily)."""
        return self._materialise(self.resolve(name))

    __getitem__ = get_entry

    def get(self, name: str, default: Any = None) -> Any:
        """Like ``dict.get``: the entry, or ``default`` for an unknown name."""
        try:
            return self.get_entry(name)
        except UnknownNameError:
            return default

    def names(self) -> list[str]:
        """Sorted canonical names, built-ins included, importing nothing."""
        return sorted({*self._objects, *self._lazy})

    def aliases(self) -> dict[str, str]:
        """``{alias: canonical name}`` known so far."""
        return dict(self._aliases)

    def items(self) -> list[tuple[str, T]]:
        """``(name, object)`` pairs, sorted by name (imports every built-in)."""
        self.load_all()
        return [(n, self._objects[n]) for n in self.names()]

    def values(self) -> list[T]:
        return [obj for _, obj in self.items()]

    def keys(self) -> list[str]:
        return self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.resolve(name)
        except UnknownNameError:
            return False
        return True

    def is_loaded(self, name: str) -> bool:
        """Whether ``name``'s object has been imported (True for non-lazy entries)."""
        return name in self._objects

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries)"


class Plugin:
    """Base of a configured plugin (adapters, annotators): a subclass sets ``kind`` (its
    name in ``registry``), ``version`` (bump when its output can change) and ``allowed``
    (the configuration keys it takes beyond the family's ``base_keys``). Defining a
    subclass with a ``kind`` registers it in the family's ``registry``: one way to add a
    plugin, no side list. :meth:`unknown_keys` is the configuration check every family
    repeats."""

    registry: ClassVar[Registry[Any] | None] = None
    kind: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    allowed: ClassVar[frozenset[str]] = frozenset()
    base_keys: ClassVar[frozenset[str]] = frozenset({"kind"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind and cls.registry is not None:
            cls.registry.register(cls.kind, cls)

    @classmethod
    def unknown_keys(cls, config: Mapping[str, Any]) -> list[str]:
        """The keys of ``config`` neither in ``base_keys`` nor in ``allowed``, sorted."""
        return sorted(set(config) - cls.base_keys - cls.allowed)
