"""Hard limits on what one evaluation run may spend on model and judge calls (issue 30):
``budget: {usd, tokens, calls}`` in the spec (kept as ``runtime.budget``) or
``facetlake run --budget usd=5,tokens=2000000,calls=10000``. The endpoint layer
(resources/backends/endpoints.py) reserves each call's estimate here before anything is sent
and settles it with the reply's usage."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from metric_ops.errors import BudgetExhausted, FacetlakeError


class EndpointError(FacetlakeError, ValueError):
    """Endpoint or budget options that cannot be used (the message names the key and a right value)."""


def positive(value: Any, key: str, where: str, integer: bool = False) -> float | int | None:
    """``value`` as a positive number (None stays None); raises :class:`EndpointError` naming ``key``."""
    if value is None:
        return None
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise EndpointError(f"{where}: {key} must be a positive number, got {value!r}") from None
    if not number > 0 or (isinstance(number, float) and not math.isfinite(number)):
        raise EndpointError(f"{where}: {key} must be a positive number, got {value!r}")
    return number


@dataclass
class Budget:
    """Hard limits on one evaluation run's calls: ``usd``, ``tokens`` (in + out), ``calls``
    (None: no limit). Thread-safe. :meth:`reserve` before a call (raises
    :class:`BudgetExhausted` when the call's estimate would pass a limit: the call is then not
    sent), :meth:`settle` after it with the reply's true usage. ``spent_before`` carries what
    earlier steps of the same run spent (a run's pairs are separate steps)."""

    usd: float | None = None
    tokens: int | None = None
    calls: int | None = None
    spent_calls: int = 0
    spent_tokens: int = 0
    spent_usd: float = 0.0
    prior_calls: int = 0
    prior_tokens: int = 0
    prior_usd: float = 0.0
    refused: int = 0
    _held_calls: int = 0
    _held_tokens: int = 0
    _held_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, value: Any, where: str = "budget") -> "Budget | None":
        """A budget from a spec mapping ``{usd: 5.0, tokens: 2000000, calls: 10000}`` or a flag
        string ``usd=5,tokens=2e6,calls=10000``; None for an empty one. Raises
        :class:`EndpointError` naming a bad key or value."""
        if value in (None, "", {}):
            return None
        if isinstance(value, str):
            pairs = {}
            for part in value.split(","):
                key, sep, number = part.partition("=")
                if not sep:
                    raise EndpointError(f"{where}: {part!r} is not KEY=VALUE; write e.g. --budget usd=5,tokens=2000000,calls=10000")
                pairs[key.strip()] = number.strip()
            value = pairs
        if not isinstance(value, Mapping):
            raise EndpointError(f"{where}: expected a mapping such as {{usd: 5.0, tokens: 2000000, calls: 10000}}")
        unknown = set(value) - {"usd", "tokens", "calls"}
        if unknown:
            raise EndpointError(f"{where}: unknown keys {sorted(unknown)}; a budget has usd, tokens and calls")
        usd = positive(value.get("usd"), "usd", where)
        tokens = positive(value.get("tokens"), "tokens", where)
        calls = positive(value.get("calls"), "calls", where)
        for key, number in (("tokens", tokens), ("calls", calls)):
            if number is not None and float(number) != int(float(number)):
                raise EndpointError(f"{where}: {key} must be a whole number, got {value.get(key)!r}")
        return cls(usd=usd, tokens=None if tokens is None else int(tokens), calls=None if calls is None else int(calls))

    def limits(self) -> dict[str, Any]:
        """The limits set (``{"calls": 10}`` ...)."""
        return {k: v for k, v in (("usd", self.usd), ("tokens", self.tokens), ("calls", self.calls)) if v is not None}

    def spent(self) -> dict[str, Any]:
        """What this step has spent: ``{"calls", "tokens", "usd"}`` (usd rounded to 1e-6)."""
        with self._lock:
            return {"calls": self.spent_calls, "tokens": self.spent_tokens, "usd": round(self.spent_usd, 6)}

    def add_prior(self, calls: int = 0, tokens: int = 0, usd: float = 0.0) -> None:
        """Count what earlier steps of the same run spent (they count against the limits)."""
        with self._lock:
            self.prior_calls += int(calls)
            self.prior_tokens += int(tokens)
            self.prior_usd += float(usd)

    def reserve(self, tokens: int, usd: float | None) -> tuple[int, float]:
        """Hold one call with its estimate; raises :class:`BudgetExhausted` (nothing held) when
        it does not fit. ``usd`` None: the call's price is unknown (a usd limit then refuses)."""
        with self._lock:
            over = None
            calls, spent_tokens, spent_usd = self.prior_calls + self.spent_calls, self.prior_tokens + self.spent_tokens, self.prior_usd + self.spent_usd
            if self.calls is not None and calls + self._held_calls + 1 > self.calls:
                over = f"calls: {calls + self._held_calls} of {self.calls} sent"
            elif self.tokens is not None and spent_tokens + self._held_tokens + tokens > self.tokens:
                over = (f"tokens: {spent_tokens:,} of {self.tokens:,} spent and {self._held_tokens:,} held by calls in flight, "
                        f"the next call needs about {tokens:,}")
            elif self.usd is not None:
                if usd is None:
                    over = "usd: the call's model has no price (runtime.prices), so a usd budget cannot admit it"
                elif spent_usd + self._held_usd + usd > self.usd:
                    over = f"usd: {spent_usd:.4f} of {self.usd:.4f} spent, the next call costs about {usd:.4f}"
            if over is not None:
                self.refused += 1
                raise BudgetExhausted(f"budget reached ({over})", {"calls": calls, "tokens": spent_tokens, "usd": round(spent_usd, 6)},
                                      self.limits())
            self._held_calls += 1
            self._held_tokens += tokens
            self._held_usd += usd or 0.0
            return tokens, usd or 0.0

    def settle(self, held: tuple[int, float], sent: bool, tokens: int | None, usd: float | None) -> None:
        """Replace a reservation by what the call spent: a sent call counts (also a failed one),
        with the reply's tokens and cost when known, else its estimate's."""
        with self._lock:
            self._held_calls -= 1
            self._held_tokens -= held[0]
            self._held_usd -= held[1]
            if sent:
                self.spent_calls += 1
                self.spent_tokens += held[0] if tokens is None else int(tokens)
                self.spent_usd += held[1] if usd is None else float(usd)



__all__ = ["Budget", "BudgetExhausted", "EndpointError", "positive"]
