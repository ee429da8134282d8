"""facetlake resources: lake store, backends, datasets, SQL (see DESIGN.md).

Nothing is imported here: plugin kinds (backends, dataset kinds defined outside
``resources.datasets`` such as bfcl, episodes and lm_eval) are listed by name in their
registries and imported on first use, so importing one module (the lake, for
`facetlake sql`) loads no other."""
