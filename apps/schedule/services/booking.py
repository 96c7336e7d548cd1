"""Booking a Life (POST /api/schedules/, header booking) and the rules every booking and
change obeys: not too late, the Lives cap, no overlap on a resource, task-topic calls the user
may make. Lock order: the package's (`apps.schedule.services`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.models_utils import new_hex_id
from apps.quotas.services import quota_policy_lock
from apps.schedule.booking import LifeSpec, life_spec_build, parse_time
from apps.schedule.exceptions import (
    InvalidSchedule,
    LifeExists,
    ResourceConflict,
    TooLate,
    TooManyLives,
)
from apps.schedule.models import (
    LIVING_STATES,
    Life,
    Plan,
    PlanKind,
    ScheduleResource,
    ScheduleType,
)
from apps.schedule.selectors import life_living_count
from apps.schedule.task_runs import life_topic_calls_check


@dataclass(frozen=True)
class BookResult:
    life: Life
    created: bool


def guard_band(spec: LifeSpec) -> tuple[dt.datetime, dt.datetime]:
    """`spec`'s execution span widened by half of EXECUTION_DELAY_GUARD_TIME on each side."""
    half = dt.timedelta(minutes=float(settings.EXECUTION_DELAY_GUARD_TIME)) / 2
    return spec.birth_time - half, spec.end_time + half


def check_not_too_late(times: dict[str, dt.datetime], now: dt.datetime) -> None:
    """TooLate (406) naming each of `times` not more than EXECUTION_GUARD_TIME ahead of now."""
    guard = dt.timedelta(seconds=float(settings.EXECUTION_GUARD_TIME))
    late = {
        name: [f"Must be more than EXECUTION_GUARD_TIME ({settings.EXECUTION_GUARD_TIME} s) ahead."]
        for name, moment in times.items()
        if moment - guard <= now
    }
    if late:
        raise TooLate(
            f"{', '.join(late)} is too close to now (or in the past).", extra={"fields": late}
        )


def resource_lock(resource_id: str) -> None:
    """Lock the resource's row (created on first use) until the transaction ends."""
    if not resource_id:
        return
    row, _ = ScheduleResource.objects.get_or_create(resource_id=resource_id)
    ScheduleResource.objects.select_for_update().filter(pk=row.pk).first()


def resource_conflict(resource_id: str, own_life_uuid: str | None = None) -> ResourceConflict:
    """The 409 for a booking of `resource_id`. It names a conflicting Life only when that Life
    is the caller's own: another user's Life (its uuid, owner or times) is never revealed."""
    if own_life_uuid is not None:
        return ResourceConflict(
            f"Resource {resource_id!r} is already reserved around this time by your Life "
            f"{own_life_uuid}.",
            extra={"conflicting_life_uuid": own_life_uuid},
        )
    return ResourceConflict(f"Resource {resource_id!r} is already reserved around this time.")


def check_no_conflict(
    *,
    user_id: int,
    resource_id: str,
    guard_start: dt.datetime,
    guard_end: dt.datetime,
    exclude_pk: int | None,
) -> None:
    """ResourceConflict when a living Life of `resource_id` (other than `exclude_pk`) has a
    guarded range meeting `[guard_start, guard_end]`. Call under the resource's lock."""
    if not resource_id:
        return
    clashes = Life.objects.filter(
        resource_id=resource_id,
        state__in=LIVING_STATES,
        guard_start__lte=guard_end,
        guard_end__gte=guard_start,
    )
    if exclude_pk is not None:
        clashes = clashes.exclude(pk=exclude_pk)
    owners = dict(clashes.order_by("birth_time", "pk").values_list("life_uuid", "owner_id"))
    if not owners:
        return
    own = next((uuid for uuid, owner in owners.items() if owner == user_id), None)
    raise resource_conflict(resource_id, own)


def check_topic_calls(*, user: AbstractBaseUser, spec: LifeSpec) -> None:
    life_topic_calls_check(
        user=user,
        schedule_type=spec.schedule_type,
        birth_action=spec.birth_action,
        death_action=spec.death_action,
    )


def _check_lives_cap(*, user: AbstractBaseUser) -> None:
    """TooManyLives when the user already holds SCHEDULE_MAX_LIVES_PER_USER unfinished Lives.
    Call under the user's quota lock."""
    limit = int(settings.SCHEDULE_MAX_LIVES_PER_USER)
    if life_living_count(user_id=user.pk) >= limit:
        raise TooManyLives(
            f"You already have {limit} Lives that are not finished "
            f"(SCHEDULE_MAX_LIVES_PER_USER); cancel one or wait until one ends.",
            extra={"max_lives": limit},
        )


def _same_or_exists(existing: Life, user: AbstractBaseUser, fingerprint: str) -> BookResult:
    if existing.owner_id == user.pk and existing.fingerprint == fingerprint:
        return BookResult(life=existing, created=False)
    raise LifeExists(f"A Life {existing.life_uuid} exists with a different body.")


def _normalize_uuid(value: str) -> str:
    text = value.strip().replace("-", "").lower()
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        raise InvalidSchedule(
            "life_uuid must be a UUID (32 hex digits, dashes optional).",
            fields={"life_uuid": ["Must be a UUID (32 hex digits, dashes optional)."]},
        )
    return text


def life_book(
    *,
    user: AbstractBaseUser,
    spec: LifeSpec,
    life_uuid: str | None = None,
    booking_token_id: str | None = None,
    now: dt.datetime | None = None,
) -> BookResult:
    """Book a Life and its plans (Standby).

    `booking_token_id` is the API token the booking was made with (None: a session or a
    password); the Life's birth is refused once that token is revoked or expired.

    Idempotent on `life_uuid`: the same owner and the same booking returns the existing Life
    (`created=False`); anything else under that uuid raises LifeExists. Then raises
    PermissionDenied (403) / InvalidSchedule (400) for task-topic calls the user may not book
    (`task_runs.life_topic_calls_check`), TooLate (406), TooManyLives (429: the user holds
    SCHEDULE_MAX_LIVES_PER_USER unfinished Lives) and ResourceConflict (409), in that order.
    Locks the resource row, then the user's quota row: two racing bookings of one resource
    never both succeed (exclusion constraint too on PostgreSQL), and racing bookings of one
    user never pass the Lives cap.
    """
    now = now or timezone.now()
    uuid = _normalize_uuid(life_uuid) if life_uuid else new_hex_id()
    fingerprint = spec.fingerprint()
    existing = Life.objects.filter(life_uuid=uuid).first()
    if existing is not None:
        return _same_or_exists(existing, user, fingerprint)
    check_topic_calls(user=user, spec=spec)
    times = {"birth_time": spec.birth_time}
    if spec.death_time is not None:
        times["death_time"] = spec.death_time
    check_not_too_late(times, now)
    guard_start, guard_end = guard_band(spec)
    try:
        with transaction.atomic():
            resource_lock(spec.resource_id)
            # The user's quota lock (after the resource's: the services' lock order) serializes
            # this user's bookings, so the count below cannot be overtaken by a racing one.
            quota_policy_lock(user=user)
            # A racing post of this very uuid may have committed while we waited for the lock.
            existing = Life.objects.filter(life_uuid=uuid).first()
            if existing is not None:
                return _same_or_exists(existing, user, fingerprint)
            _check_lives_cap(user=user)
            check_no_conflict(
                user_id=user.pk,
                resource_id=spec.resource_id,
                guard_start=guard_start,
                guard_end=guard_end,
                exclude_pk=None,
            )
            life = Life.objects.create(
                life_uuid=uuid,
                owner_id=user.pk,
                schedule_type=spec.schedule_type,
                resource_id=spec.resource_id,
                birth_time=spec.birth_time,
                death_time=spec.death_time,
                birth_action=spec.birth_action,
                death_action=spec.death_action,
                guard_start=guard_start,
                guard_end=guard_end,
                fingerprint=fingerprint,
                booking_token_id=booking_token_id,
            )
            _plan_create(
                life=life, kind=PlanKind.BIRTH, time=spec.birth_time, action=spec.birth_action
            )
            if spec.death_time is not None and spec.death_action is not None:
                _plan_create(
                    life=life, kind=PlanKind.DEATH, time=spec.death_time, action=spec.death_action
                )
    except IntegrityError as exc:
        existing = Life.objects.filter(life_uuid=uuid).first()
        if existing is not None:
            return _same_or_exists(existing, user, fingerprint)
        raise resource_conflict(spec.resource_id) from exc
    return BookResult(life=life, created=True)


def _plan_create(*, life: Life, kind: str, time: dt.datetime, action: dict[str, Any]) -> Plan:
    return Plan.objects.create(
        life=life,
        kind=kind,
        time=time,
        due_at=time,
        action=action,
        webhook_id=f"msg_{new_hex_id()}",
    )


def life_book_request(
    *,
    user: AbstractBaseUser,
    at: str,
    method: str,
    full_path: str,
    body: bytes,
    content_type: str,
    booking_token_id: str | None = None,
    now: dt.datetime | None = None,
) -> Life:
    """Book a point Life whose birth replays one API request as `user` at `at` (made with
    the API token `booking_token_id`, None for a session or a password).

    Raises InvalidSchedule (bad time, a body that is not UTF-8 text), TooLate.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSchedule(
            "Only requests with a UTF-8 text body can be scheduled.",
            fields={"body": ["Must be UTF-8 text."]},
        ) from exc
    headers = {"Content-Type": content_type} if content_type else {}
    data = {
        "schedule_type": ScheduleType.POINT,
        "birth_time": at,
        "birth_action": {
            "path": full_path,
            "method": method,
            "headers": headers,
            "body": text if text else None,
        },
    }
    spec = life_spec_build(data)
    return life_book(user=user, spec=spec, booking_token_id=booking_token_id, now=now).life


def parse_schedule_header(value: str) -> str:
    """Validate an X-Schedule-Datetime value early (raises InvalidSchedule); returns it."""
    try:
        parse_time(value)
    except ValueError as exc:
        raise InvalidSchedule(
            f"X-Schedule-Datetime: {exc}.", fields={"X-Schedule-Datetime": [str(exc)]}
        ) from exc
    return value
