"""Cleanup kind `claims` and the periodic lease reaper, registered at start-up."""

from __future__ import annotations

import datetime as dt

from django.db.models import Q

from apps.core.cleanup import CleanupReport, register_cleanup
from apps.core.schedules import PeriodicTask, register_periodic_task
from apps.review.models import ReviewClaim
from apps.submissions.models import SubmissionStatus


@register_cleanup("claims", "Review claims that expired or whose submission left review")
def claims_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Delete expired claims (their expiry was already in force at query time; this only tidies).

    A conditional DELETE on `expires_at <= now`, so a claim renewed meanwhile is kept.
    """
    stale = ReviewClaim.objects.filter(
        Q(expires_at__lte=now) | ~Q(submission__status=SubmissionStatus.REVIEW_PENDING)
    )
    items = [str(pk) for pk in stale.values_list("submission_id", flat=True)]
    if dry_run:
        return CleanupReport(kind="claims", count=len(items), items=items)
    removed, _ = (
        ReviewClaim.objects.filter(submission_id__in=items)
        .filter(Q(expires_at__lte=now) | ~Q(submission__status=SubmissionStatus.REVIEW_PENDING))
        .delete()
    )
    return CleanupReport(kind="claims", count=removed, items=items)


register_periodic_task(
    PeriodicTask(
        name="yoyaku.grading.reap_expired_leases",
        func="apps.review.tasks.reap_expired_leases",
        minutes=1,
    )
)
