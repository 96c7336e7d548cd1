"""Review claims, review records and grading attempts (SPEC §5)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.models_utils import new_hex_id
from apps.core.transitions import TransitionTable
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


class GradingOutcome(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    REVIEW_PENDING = "review_pending", "Review pending"
    FAILED = "failed", "Failed"
    LEASE_LOST = "lease_lost", "Lease lost (result discarded)"
    ABANDONED = "abandoned", "Abandoned (lease expired)"


_G = GradingOutcome

# An attempt starts `running` and ends once. Beyond that: an attempt marked `abandoned` when
# its lease was taken over may still see its worker finish late; the discarded result is then
# recorded (abandoned → lease_lost).
GRADING_ATTEMPT_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Grading attempt",
    {
        _G.RUNNING: frozenset(
            {_G.COMPLETED, _G.REVIEW_PENDING, _G.FAILED, _G.LEASE_LOST, _G.ABANDONED}
        ),
        _G.ABANDONED: frozenset({_G.LEASE_LOST}),
    },
    field="outcome",
)


class GradingAttempt(models.Model):
    """One processing lease taken by a grading worker: the audit trail of every attempt.

    `lease_token` is unique, so an attempt is recorded once however often a task is delivered.
    """

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="grading_attempts"
    )
    job = models.ForeignKey(
        "jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="attempts"
    )
    number = models.PositiveIntegerField()
    lease_token = models.CharField(max_length=32, unique=True)
    lease_expires_at = models.DateTimeField()
    worker = models.CharField(max_length=200, blank=True, default="")
    grader = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(
        max_length=20, choices=GradingOutcome.choices, default=GradingOutcome.RUNNING
    )
    exit_code = models.IntegerField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["submission_id", "number"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=GradingOutcome.values),
                name="review_gradingattempt_outcome_valid",
            ),
        ]
        # The /ops/ page's gradings of the last hour.
        indexes = [models.Index(fields=["finished_at"], name="review_attempt_finished")]

    def __str__(self) -> str:
        return f"{self.submission_id} attempt {self.number} ({self.outcome})"


class SubmissionUnderReview(Submission):
    """Admin view of submissions with their grading attempts, claim and reviews."""

    class Meta:
        proxy = True
        verbose_name = "submission (grading and review)"
        verbose_name_plural = "submissions (grading and review)"
