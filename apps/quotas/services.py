"""Writes to quotas: policies and reservations, and the per-user lock that admission takes.

Every decision that counts a user's slots (reserve a slot, admit a job, store bytes) runs
inside a transaction that first locks the user's `QuotaPolicy` row (`quota_policy_lock`). On
PostgreSQL that is a row lock; on SQLite the IMMEDIATE transaction already holds the database's
write lock. The decisions themselves live with what they count: slots (jobs and reservations)
in `apps.jobs.admission`, stored bytes in `apps.submissions.services.storage.storage_admit`.
This app does not depend on either. Freeing a slot (release, job finished) needs no policy
lock: it only lowers the count.
"""

from __future__ import annotations

import datetime as dt
from functools import partial

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.sql import SqlStatement
from apps.quotas.exceptions import QuotaExceeded, ReservationNotActive, StorageQuotaExceeded
from apps.quotas.metrics import quota_denied, reservation_counted
from apps.quotas.models import QuotaPolicy, Reservation, ReservationState
from apps.quotas.selectors import reservation_active_q, reservation_get

# Raw SQL on purpose: every admission runs this, and the ORM spent longer compiling
# `select_for_update().filter().first()` than the database spent answering it
# (docs/benchmarks.md, raw SQL).
_POLICY_READ = SqlStatement("SELECT * FROM {p} WHERE {p.user} = %s", p=QuotaPolicy)
_POLICY_LOCK = SqlStatement("SELECT * FROM {p} WHERE {p.user} = %s FOR UPDATE", p=QuotaPolicy)


def quota_policy_lock(*, user: AbstractBaseUser) -> QuotaPolicy:
    """The user's policy row, created if missing, locked until the transaction ends.

    Must be called inside `transaction.atomic()`. This lock serializes everything that counts
    or changes a user's quota (PostgreSQL row lock; SQLite's IMMEDIATE transaction).
    """
    # SQLite has no FOR UPDATE; its IMMEDIATE transaction already holds the write lock.
    statement = _POLICY_LOCK if connection.features.has_select_for_update else _POLICY_READ
    found = statement.instance(QuotaPolicy, [user.pk])
    if found is not None:
        return found
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


def reservation_create(
    *, user: AbstractBaseUser, now: dt.datetime, ttl_seconds: float
) -> Reservation:
    """Insert an active reservation of `user` expiring `ttl_seconds` after `now`.

    No check of its own: only admission (`apps.jobs.admission.reservation_reserve`) calls it,
    inside the transaction in which it locked the policy and counted the user's slots.
    """
    reservation = Reservation.objects.create(
        user_id=user.pk, expires_at=now + dt.timedelta(seconds=ttl_seconds)
    )
    transaction.on_commit(partial(reservation_counted, state="created"))
    return reservation


def reservation_active_lock(
    *, user: AbstractBaseUser, reservation_id: str, now: dt.datetime
) -> Reservation:
    """The user's active reservation `reservation_id`, locked (inside a transaction), or
    ReservationNotActive (unknown, someone else's, consumed, released or expired)."""
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


def reservation_consume(*, reservation: Reservation, job_id: str, now: dt.datetime) -> None:
    """Mark an active reservation consumed by `job_id` (compare-and-set on its active state).

    Called by admission in the job's transaction, after `reservation_active_lock`.
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
