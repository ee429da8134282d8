"""Human reviews in the lake (issue 29): the ``reviews`` table, the ``human:<rubric>``
score rows derived from it, CSV import and agreement rows."""

from resources.review.agreement import agreement_rows
from resources.review.store import (
    ImportReport,
    RecordReport,
    checked_review,
    human_rows,
    import_csv,
    latest_reviews,
    record_reviews,
    review_plan,
    review_row,
    review_targets,
)

__all__ = ["agreement_rows", "ImportReport", "RecordReport", "checked_review", "human_rows", "import_csv", "latest_reviews", "record_reviews", "review_plan",
           "review_row", "review_targets"]
