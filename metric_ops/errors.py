"""The one base class of every facetlake error.

Lowest layer (metric_ops imports nothing from resources, assets or pipelines), so every
package can derive from it. Each facetlake exception also keeps its standard base
(``ValueError``, ``KeyError``, ``RuntimeError`` ...), so ``except ValueError`` keeps
working while ``except FacetlakeError`` catches every error the project raises on purpose.
"""

from __future__ import annotations


class FacetlakeError(Exception):
    """Base of every exception facetlake raises on purpose (bad input, unknown names,
    failed checks). Catch it to tell a facetlake error from a bug or a library error."""


class BudgetExhausted(FacetlakeError, RuntimeError):
    """The run's budget (``budget: {usd, tokens, calls}``, resources/backends/endpoints.py) has
    no room for the next model or judge call: that call and every later one are not sent.
    ``spent`` and ``limits`` are plain dicts (calls, tokens, usd). Defined here, the lowest
    layer, so judged metrics can tell it from a failed call (a refused call is no score, not
    an error score)."""

    def __init__(self, message: str, spent: dict | None = None, limits: dict | None = None) -> None:
        super().__init__(message)
        self.spent = dict(spent or {})
        self.limits = dict(limits or {})


class CallDeferred(FacetlakeError, RuntimeError):
    """A judge call was queued for a Batch API file instead of sent (its endpoint is in
    ``runtime.mode: batch``, resources/scoring/judges.py): the sample gets its score in a later
    round, once the batch is back (never an error or a zero meanwhile)."""
