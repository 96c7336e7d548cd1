"""Handing jobs to grading workers: the enqueue after commit, and the reaper that re-enqueues
work a broker may have lost (a killed worker's expired lease, a queued job never delivered)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from apps.core.queue import GRADE_JOB, enqueue_on_commit
from apps.grading.selectors import grading_reapable_job_ids

logger = logging.getLogger(__name__)

# At most this many re-deliveries of each kind per reaper run (once a minute), so a long backlog
# of queued jobs is not flooded with duplicates.
REAP_BATCH = 200


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
