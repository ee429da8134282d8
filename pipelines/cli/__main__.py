"""``python -m pipelines.cli ...``: the ``facetlake`` command without the console script
(the tests spawn it this way)."""

from pipelines.cli import main

main()
