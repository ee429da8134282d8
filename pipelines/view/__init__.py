"""The results viewer (issue 29): ``facetlake view`` serves a local web app over the lake,
read through the read-only DuckDB connection and paged on the server.

- :mod:`~pipelines.view.data`: the reader and the queries (evaluations, the leaderboard,
  one sample, a metric's history across runs);
- :mod:`~pipelines.view.compare`: the compare view (its URL, its SQL, its pages);
- :mod:`~pipelines.view.app`: the Starlette app rendering Jinja2 templates (no script,
  font or style from outside the server).
"""

from pipelines.view.app import create_app, word_diff
from pipelines.view.compare import CompareQuery, compare_page, compare_sql
from pipelines.view.data import LakeReader, ViewError

__all__ = ["CompareQuery", "LakeReader", "ViewError", "compare_page", "compare_sql", "create_app", "word_diff"]
