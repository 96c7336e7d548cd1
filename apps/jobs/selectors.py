"""Reads of jobs and idempotency keys."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Count, Min, QuerySet

from apps.core.selectors import owned_get
from apps.jobs.models import IdempotencyKey, Job, JobStatus


def job_list(*, user: AbstractBaseUser | AnonymousUser, status: str | None = None) -> QuerySet[Job]:
    """The user's jobs, newest first, optionally of one status, with their submissions (state
    and score) and without their logs."""
    queryset = Job.objects.filter(owner_id=user.pk).select_related("submission").defer("logs")
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


@dataclass(frozen=True)
class KeyLookup:
    """What a plain read of an idempotency key row says (no lock)."""

    fingerprint: str
    live: bool  # not past its TTL at the time asked
    job: Job | None  # the bound job, loaded with its id and status only


def idempotency_key_lookup(*, user_id: int, key: str, now: dt.datetime) -> KeyLookup | None:
    """The user's key row with its job's current status, in one statement, or None.

    On the submission hot path for every request with a key (the replay answer comes from it),
    so written in SQL: the ORM's select_related spent longer compiling it than the database
    running it, and loaded the whole job (logs included) where a replay needs two columns.
    """
    ops = connection.ops
    keys = ops.quote_name(IdempotencyKey._meta.db_table)
    jobs = ops.quote_name(Job._meta.db_table)
    sql = (
        f"SELECT k.fingerprint, k.expires_at > %s, k.job_id, j.status FROM {keys} k"  # noqa: S608
        f" LEFT JOIN {jobs} j ON j.id = k.job_id WHERE k.user_id = %s AND k.key = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ops.adapt_datetimefield_value(now), user_id, key])
        row = cursor.fetchone()
    if row is None:
        return None
    fingerprint, live, job_id, status = row
    job = None
    if job_id is not None and status is not None:
        job = Job.from_db(connection.alias, ["id", "status"], [job_id, status])
    return KeyLookup(fingerprint=fingerprint, live=bool(live), job=job)


def job_queue_stats() -> tuple[int, dt.datetime | None]:
    """(jobs queued, creation time of the oldest), one aggregate over the partial index
    `jobs_queued_created` (cheap enough for every metrics scrape)."""
    row = Job.objects.filter(status=JobStatus.QUEUED).aggregate(
        n=Count("pk"), oldest=Min("created_at")
    )
    return int(row["n"] or 0), row["oldest"]
