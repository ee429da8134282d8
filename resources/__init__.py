"""facetlake resources: lake store, backends, datasets, SQL (see DESIGN.md).

Nothing is imported here: plugin kinds are listed by name in their registries
(resources/registry.py), so importing one module (the lake, for `facetlake sql`) loads no other."""
