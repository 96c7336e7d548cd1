"""Reads of quotas: effective limits, warnings and reservations (states at query time).

Quotas know nothing of jobs: what a user's jobs hold (the counts that admission compares with
these limits) is read by the jobs app (`apps.jobs.selectors.quota_usage`), which depends on
this app, never the other way round.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Case, CharField, Q, QuerySet, Value, When

from apps.core.selectors import owned_get
from apps.quotas.models import QuotaPolicy, Reservation, ReservationState

WARNING_RATIO = 0.8


@dataclass(frozen=True)
class QuotaLimits:
    max_concurrent_jobs: int
    max_jobs_per_day: int
    monthly_cost_limit: float | None
    max_storage_bytes: int


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


def month_start(now: dt.datetime) -> dt.datetime:
    """The first instant of `now`'s calendar month in UTC."""
    utc = now.astimezone(dt.UTC)
    return utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def reservation_active_q(now: dt.datetime) -> Q:
    return Q(consumed_at__isnull=True, released_at__isnull=True, expires_at__gt=now)


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
