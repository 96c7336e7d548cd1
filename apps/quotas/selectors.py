"""Reads of quotas: effective limits, current usage and reservations (states at query time)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Case, CharField, Q, QuerySet, Value, When
from django.utils import timezone

from apps.core.selectors import owned_get
from apps.jobs.models import ACTIVE_JOB_STATUSES, Job
from apps.quotas.models import QuotaPolicy, Reservation, ReservationState
from apps.submissions.selectors import submission_storage_bytes

ROLLING_WINDOW = dt.timedelta(hours=24)
WARNING_RATIO = 0.8


@dataclass(frozen=True)
class QuotaLimits:
    max_concurrent_jobs: int
    max_jobs_per_day: int
    monthly_cost_limit: float | None
    max_storage_bytes: int


@dataclass(frozen=True)
class QuotaUsage:
    active_jobs: int
    active_reservations: int
    jobs_last_24h: int
    cost_this_month: float

    @property
    def concurrent(self) -> int:
        return self.active_jobs + self.active_reservations


def user_pk(user: AbstractBaseUser | AnonymousUser) -> int:
    """The user's id (an anonymous user never reaches these reads: the API requires auth)."""
    return cast(int, user.pk)


def quota_limits(*, policy: QuotaPolicy) -> QuotaLimits:
    """The user's effective limits: the policy's fields, else the settings defaults.

    The concurrent limit is the base limit plus the policy's `concurrent_boost` (granted for a
    period by the schedule topic `quota.boost`, at most QUOTA_MAX_BOOST). A base limit of 0 is
    a real limit (nothing runs) that no boost lifts: an operator who stops a user's jobs is
    not overridden by a scheduled boost.
    """
    base = policy.max_concurrent_jobs
    if base is None:
        base = int(settings.QUOTA_MAX_CONCURRENT_JOBS)
    per_day = policy.max_jobs_per_day
    if per_day is None:
        per_day = int(settings.QUOTA_MAX_JOBS_PER_DAY)
    # Clamped here too: a boost stored before QUOTA_MAX_BOOST existed (or lowered) never counts
    # beyond it.
    boost = min(max(0, policy.concurrent_boost), int(settings.QUOTA_MAX_BOOST))
    cost = policy.monthly_cost_limit
    if cost is None and settings.QUOTA_MONTHLY_COST_LIMIT is not None:
        cost = float(settings.QUOTA_MONTHLY_COST_LIMIT)
    storage = policy.max_storage_bytes
    if storage is None:
        storage = int(settings.QUOTA_MAX_STORAGE_BYTES)
    return QuotaLimits(
        max_concurrent_jobs=0 if base <= 0 else base + boost,
        max_jobs_per_day=per_day,
        monthly_cost_limit=cost,
        max_storage_bytes=storage,
    )


def quota_policy_get(*, user: AbstractBaseUser | AnonymousUser) -> QuotaPolicy:
    """The user's policy, or an unsaved default one (no lock, no write)."""
    user_id = user_pk(user)
    policy = QuotaPolicy.objects.filter(user_id=user_id).first()
    return policy if policy is not None else QuotaPolicy(user_id=user_id)


@dataclass(frozen=True)
class StorageStatus:
    used: int
    limit: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


def storage_status(*, user: AbstractBaseUser | AnonymousUser) -> StorageStatus:
    """Bytes the user stores now (files of all their submissions, drafts and sealed) and their
    limit. No lock: for fast refusals and display; `storage_admit` decides under the lock."""
    limits = quota_limits(policy=quota_policy_get(user=user))
    return StorageStatus(
        used=submission_storage_bytes(user_id=user_pk(user)), limit=limits.max_storage_bytes
    )


def month_start(now: dt.datetime) -> dt.datetime:
    """The first instant of `now`'s calendar month in UTC."""
    utc = now.astimezone(dt.UTC)
    return utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def reservation_active_q(now: dt.datetime) -> Q:
    return Q(consumed_at__isnull=True, released_at__isnull=True, expires_at__gt=now)


def quota_usage(*, user_id: int, now: dt.datetime) -> QuotaUsage:
    """What the user holds now, in one statement (four indexed scalar subqueries).

    Called under `quota_policy_lock` whenever the result decides an admission. It must be a
    statement of its own, run after the lock is granted: on PostgreSQL (READ COMMITTED) it
    then sees every job and reservation committed by the lock's previous holder. Written in
    SQL because it is on the submission hot path: one round trip instead of two ORM queries.
    """
    ops = connection.ops
    active = list(ACTIVE_JOB_STATUSES)
    jobs = Job._meta.db_table
    reservations = Reservation._meta.db_table
    marks = ", ".join(["%s"] * len(active))
    sql = (
        f"SELECT (SELECT COUNT(*) FROM {jobs} WHERE owner_id = %s AND status IN ({marks})),"  # noqa: S608
        f" (SELECT COUNT(*) FROM {jobs} WHERE owner_id = %s AND created_at > %s),"
        f" (SELECT COALESCE(SUM(cost), 0) FROM {jobs} WHERE owner_id = %s AND created_at >= %s),"
        f" (SELECT COUNT(*) FROM {reservations} WHERE user_id = %s AND consumed_at IS NULL"
        " AND released_at IS NULL AND expires_at > %s)"
    )
    params = [
        user_id,
        *active,
        user_id,
        ops.adapt_datetimefield_value(now - ROLLING_WINDOW),
        user_id,
        ops.adapt_datetimefield_value(month_start(now)),
        user_id,
        ops.adapt_datetimefield_value(now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return QuotaUsage(
        active_jobs=int(row[0]),
        active_reservations=int(row[3]),
        jobs_last_24h=int(row[1]),
        cost_this_month=float(row[2] or 0),
    )


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


def _ratio_reached(used: float, limit: float | None) -> bool:
    if limit is None:
        return False
    if limit <= 0:
        return used > 0
    return used / limit >= WARNING_RATIO


def cost_warning(*, used: float, limit: float | None) -> str | None:
    if limit is None or not _ratio_reached(used, limit):
        return None
    percent = 100 if limit <= 0 else int(used * 100 // limit)
    used_text, limit_text = format_number(used), format_number(limit)
    return (
        f"Cost limit warning: {used_text} of {limit_text} cost units used this month ({percent}%)."
    )


def quota_warnings(
    *, limits: QuotaLimits, concurrent: int, jobs_last_24h: int, cost: float
) -> list[str]:
    """One message per quota at >= 80 % of its limit for the given usage."""
    warnings: list[str] = []
    if _ratio_reached(concurrent, limits.max_concurrent_jobs):
        warnings.append(
            f"Concurrent jobs: {concurrent} of {limits.max_concurrent_jobs} slots in use."
        )
    if _ratio_reached(jobs_last_24h, limits.max_jobs_per_day):
        warnings.append(
            f"Daily jobs: {jobs_last_24h} of {limits.max_jobs_per_day} in the last 24 hours."
        )
    if _ratio_reached(cost, limits.monthly_cost_limit):
        warnings.append(
            f"Monthly cost: {format_number(cost)} of "
            f"{format_number(limits.monthly_cost_limit or 0)} cost units used this month."
        )
    return warnings


def format_number(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def reservation_state_annotation(now: dt.datetime) -> Case:
    return Case(
        When(consumed_at__isnull=False, then=Value(ReservationState.CONSUMED.value)),
        When(released_at__isnull=False, then=Value(ReservationState.RELEASED.value)),
        When(expires_at__lte=now, then=Value(ReservationState.EXPIRED.value)),
        default=Value(ReservationState.ACTIVE.value),
        output_field=CharField(),
    )


def reservation_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Reservation]:
    return Reservation.objects.filter(user_id=user_pk(user)).order_by("-created_at", "id")


def reservation_get(
    *,
    reservation_id: str,
    user: AbstractBaseUser | AnonymousUser | None = None,
    for_update: bool = False,
) -> Reservation:
    """The reservation, owned by `user` when given (404 unknown, 403 someone else's).

    With `for_update` the row is locked (call inside `transaction.atomic()`).
    """
    return owned_get(
        Reservation.objects.all(),
        lookup={"pk": reservation_id},
        user=user,
        label="Reservation",
        owner_attr="user_id",
        for_update=for_update,
    )


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


def quota_status(
    *, user: AbstractBaseUser | AnonymousUser, now: dt.datetime | None = None
) -> QuotaStatus:
    """The user's limits and usage now (GET /api/quotas/me/); no lock, no write. Includes the
    schedule's cap on unfinished Lives (SCHEDULE_MAX_LIVES_PER_USER), enforced at booking."""
    from apps.schedule.selectors import life_living_count

    moment = now or timezone.now()
    limits = quota_limits(policy=quota_policy_get(user=user))
    usage = quota_usage(user_id=user_pk(user), now=moment)
    return QuotaStatus(
        max_concurrent_jobs=limits.max_concurrent_jobs,
        active_jobs=usage.active_jobs,
        active_reservations=usage.active_reservations,
        available_slots=max(0, limits.max_concurrent_jobs - usage.concurrent),
        max_jobs_per_day=limits.max_jobs_per_day,
        jobs_last_24h=usage.jobs_last_24h,
        monthly_cost_limit=limits.monthly_cost_limit,
        cost_this_month=usage.cost_this_month,
        storage_bytes=submission_storage_bytes(user_id=user_pk(user)),
        max_storage_bytes=limits.max_storage_bytes,
        warnings=quota_warnings(
            limits=limits,
            concurrent=usage.concurrent,
            jobs_last_24h=usage.jobs_last_24h,
            cost=usage.cost_this_month,
        ),
        active_lives=life_living_count(user_id=user_pk(user)),
        max_lives=int(settings.SCHEDULE_MAX_LIVES_PER_USER),
    )
