"""Writes of the review app: grading (`grading`) and human review (`review`)."""

from apps.review.services.grading import (
    grading_enqueue,
    grading_lease_acquire,
    grading_reap_expired,
    grading_result_record,
    grading_run,
)
from apps.review.services.review import (
    review_claim,
    review_claim_expire,
    review_claim_extend,
    review_claim_release,
    review_complete,
    submission_regrade,
)

__all__ = [
    "grading_enqueue",
    "grading_lease_acquire",
    "grading_reap_expired",
    "grading_result_record",
    "grading_run",
    "review_claim",
    "review_claim_expire",
    "review_claim_extend",
    "review_claim_release",
    "review_complete",
    "submission_regrade",
]
