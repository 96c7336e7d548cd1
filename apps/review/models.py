"""Review claims, review records and the admin's view of submissions under review (SPEC §5)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.models_utils import new_hex_id
from apps.submissions.models import Submission


class ReviewClaim(models.Model):
    """A reviewer's exclusive, expiring hold on one `review_pending` submission.

    One row per submission at most (the primary key is the submission). A claim is live while
    `expires_at` is in the future — computed at query time, never by a background job — so an
    expired row is simply taken over by the next claimer's conditional UPDATE.
    """

    submission = models.OneToOneField(
        Submission, on_delete=models.CASCADE, primary_key=True, related_name="review_claim"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_claims"
    )
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "review claim"

    def __str__(self) -> str:
        return f"{self.submission_id} by {self.reviewer_id} until {self.expires_at:%H:%M:%S}"


class ReviewVerdict(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"


class ReviewRecord(models.Model):
    """A reviewer's verdict on a submission: who, when, approve/reject, score and comment."""

    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews_given"
    )
    verdict = models.CharField(max_length=10, choices=ReviewVerdict.choices)
    score = models.FloatField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("can_review", "Can claim and review submissions")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(verdict__in=ReviewVerdict.values),
                name="review_reviewrecord_verdict_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on {self.submission_id}"


class SubmissionUnderReview(Submission):
    """Admin view of submissions with their grading attempts, claim and reviews (the model of
    `submissions`, shown here; no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "submission (grading and review)"
        verbose_name_plural = "submissions (grading and review)"
