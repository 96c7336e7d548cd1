"""Writes of the review app: claims, verdicts and staff regrades."""

from apps.review.services.review import (
    review_claim,
    review_claim_expire,
    review_claim_extend,
    review_claim_release,
    review_claims_purge,
    review_complete,
    submission_regrade,
)

__all__ = [
    "review_claim",
    "review_claim_expire",
    "review_claim_extend",
    "review_claim_release",
    "review_claims_purge",
    "review_complete",
    "submission_regrade",
]
