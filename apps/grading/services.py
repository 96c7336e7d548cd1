"""The grading worker: processing leases, results, take-overs, give-backs and the reaper.

This app writes its own `GradingAttempt` rows; the submission's status and lease columns are
changed through the submissions app's `submission_lease_*` functions, the job's through the
jobs app's services.

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

import dataclasses
import functools
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from apps.core.cluster import WorkerStopping, interruptible, worker_leave, worker_stopping
from apps.core.exceptions import InvalidTransition
from apps.core.logcontext import log_bind, log_context
from apps.core.queue import GRADE_JOB, enqueue_on_commit
from apps.grading.grader import GradingFile, GradingRequest, grader_get
from apps.grading.metrics import grading_attempt_started, grading_ended, grading_skipped
from apps.grading.models import GRADING_ATTEMPT_TRANSITIONS, GradingAttempt, GradingOutcome
from apps.grading.results import GradingResult, result_checked
from apps.grading.selectors import grading_job_get, grading_reapable_job_ids
from apps.jobs.models import ACTIVE_JOB_STATUSES, FINISHED_JOB_STATUSES, Job, JobStatus
from apps.jobs.services import job_finish, job_logs_sink, job_transition
from apps.submissions.models import SubmissionStatus
from apps.submissions.selectors import submission_file_list
from apps.submissions.services import (
    submission_lease_end,
    submission_lease_exhausted,
    submission_lease_release,
    submission_lease_renew,
    submission_lease_take,
    submission_lease_take_over,
)

logger = logging.getLogger(__name__)

# At most this many re-deliveries of each kind per reaper run (once a minute), so a long backlog
# of queued jobs is not flooded with duplicates.
REAP_BATCH = 200
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


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _finish_job(*, job: Job, to: JobStatus, **fields: object) -> None:
    """Move an active job to a finished status; a job already finished is left alone."""
    if job.status in ACTIVE_JOB_STATUSES:
        try:
            job_transition(job=job, to=to, **fields)
        except InvalidTransition:
            logger.info("grading: job %s changed under us; left as it is", job.pk)


def grading_lease_acquire(*, job_id: str) -> Lease | None:
    """Take the processing lease for the job's submission, or return None (logged) to skip.

    Locks the submission row. Skips when the job is unknown or finished (cancelled, completed,
    failed), when the submission is draft/completed/failed/review_pending, or when another
    worker holds a live lease. Takes over an expired lease (the old attempt is marked
    abandoned) unless GRADING_MAX_ATTEMPTS attempts were made, in which case the submission and
    the job end `failed` with the reason. On success: pending → processing (or a new token on a
    processing row), attempts + 1, job queued → running, one GradingAttempt row.
    """
    max_attempts = int(settings.GRADING_MAX_ATTEMPTS)
    with transaction.atomic():
        # One query: the job, and its submission locked.
        job = grading_job_get(job_id=job_id, for_update=True)
        if job is None:
            logger.warning("grading: job %s does not exist; skipped", job_id)
            grading_skipped(reason="unknown_job")
            return None
        submission = job.submission
        # Every line about this job carries the id of the request that created it.
        log_bind(submission_id=submission.pk, request_id=job.request_id)
        now = timezone.now()
        if job.status in FINISHED_JOB_STATUSES:
            logger.info("grading: job %s is already %s; skipped", job.pk, job.status)
            grading_skipped(reason="job_finished")
            return None
        status = submission.status
        if status in _FINAL:
            logger.info("grading: submission %s is already %s; skipped", submission.pk, status)
            grading_skipped(reason="submission_finished")
            _finish_job(
                job=job,
                to=JobStatus.FAILED,
                error=f"The submission was already {status}; nothing was graded.",
            )
            return None
        if status not in (SubmissionStatus.PENDING, SubmissionStatus.PROCESSING):
            logger.warning("grading: submission %s is %s; skipped", submission.pk, status)
            grading_skipped(reason="not_pending")
            return None

        token = os.urandom(16).hex()
        expires_at = now + timedelta(seconds=grading_lease_seconds())
        if status == SubmissionStatus.PROCESSING:
            expires = submission.lease_expires_at
            if submission.lease_token and expires is not None and expires > now:
                logger.info(
                    "grading: submission %s is being graded under a live lease; skipped",
                    submission.pk,
                )
                grading_skipped(reason="live_lease")
                return None
            GRADING_ATTEMPT_TRANSITIONS.move(
                GradingAttempt.objects.filter(
                    submission=submission, lease_token=submission.lease_token
                ),
                old=GradingOutcome.RUNNING,
                to=GradingOutcome.ABANDONED,
                finished_at=now,
                reason="The worker's lease expired before it wrote a result.",
            )
            if submission.attempts >= max_attempts:
                reason = (
                    f"Grading did not finish after {submission.attempts} attempts "
                    f"(GRADING_MAX_ATTEMPTS={max_attempts}); the last worker stopped "
                    "without a result."
                )
                submission_lease_exhausted(submission=submission, reason=reason)
                _finish_job(job=job, to=JobStatus.FAILED, error=reason)
                logger.warning("grading: submission %s failed: %s", submission.pk, reason)
                transaction.on_commit(functools.partial(grading_ended, outcome="exhausted"))
                return None
            if not submission_lease_take_over(
                submission_id=submission.pk,
                old_token=submission.lease_token,
                token=token,
                expires_at=expires_at,
            ):
                return None
            logger.info("grading: took over the expired lease of submission %s", submission.pk)
            takeover = True
        else:
            submission_lease_take(submission=submission, token=token, expires_at=expires_at)
            takeover = False
        attempt = (
            submission.attempts + 1
            if status == SubmissionStatus.PROCESSING
            else (submission.attempts)
        )
        if job.status == JobStatus.QUEUED:
            try:
                job_transition(job=job, to=JobStatus.RUNNING)
            except InvalidTransition:
                # Cancelled between our read and our write: take nothing.
                transaction.set_rollback(True)
                logger.info("grading: job %s changed while leasing; skipped", job.pk)
                return None
        transaction.on_commit(functools.partial(grading_attempt_started, takeover=takeover))
        GradingAttempt.objects.create(
            submission=submission,
            job=job,
            number=attempt,
            lease_token=token,
            lease_expires_at=expires_at,
            worker=_worker_name(),
            grader=str(settings.GRADER),
        )
        files = tuple(
            GradingFile(filename=f.filename, storage_name=f.storage_name)
            for f in submission_file_list(submission=submission)
        )
    request = GradingRequest(
        submission_id=submission.pk,
        job_id=job.pk,
        entrypoint=submission.entrypoint,
        config_file=submission.config_file,
        files=files,
        config=dict(job.config or {}),
    )
    return Lease(
        token=token,
        submission_id=submission.pk,
        job_id=job.pk,
        attempt=attempt,
        expires_at=expires_at,
        request=request,
    )


def grading_result_record(*, lease: Lease, result: GradingResult) -> bool:
    """Write a grading result if `lease` is still the submission's lease; False if it is not.

    The compare-and-set UPDATE matches (status=processing, lease_token=token): a worker whose
    lease was taken over after expiry, or cleared by a cancel, writes nothing (logged). On
    success, in one transaction: submission → completed / review_pending / failed (score,
    reason), job → completed (failed when the submission failed) with the captured logs, the
    attempt closed. A finished job frees its quota slot at once (quotas count job statuses).
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
            return False
        if target == SubmissionStatus.FAILED:
            finished = job_finish(
                job_id=lease.job_id, to=JobStatus.FAILED, logs=result.logs, error=result.reason
            )
        else:
            finished = job_finish(
                job_id=lease.job_id, to=JobStatus.COMPLETED, logs=result.logs, error=""
            )
        if not finished:
            logger.info("grading: job %s changed under us; left as it is", lease.job_id)
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


def grading_lease_renew(*, lease: Lease) -> bool:
    """Push the lease's expiry to now + the lease length while it is still ours (conditional
    UPDATE on the token); False once it is not (taken over, cancelled, result written)."""
    expires_at = timezone.now() + timedelta(seconds=grading_lease_seconds())
    return submission_lease_renew(
        submission_id=lease.submission_id, token=lease.token, expires_at=expires_at
    )


class _LeaseKeeper(threading.Thread):
    """Renews a lease every third of its length while the grader runs in this worker.

    A slow preparation (a large archive from S3) then never lets another delivery take the lease
    of a worker that is alive; a killed worker stops renewing and its lease expires as before.
    A grader that hangs is bounded by django-q2's `timeout`, which kills the worker.
    """

    def __init__(self, lease: Lease) -> None:
        super().__init__(name=f"lease-{lease.submission_id}", daemon=True)
        self.lease = lease
        self.stopped = threading.Event()

    def run(self) -> None:
        interval = max(0.5, grading_lease_seconds() / 3)
        try:
            while not self.stopped.wait(interval):
                if not grading_lease_renew(lease=self.lease):
                    return
        except Exception:
            logger.exception("grading: cannot renew the lease of %s", self.lease.submission_id)
        finally:
            connections.close_all()  # this thread's own connections

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)


def grading_run(*, job_id: str) -> str:
    """Grade the job's submission at most once per lease; idempotent under any redelivery.

    Takes the lease (a short transaction), runs the configured grader with no transaction and
    no lock held while a thread renews the lease, then records the result under the lease.
    Returns what happened: `skipped`, `lease_lost`, or the submission's new status. A grader
    that raises fails the attempt with the exception as the reason. A stop of the worker
    (SIGTERM, `apps.core.cluster`) interrupts the grader at once: the lease is given back
    uncounted and the job enqueued again (`interrupted`); a delivery that reaches a stopping
    worker is enqueued again untouched (`requeued`). Every log line of the run carries the
    job's, its submission's and its creating request's ids.
    """
    with log_context(job_id=job_id):
        outcome = _grading_run(job_id=job_id)
        logger.info("grading: job %s: %s", job_id, outcome)
        return outcome


def _grading_run(*, job_id: str) -> str:
    if worker_stopping():
        # Delivered to a worker that is stopping: back to the queue for the next one.
        grading_enqueue(job_id=job_id)
        worker_leave()
        return "requeued"
    lease = grading_lease_acquire(job_id=job_id)
    if lease is None:
        return "skipped"
    started = time.monotonic()
    # Inside a caller's transaction (tests) another connection could not see the lease anyway.
    keeper = None if connection.in_atomic_block else _LeaseKeeper(lease)
    if keeper is not None:
        keeper.start()
    result: GradingResult | None = None
    try:
        # Live logs go to the job through the jobs app's one seam.
        request = dataclasses.replace(lease.request, on_output=job_logs_sink(job_id=lease.job_id))
        with interruptible():
            result = grader_get().grade(request)
    except WorkerStopping:
        pass  # given back below, once the keeper no longer renews the lease
    except Exception as exc:
        logger.exception("grading: the grader raised on submission %s", lease.submission_id)
        result = GradingResult(
            outcome=SubmissionStatus.FAILED.value,
            reason=f"The grader raised {type(exc).__name__}: {exc}",
        )
    finally:
        if keeper is not None:
            keeper.stop()
    if result is None:
        grading_lease_give_back(lease=lease)
        worker_leave()
        return "interrupted"
    result = result_checked(result)
    seconds = time.monotonic() - started
    if grading_result_record(lease=lease, result=result):
        grading_ended(outcome=result.outcome, seconds=seconds)
        return result.outcome
    grading_ended(outcome="lease_lost", seconds=seconds)
    return "lease_lost"


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


def grading_enqueue(*, job_id: str) -> None:
    """Hand the job to a grading worker once the current transaction commits."""
    enqueue_on_commit(GRADE_JOB, job_id)


def grading_reap_expired(*, now: datetime | None = None) -> list[str]:
    """Re-enqueue grading for work a broker may have lost; returns the job ids enqueued.

    * processing submissions whose lease has expired (a worker was killed; django-q2's ORM
      broker re-delivers only after its `retry` window, and the Redis broker never does), and
    * pending submissions whose queued job is older than the broker's `retry` window.
    The re-delivered task takes over the lease or fails the submission after
    GRADING_MAX_ATTEMPTS; a duplicate delivery is a logged no-op, so reaping is always safe.
    """
    moment = now or timezone.now()
    retry = float(settings.Q_CLUSTER.get("retry", 60))
    job_ids = grading_reapable_job_ids(now=moment, retry_seconds=retry, limit=REAP_BATCH)
    for job_id in job_ids:
        grading_enqueue(job_id=job_id)
    if job_ids:
        logger.info("grading: re-enqueued %d job(s): %s", len(job_ids), ", ".join(job_ids))
    return job_ids
