"""Human review (issue 29): rubrics declared in a spec, the review queue, and agreement
between reviewers and between judges and reviewers."""

from metric_ops.review.agreement import auroc, cohen_kappa, fleiss_kappa, krippendorff_alpha
from metric_ops.review.rubric import LEVELS, ReviewPlan, ReviewSpecError, Rubric, assign, check_reviewer, parse_review

__all__ = ["LEVELS", "ReviewPlan", "ReviewSpecError", "Rubric", "assign", "auroc", "check_reviewer", "cohen_kappa",
           "fleiss_kappa", "krippendorff_alpha", "parse_review"]
