"""facetlake resources: lake store, backends, datasets, SQL (see DESIGN.md)."""

from resources import bfcl as _bfcl  # noqa: F401  (registers the bfcl dataset kind)
