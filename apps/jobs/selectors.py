"""Reads of jobs and idempotency keys."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.core.selectors import owned_get
from apps.jobs.models import Job


def job_list(*, user: AbstractBaseUser | AnonymousUser, status: str | None = None) -> QuerySet[Job]:
    """The user's jobs, newest first, optionally of one status."""
    queryset = Job.objects.filter(owner_id=user.pk)
    if status:
        queryset = queryset.filter(status=status)
    return queryset.order_by("-created_at", "id")


def job_get(
    *,
    job_id: str,
    user: AbstractBaseUser | AnonymousUser | None = None,
    for_update: bool = False,
) -> Job:
    """The job, owned by `user` when given (404 unknown, 403 someone else's).

    With `for_update` the row is locked (call inside `transaction.atomic()`).
    """
    return owned_get(
        Job.objects.all(), lookup={"pk": job_id}, user=user, label="Job", for_update=for_update
    )
