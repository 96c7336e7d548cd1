"""Reads of jobs, idempotency keys and the quota usage that jobs and reservations make."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Count, Min, QuerySet
from django.utils import timezone

from apps.core.selectors import owned_get
from apps.core.sql import SqlStatement
from apps.jobs.models import ACTIVE_JOB_STATUSES, IdempotencyKey, Job, JobStatus
from apps.quotas.models import Reservation
from apps.quotas.selectors import month_start, quota_limits, quota_policy_get, quota_warnings
from apps.schedule.selectors import life_living_count
from apps.submissions.selectors import submission_storage_bytes


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


_KEY_LOOKUP = SqlStatement(
    "SELECT k.{k.fingerprint}, k.{k.expires_at} > %s, k.{k.job}, j.{j.status} FROM {k} k"
    " LEFT JOIN {j} j ON j.{j.id} = k.{k.job} WHERE k.{k.user} = %s AND k.{k.key} = %s",
    k=IdempotencyKey,
    j=Job,
)


def job_latest(*, submission_id: str) -> Job | None:
    """The submission's most recent job (None when it never had one)."""
    return Job.objects.filter(submission_id=submission_id).order_by("-created_at", "-id").first()


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
    row = _KEY_LOOKUP.fetchone([connection.ops.adapt_datetimefield_value(now), user_id, key])
    return None if row is None else key_lookup_of(row)


def key_lookup_of(row: Sequence[Any]) -> KeyLookup:
    """A key row read as `_KEY_LOOKUP` reads it: (fingerprint, live, job id, job status)."""
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


# --- Quota usage: the jobs and reservations that hold a user's slots ----------------------------

ROLLING_WINDOW = dt.timedelta(hours=24)


@dataclass(frozen=True)
class QuotaUsage:
    active_jobs: int
    active_reservations: int
    jobs_last_24h: int
    cost_this_month: float

    @property
    def concurrent(self) -> int:
        return self.active_jobs + self.active_reservations


_ACTIVE_MARKS = ", ".join(["%s"] * len(ACTIVE_JOB_STATUSES))
# The usage's four counts as one row (`quota_usage_params`; `{j}` Job, `{r}` Reservation): a
# template the jobs admission also uses inside its function (`apps.jobs.admission_function`).
QUOTA_USAGE_SQL = (
    # Only placeholders are formatted in (one `%s` per active status); values are parameters.
    "SELECT (SELECT COUNT(*) FROM {j} WHERE {j.owner} = %s"  # noqa: S608
    f" AND {{j.status}} IN ({_ACTIVE_MARKS})),"
    " (SELECT COUNT(*) FROM {j} WHERE {j.owner} = %s AND {j.created_at} > %s),"
    " (SELECT COALESCE(SUM({j.cost}), 0) FROM {j} WHERE {j.owner} = %s AND {j.created_at} >= %s),"
    " (SELECT COUNT(*) FROM {r} WHERE {r.user} = %s AND {r.consumed_at} IS NULL"
    " AND {r.released_at} IS NULL AND {r.expires_at} > %s)"
)
_USAGE = SqlStatement(QUOTA_USAGE_SQL, j=Job, r=Reservation)


def quota_usage_params(*, user_id: int, now: dt.datetime) -> list[Any]:
    """The parameters of `QUOTA_USAGE_SQL` for the user at `now`."""
    adapt = connection.ops.adapt_datetimefield_value
    return [
        user_id,
        *ACTIVE_JOB_STATUSES,
        user_id,
        adapt(now - ROLLING_WINDOW),
        user_id,
        adapt(month_start(now)),
        user_id,
        adapt(now),
    ]


def quota_usage_of(row: Sequence[Any] | None) -> QuotaUsage:
    """The usage a row of `QUOTA_USAGE_SQL` gives (its first four columns)."""
    row = row or (0, 0, 0, 0)  # an aggregate always answers one row
    return QuotaUsage(
        active_jobs=int(row[0]),
        active_reservations=int(row[3]),
        jobs_last_24h=int(row[1]),
        cost_this_month=float(row[2] or 0),
    )


def quota_usage(*, user_id: int, now: dt.datetime) -> QuotaUsage:
    """What the user holds now, in one statement (four indexed scalar subqueries): queued and
    running jobs, jobs created in the rolling 24 h, this month's cost, active reservations.

    Called under the policy lock (`apps.jobs.admission`) whenever the result decides an
    admission. It must be a statement of its own, run after the lock is granted: on PostgreSQL
    (READ COMMITTED) it then sees every job and reservation committed by the lock's previous
    holder. Written in SQL because it is on the submission hot path: the ORM's four
    subqueries cost several times the database's work (docs/benchmarks.md, raw SQL).
    """
    return quota_usage_of(_USAGE.fetchone(quota_usage_params(user_id=user_id, now=now)))


def rate_limit_retry_after(*, user_id: int, limit: int, now: dt.datetime) -> int:
    """Seconds until the rolling 24 h window holds fewer than `limit` of the user's jobs.

    With n jobs in the window, n - limit + 1 of them must leave it; the last of those to leave
    is the (n - limit)-th oldest (0-based). At least 1 second.
    """
    in_window = Job.objects.filter(owner_id=user_id, created_at__gt=now - ROLLING_WINDOW)
    count = in_window.count()
    index = max(0, count - max(limit, 0))
    leaving = in_window.order_by("created_at").values_list("created_at", flat=True)[
        index : index + 1
    ]
    if not leaving:
        return 1
    seconds = (leaving[0] + ROLLING_WINDOW - now).total_seconds()
    return max(1, int(-(-seconds // 1)))


@dataclass(frozen=True)
class QuotaStatus:
    max_concurrent_jobs: int
    active_jobs: int
    active_reservations: int
    available_slots: int
    max_jobs_per_day: int
    jobs_last_24h: int
    monthly_cost_limit: float | None
    cost_this_month: float
    storage_bytes: int
    max_storage_bytes: int
    warnings: list[str]
    active_lives: int
    max_lives: int
    max_upload_file_size: int
    max_resumable_upload_size: int


def quota_status(
    *, user: AbstractBaseUser | AnonymousUser, now: dt.datetime | None = None
) -> QuotaStatus:
    """The user's limits and usage now (GET /api/quotas/me/); no lock, no write. Includes the
    stored bytes (submissions) and the schedule's cap on unfinished Lives
    (SCHEDULE_MAX_LIVES_PER_USER, enforced at booking)."""
    moment = now or timezone.now()
    user_id = int(cast(int, user.pk))
    limits = quota_limits(policy=quota_policy_get(user=user))
    usage = quota_usage(user_id=user_id, now=moment)
    return QuotaStatus(
        max_concurrent_jobs=limits.max_concurrent_jobs,
        active_jobs=usage.active_jobs,
        active_reservations=usage.active_reservations,
        available_slots=max(0, limits.max_concurrent_jobs - usage.concurrent),
        max_jobs_per_day=limits.max_jobs_per_day,
        jobs_last_24h=usage.jobs_last_24h,
        monthly_cost_limit=limits.monthly_cost_limit,
        cost_this_month=usage.cost_this_month,
        storage_bytes=submission_storage_bytes(user_id=user_id),
        max_storage_bytes=limits.max_storage_bytes,
        warnings=quota_warnings(
            limits=limits,
            concurrent=usage.concurrent,
            jobs_last_24h=usage.jobs_last_24h,
            cost=usage.cost_this_month,
        ),
        active_lives=life_living_count(user_id=user_id),
        max_lives=int(settings.SCHEDULE_MAX_LIVES_PER_USER),
        max_upload_file_size=int(settings.MAX_UPLOAD_FILE_SIZE),
        max_resumable_upload_size=int(settings.MAX_RESUMABLE_UPLOAD_SIZE),
    )


# The status is written out, not a parameter: SQLite uses a partial index only for a WHERE
# that repeats its condition literally.
# A row when a job is queued: `jobs_waiting`, and inside statements of work that yields to
# queued jobs (a rescore's take on PostgreSQL asks it in the same round trip).
JOBS_QUEUED = SqlStatement("SELECT 1 FROM {j} WHERE {j.status} = 'queued' LIMIT 1", j=Job)


def jobs_waiting() -> bool:
    """True when a job is queued for a worker (the partial index `jobs_queued_created`): work
    that may run in batches (rescoring) yields the worker after its current item. Asked once
    per rescored item, so its SQL is kept (`apps.core.sql`)."""
    return JOBS_QUEUED.fetchone([]) is not None
