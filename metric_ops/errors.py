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
