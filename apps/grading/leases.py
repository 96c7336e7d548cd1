"""The grading worker's side of the processing lease: take it (or take over an expired one),
renew it, give it back, and write the result under it.

This app writes its own `GradingAttempt` rows; the submission's status and lease columns are
changed only through `apps.submissions.services.leases`, the job's through the jobs app's
services.

django-q2 delivers a task at least once, possibly twice at the same time or long after the
result was written. The guarantees, all enforced by the database:

* One grader run per lease: the lease is taken with the submission row locked
  (`select_for_update`; BEGIN IMMEDIATE on SQLite) and a new random token; a delivery that
  finds a live lease, a finished submission or a finished job does nothing but log.
* One result per submission: the result is written by a compare-and-set UPDATE that matches the
  lease token, so a worker whose lease was taken over (or cleared by a cancel) loses its write.
* Bounded retries: every lease counts an attempt; a lease found expired after
  GRADING_MAX_ATTEMPTS attempts ends the submission in `failed` with the reason. A lease given
  back by a stopping worker is not counted.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.core.logcontext import log_bind
from apps.grading.fault_hooks import WORKER_LOST, platform_fault_hooks_run
from apps.grading.grader import GradingFile, GradingRequest
from apps.grading.metrics import grading_attempt_started, grading_ended, grading_skipped
from apps.grading.models import GRADING_ATTEMPT_TRANSITIONS, GradingAttempt, GradingOutcome
from apps.grading.phases import phase_outcome_record
from apps.grading.queueing import grading_enqueue
from apps.grading.results import GradingResult
from apps.grading.selectors import grading_job_get
from apps.jobs.models import ACTIVE_JOB_STATUSES, FINISHED_JOB_STATUSES, Job, JobStatus
from apps.jobs.services import job_finish, job_transition
from apps.submissions.models import SubmissionStatus
from apps.submissions.selectors import submission_file_list
from apps.submissions.services.leases import (
    submission_lease_end,
    submission_lease_exhausted,
    submission_lease_release,
    submission_lease_renew,
    submission_lease_take,
    submission_lease_take_over,
)

logger = logging.getLogger(__name__)

_FINAL = (SubmissionStatus.COMPLETED, SubmissionStatus.FAILED, SubmissionStatus.REVIEW_PENDING)


def grading_lease_seconds() -> float:
    """How long a processing lease lasts: GRADING_TIMEOUT plus a margin for copying the files
    and writing the result (a quarter of the timeout, between 1 s and 60 s)."""
    timeout = float(settings.GRADING_TIMEOUT)
    return timeout + min(60.0, max(1.0, timeout / 4))


@dataclass(frozen=True)
class Lease:
    token: str
    submission_id: str
    job_id: str
    attempt: int
    expires_at: datetime
    request: GradingRequest


@dataclass(frozen=True)
class _Taken:
    """A lease just written: its token and expiry, the attempt it counts, and whether it
    replaced an expired one."""

    token: str
    expires_at: datetime
    attempt: int
    takeover: bool


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _finish_job(*, job: Job, to: JobStatus, error: str) -> None:
    """Move an active job to a finished status; a job already finished is left alone."""
    if job.status in ACTIVE_JOB_STATUSES:
        try:
            job_transition(job=job, to=to, error=error)
        except InvalidTransition:
            logger.info("grading: job %s changed under us; left as it is", job.pk)


def grading_lease_acquire(*, job_id: str) -> Lease | None:
    """Take the processing lease for the job's submission, or return None (logged) to skip.

    Locks the submission row. Skips when the job is unknown or finished (cancelled, completed,
    failed), when the submission is draft/completed/failed/review_pending, or when another
    worker holds a live lease. Takes over an expired lease (the old attempt is marked
    abandoned) unless GRADING_MAX_ATTEMPTS attempts were made, in which case the submission and
    the job end `failed` with the reason. On success: pending → processing (or a new token on a
    processing row), attempts + 1, job queued → running, one GradingAttempt row numbered with
    the attempt the lease counts.
    """
    with transaction.atomic():
        job = _job_to_grade(job_id=job_id)
        if job is None:
            return None
        taken = _lease_take(job=job)
        if taken is None or not _job_start(job=job):
            return None
        _attempt_record(job=job, taken=taken)
        files = tuple(
            GradingFile(filename=f.filename, storage_name=f.storage_name)
            for f in submission_file_list(submission=job.submission)
        )
    return _lease_build(job=job, taken=taken, files=files)


def _skipped(reason: str, message: str, *args: object, level: int = logging.INFO) -> None:
    logger.log(level, "grading: " + message + "; skipped", *args)
    grading_skipped(reason=reason)


def _job_to_grade(*, job_id: str) -> Job | None:
    """The job with its submission row locked, or None (logged) when there is nothing to
    grade. A job whose submission already has a result is failed with the reason."""
    # One query: the job, and its submission locked.
    job = grading_job_get(job_id=job_id, for_update=True)
    if job is None:
        _skipped("unknown_job", "job %s does not exist", job_id, level=logging.WARNING)
        return None
    submission = job.submission
    # Every line about this job carries the id of the request that created it.
    log_bind(submission_id=submission.pk, request_id=job.request_id)
    if job.status in FINISHED_JOB_STATUSES:
        _skipped("job_finished", "job %s is already %s", job.pk, job.status)
        return None
    status = submission.status
    if status in _FINAL:
        _skipped("submission_finished", "submission %s is already %s", submission.pk, status)
        _finish_job(
            job=job,
            to=JobStatus.FAILED,
            error=f"The submission was already {status}; nothing was graded.",
        )
        return None
    if status not in (SubmissionStatus.PENDING, SubmissionStatus.PROCESSING):
        _skipped("not_pending", "submission %s is %s", submission.pk, status, level=logging.WARNING)
        return None
    return job


def _lease_take(*, job: Job) -> _Taken | None:
    """A new lease on the locked submission: pending → processing, or the take-over of an
    expired lease (`_lease_take_over`). None when nothing was taken."""
    submission = job.submission
    token = os.urandom(16).hex()
    expires_at = timezone.now() + timedelta(seconds=grading_lease_seconds())
    if submission.status == SubmissionStatus.PROCESSING:
        return _lease_take_over(job=job, token=token, expires_at=expires_at)
    attempt = submission_lease_take(submission=submission, token=token, expires_at=expires_at)
    if attempt is None:
        logger.info("grading: submission %s changed while leasing; skipped", submission.pk)
        return None
    return _Taken(token=token, expires_at=expires_at, attempt=attempt, takeover=False)


def _lease_take_over(*, job: Job, token: str, expires_at: datetime) -> _Taken | None:
    """Take over the processing submission's lease if it expired: its attempt is marked
    abandoned, then the lease is replaced, or, with no attempt left, the submission and the
    job fail (`_lease_exhaust`). None when the lease is live or nothing was taken."""
    submission = job.submission
    now = timezone.now()
    expires = submission.lease_expires_at
    if submission.lease_token and expires is not None and expires > now:
        _skipped("live_lease", "submission %s is being graded under a live lease", submission.pk)
        return None
    GRADING_ATTEMPT_TRANSITIONS.move(
        GradingAttempt.objects.filter(submission=submission, lease_token=submission.lease_token),
        old=GradingOutcome.RUNNING,
        to=GradingOutcome.ABANDONED,
        finished_at=now,
        reason="The worker's lease expired before it wrote a result.",
    )
    if submission.attempts >= int(settings.GRADING_MAX_ATTEMPTS):
        _lease_exhaust(job=job)
        return None
    attempt = submission_lease_take_over(submission=submission, token=token, expires_at=expires_at)
    if attempt is None:
        return None
    logger.info("grading: took over the expired lease of submission %s", submission.pk)
    return _Taken(token=token, expires_at=expires_at, attempt=attempt, takeover=True)


def _lease_exhaust(*, job: Job) -> None:
    """The last lease expired and no attempt is left: the submission and the job fail."""
    submission = job.submission
    max_attempts = int(settings.GRADING_MAX_ATTEMPTS)
    reason = (
        f"Grading did not finish after {submission.attempts} attempts "
        f"(GRADING_MAX_ATTEMPTS={max_attempts}); the last worker stopped without a result."
    )
    submission_lease_exhausted(submission=submission, reason=reason)
    _finish_job(job=job, to=JobStatus.FAILED, error=reason)
    platform_fault_hooks_run(submission_id=submission.pk, fault=WORKER_LOST)
    logger.warning("grading: submission %s failed: %s", submission.pk, reason)
    transaction.on_commit(functools.partial(grading_ended, outcome="exhausted"))


def _job_start(*, job: Job) -> bool:
    """queued → running. False, rolling the lease back, when the job was cancelled between
    the read and this write."""
    if job.status != JobStatus.QUEUED:
        return True
    try:
        job_transition(job=job, to=JobStatus.RUNNING)
    except InvalidTransition:
        transaction.set_rollback(True)
        logger.info("grading: job %s changed while leasing; skipped", job.pk)
        return False
    return True


def _attempt_record(*, job: Job, taken: _Taken) -> None:
    """The audit row of the new lease, numbered with the attempt it counts."""
    transaction.on_commit(functools.partial(grading_attempt_started, takeover=taken.takeover))
    GradingAttempt.objects.create(
        submission=job.submission,
        job=job,
        number=taken.attempt,
        lease_token=taken.token,
        lease_expires_at=taken.expires_at,
        worker=_worker_name(),
        grader=str(settings.GRADER),
    )


def _lease_build(*, job: Job, taken: _Taken, files: tuple[GradingFile, ...]) -> Lease:
    submission = job.submission
    request = GradingRequest(
        submission_id=submission.pk,
        job_id=job.pk,
        entrypoint=submission.entrypoint,
        config_file=submission.config_file,
        files=files,
        config=dict(job.config or {}),
    )
    return Lease(
        token=taken.token,
        submission_id=submission.pk,
        job_id=job.pk,
        attempt=taken.attempt,
        expires_at=taken.expires_at,
        request=request,
    )


def grading_result_record(*, lease: Lease, result: GradingResult) -> bool:
    """Write a grading result if `lease` is still the submission's lease; False if it is not.

    The compare-and-set UPDATE matches (status=processing, lease_token=token): a worker whose
    lease was taken over after expiry, or cleared by a cancel, writes nothing (logged). On
    success, in one transaction: submission → completed / review_pending / failed (score,
    reason), job → completed (failed when the submission failed) with the captured logs, the
    attempt closed, and a phase submission's scores or scoring failure recorded by the phase
    provider (`apps.grading.phases`). A finished job frees its quota slot at once (quotas count
    job statuses).
    """
    now = timezone.now()
    target = SubmissionStatus(result.outcome)
    with transaction.atomic():
        # The compare-and-set on the lease writes the result in the same UPDATE.
        held = submission_lease_end(
            submission_id=lease.submission_id,
            token=lease.token,
            to=target,
            score=result.score,
            reason=result.reason,
        )
        if not held:
            _attempt_lease_lost(lease=lease, result=result, now=now)
            return False
        failed = target == SubmissionStatus.FAILED
        if not job_finish(
            job_id=lease.job_id,
            to=JobStatus.FAILED if failed else JobStatus.COMPLETED,
            logs=result.logs,
            error=result.reason if failed else "",
        ):
            logger.info("grading: job %s changed under us; left as it is", lease.job_id)
        if result.phase is not None:
            phase_outcome_record(submission_id=lease.submission_id, outcome=result.phase)
        GRADING_ATTEMPT_TRANSITIONS.move(
            GradingAttempt.objects.filter(lease_token=lease.token),
            old=GradingOutcome.RUNNING,
            to=target.value,
            finished_at=now,
            exit_code=result.exit_code,
            score=result.score,
            reason=result.reason,
        )
    logger.info("grading: submission %s is %s", lease.submission_id, target)
    return True


def _attempt_lease_lost(*, lease: Lease, result: GradingResult, now: datetime) -> None:
    GRADING_ATTEMPT_TRANSITIONS.move(
        GradingAttempt.objects.filter(lease_token=lease.token),
        old=(GradingOutcome.RUNNING, GradingOutcome.ABANDONED),
        to=GradingOutcome.LEASE_LOST,
        finished_at=now,
        exit_code=result.exit_code,
        score=result.score,
        reason=f"Result discarded: the lease was lost. ({result.reason})".strip(),
    )
    logger.warning(
        "grading: submission %s no longer holds lease %s; result discarded",
        lease.submission_id,
        lease.token,
    )


def grading_lease_renew(*, lease: Lease) -> bool:
    """Push the lease's expiry to now + the lease length while it is still ours (conditional
    UPDATE on the token); False once it is not (taken over, cancelled, result written)."""
    expires_at = timezone.now() + timedelta(seconds=grading_lease_seconds())
    return submission_lease_renew(
        submission_id=lease.submission_id, token=lease.token, expires_at=expires_at
    )


def grading_lease_give_back(*, lease: Lease) -> bool:
    """The worker is stopping mid-grading: end the attempt without a result and hand the work
    on. In one transaction the lease expires now with its attempt not counted
    (`submission_lease_release`) and the attempt is closed `abandoned`; after commit the job is
    enqueued again, so the next worker takes the lease over at once. False (nothing written
    but the log) when the lease was no longer the submission's."""
    if not connection.in_atomic_block:
        # The stop may have interrupted a query (live logs): start from a fresh connection.
        connection.close()
    with transaction.atomic():
        released = submission_lease_release(submission_id=lease.submission_id, token=lease.token)
        if released:
            GRADING_ATTEMPT_TRANSITIONS.move(
                GradingAttempt.objects.filter(lease_token=lease.token),
                old=GradingOutcome.RUNNING,
                to=GradingOutcome.ABANDONED,
                finished_at=timezone.now(),
                reason="The worker stopped before the grading finished; not counted as an attempt.",
            )
            grading_enqueue(job_id=lease.job_id)
    logger.warning(
        "grading: worker stopping; submission %s given back%s",
        lease.submission_id,
        "" if released else " (its lease was no longer ours)",
    )
    return released
