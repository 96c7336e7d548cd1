"""django-q2 tasks of grading. Each takes ids and is idempotent (delivery is at least once)."""

from __future__ import annotations

from apps.grading.queueing import grading_reap_expired
from apps.grading.services import grading_run


def grade_job(job_id: str) -> str:
    """Grade the submission of job `job_id`; a duplicate or late delivery is a logged no-op, and
    a stopping worker hands the job back to the queue (`grading_run`)."""
    return grading_run(job_id=job_id)


def reap_expired_leases() -> list[str]:
    """Periodic: re-enqueue grading whose worker died or whose task the broker lost."""
    return grading_reap_expired()
