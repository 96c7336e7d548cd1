"""Jobs: one grading run of a submission."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.core.models_utils import new_hex_id
from apps.core.transitions import TransitionTable


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


_J = JobStatus

JOB_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Job",
    {
        _J.QUEUED: frozenset({_J.RUNNING, _J.CANCELLED, _J.FAILED}),
        _J.RUNNING: frozenset({_J.COMPLETED, _J.FAILED, _J.CANCELLED}),
    },
)

# A job in one of these holds a concurrent-job quota slot.
ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
FINISHED_JOB_STATUSES = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


class Job(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="jobs"
    )
    status = models.CharField(max_length=20, choices=JobStatus.choices, default=JobStatus.QUEUED)
    config = models.JSONField(default=dict, blank=True)
    # Always set by admission (`config.resource_class`, else DEFAULT_RESOURCE_CLASS); the column
    # default only fills rows made outside it (tests, the admin).
    resource_class = models.CharField(max_length=50, default="medium")
    cost = models.FloatField(default=0)
    logs = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # X-Request-ID of the request that created the job: the grading worker's log lines about
    # the job carry it, so one id follows the job from the API call to its result.
    request_id = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=JobStatus.values), name="jobs_job_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "status"], name="jobs_owner_status"),
            models.Index(fields=["owner", "created_at"], name="jobs_owner_created"),
            # The grading queue's depth and oldest job, read at every metrics scrape.
            models.Index(
                fields=["created_at"],
                name="jobs_queued_created",
                condition=models.Q(status="queued"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class IdempotencyKey(models.Model):
    """A client's idempotency key, scoped to its user: (user, key) is unique.

    A row is first a *claim* (`job` empty, `locked_at` set, `lock_token` naming the request
    that holds it), inserted in its own short transaction before any work. The request that
    creates the job binds it (`job` set, `locked_at` cleared) in the job's own transaction,
    but only while it still holds the claim (`lock_token` matches). A claim older than
    `IDEMPOTENCY_LOCK_TIMEOUT` belongs to a request that died and may be taken over.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotency_keys"
    )
    key = models.CharField(max_length=256)
    # sha256 of the canonical payload (submission_id, config, reservation_id).
    fingerprint = models.CharField(max_length=64)
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, null=True, blank=True, related_name="idempotency_keys"
    )
    lock_token = models.CharField(max_length=32, blank=True, default="")
    locked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="jobs_idempotencykey_user_key"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="jobs_idemkey_expires")]

    def __str__(self) -> str:
        return f"{self.key} (user {self.user_id})"
