"""facetlake resources: lake store, backends, datasets, SQL (see DESIGN.md)."""

from resources import bfcl as _bfcl  # noqa: F401  (registers the bfcl dataset kind)
from resources import episodes as _episodes  # noqa: F401  (registers the episodes dataset kind, issue 17)
