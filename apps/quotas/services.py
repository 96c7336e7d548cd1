"""Writes to quotas: policies, reservations and job admission, all on one per-user lock.

Every decision that counts a user's slots (reserve a slot, admit a job) runs inside a
transaction that first locks the user's `QuotaPolicy` row (`quota_policy_lock`). On
PostgreSQL that is a row lock; on SQLite the IMMEDIATE transaction already holds the database's
write lock. Counting and inserting are therefore serialized per user, and no concurrency can
push a user past a limit. Freeing a slot (release, job finished) needs no policy lock: it only
lowers the count.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.quotas.exceptions import (
    CostLimitExceeded,
    QuotaExceeded,
    RateLimited,
    ReservationNotActive,
    StorageQuotaExceeded,
)
from apps.quotas.metrics import quota_denied, reservation_counted
from apps.quotas.models import QuotaPolicy, Reservation, ReservationState
from apps.quotas.selectors import (
    cost_warning,
    format_number,
    quota_limits,
    quota_usage,
    quota_warnings,
    rate_limit_retry_after,
    reservation_active_q,
    reservation_get,
)
from apps.submissions.selectors import submission_storage_bytes


def quota_policy_lock(*, user: AbstractBaseUser) -> QuotaPolicy:
    """The user's policy row, created if missing, locked until the transaction ends.

    Must be called inside `transaction.atomic()`. This lock serializes everything that counts
    or changes a user's quota (PostgreSQL row lock; SQLite's IMMEDIATE transaction).
    """
    # Raw SQL on purpose: every admission runs this, and the ORM spent several times longer
    # compiling `select_for_update().filter().first()` than the database spent answering it.
    # SQLite has no FOR UPDATE; its IMMEDIATE transaction already holds the write lock.
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    table = connection.ops.quote_name(QuotaPolicy._meta.db_table)
    found = list(
        QuotaPolicy.objects.raw(f"SELECT * FROM {table} WHERE user_id = %s{lock}", [user.pk])  # noqa: S608
    )
    if found:
        return found[0]
    created, _ = QuotaPolicy.objects.get_or_create(user_id=user.pk)
    return QuotaPolicy.objects.select_for_update().get(pk=created.pk)


def quota_policy_adjust(*, user: AbstractBaseUser, concurrent_delta: int) -> QuotaPolicy:
    """Add `concurrent_delta` (may be negative) to the user's concurrent-job boost.

    Used by the staff-only schedule topics `quota.boost` / `quota.restore`. Locked
    read-modify-write, so concurrent adjustments never lose one. The boost stays within
    0..QUOTA_MAX_BOOST (clamped): however many boosts overlap, a user never gets more than
    QUOTA_MAX_BOOST extra slots.
    """
    with transaction.atomic():
        policy = quota_policy_lock(user=user)
        boosted = policy.concurrent_boost + concurrent_delta
        policy.concurrent_boost = min(max(0, boosted), int(settings.QUOTA_MAX_BOOST))
        policy.save(update_fields=["concurrent_boost", "updated_at"])
    return policy


def quota_exceeded_error(limit: int) -> QuotaExceeded:
    """The concurrent-job refusal; building it counts the denial (it is built to be raised)."""
    quota_denied(kind="concurrent")
    return QuotaExceeded(
        f"Quota exceeded: Maximum {limit} concurrent jobs allowed",
        extra={"max_concurrent_jobs": limit},
    )


def reservation_reserve(*, user: AbstractBaseUser, ttl_seconds: float | None = None) -> Reservation:
    """Hold one concurrent-job slot for `ttl_seconds` (default `QUOTA_RESERVATION_TTL`).

    Locks the user's policy row, counts active reservations + queued/running jobs and inserts
    the reservation only if that count is below the limit (QuotaExceeded otherwise). Not
    idempotent: each call holds a new slot.
    """
    ttl = float(settings.QUOTA_RESERVATION_TTL if ttl_seconds is None else ttl_seconds)
    with transaction.atomic():
        policy = quota_policy_lock(user=user)
        now = timezone.now()
        limits = quota_limits(policy=policy)
        usage = quota_usage(user_id=user.pk, now=now)
        if usage.concurrent >= limits.max_concurrent_jobs:
            raise quota_exceeded_error(limits.max_concurrent_jobs)
        reservation = Reservation.objects.create(
            user_id=user.pk, expires_at=now + dt.timedelta(seconds=ttl)
        )
    reservation_counted(state="created")
    return reservation


def reservation_release(
    *, reservation_id: str, user: AbstractBaseUser | None = None
) -> Reservation:
    """Free a reservation's slot at once. Idempotent: releasing a released one is a no-op.

    Locks the reservation row. `user` restricts it to its owner (403 otherwise; None = staff).
    A consumed or expired reservation raises ReservationNotActive.
    """
    with transaction.atomic():
        reservation = reservation_get(reservation_id=reservation_id, user=user, for_update=True)
        now = timezone.now()
        state = reservation.state_at(now)
        if state == ReservationState.RELEASED:
            return reservation
        if state != ReservationState.ACTIVE:
            raise ReservationNotActive(
                f"Reservation {reservation.pk} is {state}; only an active one can be released.",
                extra={"state": str(state)},
            )
        reservation.released_at = now
        reservation.save(update_fields=["released_at"])
    reservation_counted(state="released")
    return reservation


def reservation_extend(
    *, reservation_id: str, user: AbstractBaseUser, ttl_seconds: float | None = None
) -> Reservation:
    """Move an active reservation's expiry to now + `ttl_seconds`.

    Locks the reservation row. Only while active (ReservationNotActive otherwise): an expired
    slot may already have been given to someone else, so it is never brought back.
    """
    ttl = float(settings.QUOTA_RESERVATION_TTL if ttl_seconds is None else ttl_seconds)
    with transaction.atomic():
        reservation = reservation_get(reservation_id=reservation_id, user=user, for_update=True)
        now = timezone.now()
        state = reservation.state_at(now)
        if state != ReservationState.ACTIVE:
            raise ReservationNotActive(
                f"Reservation {reservation.pk} is {state}; only an active one can be extended.",
                extra={"state": str(state)},
            )
        reservation.expires_at = now + dt.timedelta(seconds=ttl)
        reservation.save(update_fields=["expires_at"])
        return reservation


@dataclass(frozen=True)
class JobAdmission:
    """What `quota_admit_job` decided: the reservation to consume (if any) and the warnings."""

    reservation: Reservation | None
    quota_warnings: list[str] = field(default_factory=list)
    cost_limit_warning: str | None = None


def quota_admit_job(
    *, user: AbstractBaseUser, cost: float, reservation_id: str | None, now: dt.datetime
) -> JobAdmission:
    """Decide whether the user may start one more job, in the SPEC's order of checks.

    Must run inside the transaction that creates the job (the caller then calls
    `reservation_consume`). Locks the user's policy row, then checks: rate limit (rolling 24 h,
    RateLimited with `Retry-After`), monthly cost (CostLimitExceeded; reaching the limit exactly
    is allowed), then the concurrent slot: with `reservation_id` the reservation must be the
    user's and active (locked; ReservationNotActive otherwise) and its slot becomes the job's,
    so nothing is counted twice; without one, active reservations + queued/running jobs must
    be below the limit (QuotaExceeded).
    """
    policy = quota_policy_lock(user=user)
    limits = quota_limits(policy=policy)
    usage = quota_usage(user_id=user.pk, now=now)

    if usage.jobs_last_24h >= limits.max_jobs_per_day:
        retry_after = rate_limit_retry_after(
            user_id=user.pk, limit=limits.max_jobs_per_day, now=now
        )
        quota_denied(kind="rate")
        raise RateLimited(
            f"Rate limit exceeded: maximum {limits.max_jobs_per_day} jobs per 24 hours; "
            f"retry in {retry_after} s.",
            extra={"retry_after": retry_after, "max_jobs_per_day": limits.max_jobs_per_day},
            headers={"Retry-After": str(retry_after)},
        )

    cost_after = usage.cost_this_month + cost
    if limits.monthly_cost_limit is not None and cost_after > limits.monthly_cost_limit:
        quota_denied(kind="cost")
        raise CostLimitExceeded(
            f"Cost limit exceeded: this job costs {format_number(cost)}, "
            f"{format_number(usage.cost_this_month)} of "
            f"{format_number(limits.monthly_cost_limit)} cost units are used this month.",
            extra={
                "monthly_cost_limit": limits.monthly_cost_limit,
                "cost_this_month": usage.cost_this_month,
                "job_cost": cost,
            },
        )

    reservation: Reservation | None = None
    if reservation_id:
        reservation = (
            Reservation.objects.select_for_update(of=("self",))
            .filter(pk=reservation_id, user_id=user.pk)
            .first()
        )
        state = None if reservation is None else reservation.state_at(now)
        if reservation is None or state != ReservationState.ACTIVE:
            raise ReservationNotActive(
                f"Reservation {reservation_id} is not an active reservation of yours"
                + (f" (it is {state})." if state is not None else "."),
                extra={"state": str(state) if state is not None else None},
            )
        concurrent_after = usage.concurrent
    else:
        if usage.concurrent >= limits.max_concurrent_jobs:
            raise quota_exceeded_error(limits.max_concurrent_jobs)
        concurrent_after = usage.concurrent + 1

    return JobAdmission(
        reservation=reservation,
        quota_warnings=quota_warnings(
            limits=limits,
            concurrent=concurrent_after,
            jobs_last_24h=usage.jobs_last_24h + 1,
            cost=cost_after,
        ),
        cost_limit_warning=cost_warning(used=cost_after, limit=limits.monthly_cost_limit),
    )


def reservation_consume(*, reservation: Reservation, job_id: str, now: dt.datetime) -> None:
    """Mark an active reservation consumed by `job_id` (compare-and-set on its active state).

    Called in the job's transaction after `quota_admit_job` locked and checked it.
    """
    updated = Reservation.objects.filter(reservation_active_q(now), pk=reservation.pk).update(
        consumed_at=now, job_id=job_id
    )
    if updated != 1:
        raise ReservationNotActive(f"Reservation {reservation.pk} is no longer active.")
    reservation.consumed_at = now
    reservation.job_id = job_id
    transaction.on_commit(partial(reservation_counted, state="consumed"))


def storage_quota_error(*, used: int, limit: int, adding: int) -> StorageQuotaExceeded:
    """The storage refusal; building it counts the denial (it is built to be raised)."""
    quota_denied(kind="storage")
    return StorageQuotaExceeded(
        f"Storage quota exceeded: {adding} more bytes would pass your limit of {limit} bytes "
        f"({used} bytes stored in your submissions; delete drafts to free space).",
        extra={"storage_bytes": used, "max_storage_bytes": limit, "adding_bytes": adding},
    )


def storage_admit(*, user: AbstractBaseUser, adding_bytes: int) -> None:
    """Admit `adding_bytes` more stored bytes for `user`, or raise StorageQuotaExceeded.

    Must run inside the transaction that inserts the file rows (the caller inserts them right
    after). Locks the user's policy row (`quota_policy_lock`, the same lock as job admission),
    then sums the user's stored file sizes in a statement of its own, so two concurrent
    uploads are decided one after the other and never overshoot. Reaching the limit exactly
    is allowed. Not idempotent on its own: the caller's insert is what uses the bytes.
    """
    policy = quota_policy_lock(user=user)
    limit = quota_limits(policy=policy).max_storage_bytes
    used = submission_storage_bytes(user_id=user.pk)
    if used + adding_bytes > limit:
        raise storage_quota_error(used=used, limit=limit, adding=adding_bytes)


def reservations_purge(*, now: dt.datetime, dry_run: bool = False) -> CleanupReport:
    """Cleanup kind `reservations`: delete reservations whose expiry has passed, whatever their
    state. Past `expires_at` a reservation never counts again (expired, or consumed/released
    earlier), so removing it changes no decision; those neither consumed nor released ended by
    expiring and are counted (`state="expired"`) as they go. `dry_run` deletes nothing."""
    items = list(Reservation.objects.filter(expires_at__lte=now).values_list("id", flat=True))
    if not dry_run:
        expired = Reservation.objects.filter(
            pk__in=items, consumed_at__isnull=True, released_at__isnull=True
        ).count()
        Reservation.objects.filter(pk__in=items, expires_at__lte=now).delete()
        reservation_counted(state="expired", count=expired)
    return CleanupReport(kind="reservations", count=len(items), items=items)
