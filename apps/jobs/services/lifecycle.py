"""A job's status after it exists: transitions, the grader's finish, running logs (the sink a
grader writes them through), cancellation.

This module is the only code that writes a job's status, and every write is the one
compare-and-set of `apps.core.transitions` over `JOB_TRANSITIONS`: `job_transition` (on the
status the caller read) and `job_finish` (from whichever active status may reach the finished
one, without a read).
A job is born `queued` by admission (`apps.jobs.admission`); nothing else writes `status`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, transaction
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.jobs.cancel_hooks import job_cancelled_hooks_run
from apps.jobs.metrics import job_finished
from apps.jobs.models import FINISHED_JOB_STATUSES, JOB_TRANSITIONS, Job, JobStatus
from apps.jobs.selectors import job_get
from apps.submissions.models import IN_FLIGHT_STATUSES
from apps.submissions.selectors import submission_get
from apps.submissions.services.leases import submission_lease_cancel

logger = logging.getLogger(__name__)


def job_transition(*, job: Job, to: JobStatus, **fields: Any) -> Job:
    """Move a job to `to` (InvalidTransition unless the table allows it).

    Compare-and-set on the status the caller read, so a late or duplicate caller never
    overwrites a newer state. Sets `started_at` on running and `finished_at` on a finished
    status. A finished job stops counting against the concurrent-job quota at once, because
    quota counts are computed from job statuses.
    """
    now = timezone.now()
    values: dict[str, Any] = dict(fields)
    if to == JobStatus.RUNNING and "started_at" not in fields:
        values["started_at"] = now
    if to in FINISHED_JOB_STATUSES and "finished_at" not in fields:
        values["finished_at"] = now
    JOB_TRANSITIONS.move_one(job, to=to, **values)
    if to in FINISHED_JOB_STATUSES:
        transaction.on_commit(partial(job_finished, status=to))
    return job


def job_finish(*, job_id: str, to: JobStatus, **fields: Any) -> bool:
    """Move an active job to the finished status `to` in one compare-and-set UPDATE, from
    whichever active status the transition table allows (`finished_at` set). False, writing
    nothing, when the job is already finished or cannot go to `to` from its status."""
    if to not in FINISHED_JOB_STATUSES:
        raise ValueError(f"{to} is not a finished status")
    values: dict[str, Any] = {**fields}
    values.setdefault("finished_at", timezone.now())
    jobs = Job.objects.filter(pk=job_id)
    # From every status the table allows to reach `to`: only active ones do.
    finished = JOB_TRANSITIONS.move(jobs, to=to, **values) == 1
    if finished:
        transaction.on_commit(partial(job_finished, status=to))
    return finished


def job_logs_progress(*, job_id: str, logs: str) -> bool:
    """Show a running job's output so far (`GET /api/jobs/{id}/logs/` while it runs): one
    conditional UPDATE of `logs` only, while the job is `running`, so it never touches a
    finished job's final logs (written by `job_finish`). False when the job is not running."""
    return Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(logs=logs) == 1


def job_logs_sink(*, job_id: str) -> Callable[[str], None]:
    """The one seam through which a running program's output reaches its job: a callable
    `(logs so far) -> None` for a grader to call while the program runs, writing through
    `job_logs_progress`. It never raises for a database error (logged): the final logs are
    written with the result, and a hiccup of the live view must not end a grading."""

    def show(logs: str) -> None:
        try:
            job_logs_progress(job_id=job_id, logs=logs)
        except DatabaseError:
            logger.warning("jobs: cannot show the running logs of job %s", job_id, exc_info=True)

    return show


def job_cancel(*, job_id: str, user: AbstractBaseUser | None = None) -> Job:
    """Cancel a queued or running job; its slot is free at once. Idempotent for cancelled jobs.

    `user` restricts it to the owner (NotFound / PermissionDenied; None = staff). Locks the
    submission row, then the job row (the grading worker's order). The job's submission, if
    `pending` or `processing`, becomes `failed` ("job cancelled") and its processing lease is
    cleared, so a grading worker still running loses the lease and cannot write a result.
    A finished job raises InvalidTransition. The hooks other apps registered
    (`apps.jobs.cancel_hooks`) run in the same transaction.
    """
    found = job_get(job_id=job_id, user=user)
    with transaction.atomic():
        submission = submission_get(submission_id=found.submission_id, for_update=True)
        job = job_get(job_id=job_id, for_update=True)
        if job.status == JobStatus.CANCELLED:
            return job
        if job.status in FINISHED_JOB_STATUSES:
            raise InvalidTransition(
                f"Job {job.pk} is {job.status}; a finished job cannot be cancelled.",
                extra={"from_status": job.status, "to_status": JobStatus.CANCELLED.value},
            )
        started = job.status != JobStatus.QUEUED
        job_transition(job=job, to=JobStatus.CANCELLED, error="cancelled")
        if submission.status in IN_FLIGHT_STATUSES:
            submission_lease_cancel(submission=submission, reason="job cancelled")
        job_cancelled_hooks_run(submission_id=submission.pk, started=started)
    return job
