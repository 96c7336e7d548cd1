"""Reads of grading: the job to grade, the work to reap, grading attempts and their outcomes."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count

from apps.grading.models import GradingAttempt, GradingOutcome
from apps.jobs.models import ACTIVE_JOB_STATUSES, Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus


def grading_job_get(*, job_id: str, for_update: bool = False) -> Job | None:
    """The job with its submission in one query, or None. With `for_update` the submission's
    row (only it: the job is changed by compare-and-set) is locked until the transaction ends."""
    queryset = Job.objects.select_related("submission")
    if for_update:
        queryset = queryset.select_for_update(of=("submission",))
    return queryset.filter(pk=job_id).first()


def grading_attempt_list(*, submission_id: str) -> list[GradingAttempt]:
    """Every grading attempt of the submission, first first."""
    return list(GradingAttempt.objects.filter(submission_id=submission_id).order_by("number"))


def grading_outcomes_since(*, since: datetime) -> dict[str, int]:
    """Grading attempts that finished since `since`, counted by outcome (index
    `grading_attempt_finished`)."""
    rows = (
        GradingAttempt.objects.filter(finished_at__gte=since)
        .values("outcome")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {row["outcome"]: int(row["n"]) for row in rows}


def grading_review_requested_at(*, submission_id: str) -> datetime | None:
    """When grading last sent the submission to review_pending: the end of that attempt."""
    return (
        GradingAttempt.objects.filter(
            submission_id=submission_id, outcome=GradingOutcome.REVIEW_PENDING
        )
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )


def grading_reapable_job_ids(*, now: datetime, retry_seconds: float, limit: int) -> list[str]:
    """Jobs whose grading a broker may have lost, each the latest active job of its submission:

    * processing submissions whose lease has expired (a worker was killed or stopped), and
    * pending submissions whose queued job is older than the broker's re-delivery window.

    At most `limit` of each kind, oldest first.
    """
    expired = (
        Submission.objects.filter(status=SubmissionStatus.PROCESSING, lease_expires_at__lte=now)
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )
    stale_pending = (
        Submission.objects.filter(
            status=SubmissionStatus.PENDING,
            jobs__status=JobStatus.QUEUED,
            jobs__created_at__lte=now - timedelta(seconds=retry_seconds),
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    job_ids: list[str] = []
    for submission_id in dict.fromkeys([*expired, *stale_pending]):
        job_id = (
            Job.objects.filter(submission_id=submission_id, status__in=ACTIVE_JOB_STATUSES)
            .order_by("-created_at")
            .values_list("pk", flat=True)
            .first()
        )
        if job_id is not None:
            job_ids.append(job_id)
    return job_ids
