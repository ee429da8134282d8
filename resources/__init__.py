"""facetlake resources: lake store, backends, datasets, SQL (see DESIGN.md).

Dataset kinds defined outside ``resources.datasets`` (bfcl, episodes, lm_eval) are listed by
name in its ``DATASETS`` registry and imported on first use; nothing is imported here.
"""
