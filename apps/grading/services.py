"""The grading run: take the lease, run the grader with no transaction and no lock held while
a thread renews the lease, then record the result under it. The lease itself (take, renew,
give back, the result's compare-and-set) is `apps.grading.leases`, over the submissions app's
`apps.submissions.services.leases`; enqueueing and the reaper are `apps.grading.queueing`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from django.db import connection, connections

from apps.core.cluster import WorkerStopping, interruptible, worker_leave, worker_stopping
from apps.core.logcontext import log_context
from apps.grading.grader import grader_get
from apps.grading.leases import (
    Lease,
    grading_lease_acquire,
    grading_lease_give_back,
    grading_lease_renew,
    grading_lease_seconds,
    grading_result_record,
)
from apps.grading.metrics import grading_ended
from apps.grading.phase_results import phase_scoring_failed
from apps.grading.phases import phase_plan_get
from apps.grading.queueing import grading_enqueue
from apps.grading.results import GradingResult, result_checked
from apps.jobs.services import job_logs_sink
from apps.submissions.models import SubmissionStatus

logger = logging.getLogger(__name__)


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


def _grader_raised(*, submission_id: str, exc: Exception) -> GradingResult:
    """The result of a grader that raised: the platform could not run the submission. A phase
    submission fails `scoring_failed` (a platform fault, refunded; hosts read why)."""
    why = f"The grader raised {type(exc).__name__}: {exc}"
    try:
        plan = phase_plan_get(submission_id=submission_id)
    except Exception:
        logger.exception("grading: no scoring plan for submission %s", submission_id)
        plan = None
    if plan is not None:
        return phase_scoring_failed(plan, why, logs="")
    return GradingResult(outcome=SubmissionStatus.FAILED.value, reason=why)


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
        result = _grader_raised(submission_id=lease.submission_id, exc=exc)
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
