"""Grading attempts: the audit trail of every processing lease a grading worker took (SPEC §5).

The lease itself (token, expiry, attempt count) lives on the submission, owned by the
`submissions` app; this app records each attempt and its outcome.
"""

from __future__ import annotations

from django.db import models

from apps.core.transitions import TransitionTable
from apps.submissions.models import Submission


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
                name="grading_gradingattempt_outcome_valid",
            ),
        ]
        # The /ops/ page's gradings of the last hour.
        indexes = [models.Index(fields=["finished_at"], name="grading_attempt_finished")]

    def __str__(self) -> str:
        return f"{self.submission_id} attempt {self.number} ({self.outcome})"
