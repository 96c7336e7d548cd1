"""Writes of the schedule app: booking, changing, cancelling and purging Lives.

Locks, in this order whenever several are taken: the resource row (`ScheduleResource`), the
user's quota row (`quotas.services.quota_policy_lock`, bookings only), the Life, its Plans (by
pk). On SQLite the IMMEDIATE transaction serializes all writers; on
PostgreSQL the resource row lock serializes bookings of one resource, and the exclusion
constraint `schedule_life_no_overlap` is the last line of defence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import InvalidTransition
from apps.core.models_utils import new_hex_id
from apps.core.queue import PLAN_EXECUTE, enqueue_on_commit
from apps.quotas.services import quota_policy_lock
from apps.schedule.booking import LifeSpec, life_spec_build, parse_time
from apps.schedule.exceptions import (
    InvalidSchedule,
    LifeExists,
    PlanStarted,
    ResourceConflict,
    TooLate,
    TooManyLives,
)
from apps.schedule.models import (
    LIFE_TRANSITIONS,
    LIVING_STATES,
    PENDING_PLAN_STATES,
    PLAN_TRANSITIONS,
    Life,
    LifeState,
    Plan,
    PlanKind,
    PlanState,
    ScheduleResource,
    ScheduleType,
)
from apps.schedule.selectors import life_get, life_living_count
from apps.schedule.task_runs import life_topic_calls_check


@dataclass(frozen=True)
class BookResult:
    life: Life
    created: bool


def _guard_half() -> dt.timedelta:
    return dt.timedelta(minutes=float(settings.EXECUTION_DELAY_GUARD_TIME)) / 2


def lease_seconds() -> float:
    """How long a watcher's claim lasts without renewal: five watch intervals, at least 1 s."""
    return max(5 * float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000, 1.0)


def _check_not_too_late(times: dict[str, dt.datetime], now: dt.datetime) -> None:
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


def _resource_lock(resource_id: str) -> None:
    """Lock the resource's row (created on first use) until the transaction ends."""
    if not resource_id:
        return
    row, _ = ScheduleResource.objects.get_or_create(resource_id=resource_id)
    ScheduleResource.objects.select_for_update().filter(pk=row.pk).first()


def _conflict(resource_id: str, own_life_uuid: str | None = None) -> ResourceConflict:
    """The 409 for a booking of `resource_id`. It names a conflicting Life only when that Life
    is the caller's own: another user's Life (its uuid, owner or times) is never revealed."""
    if own_life_uuid is not None:
        return ResourceConflict(
            f"Resource {resource_id!r} is already reserved around this time by your Life "
            f"{own_life_uuid}.",
            extra={"conflicting_life_uuid": own_life_uuid},
        )
    return ResourceConflict(f"Resource {resource_id!r} is already reserved around this time.")


def _check_no_conflict(
    *,
    user_id: int,
    resource_id: str,
    guard_start: dt.datetime,
    guard_end: dt.datetime,
    exclude_pk: int | None,
) -> None:
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
    raise _conflict(resource_id, own)


def _check_topic_calls(*, user: AbstractBaseUser, spec: LifeSpec) -> None:
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
    _check_topic_calls(user=user, spec=spec)
    times = {"birth_time": spec.birth_time}
    if spec.death_time is not None:
        times["death_time"] = spec.death_time
    _check_not_too_late(times, now)
    half = _guard_half()
    guard_start, guard_end = spec.birth_time - half, spec.end_time + half
    try:
        with transaction.atomic():
            _resource_lock(spec.resource_id)
            # The user's quota lock (after the resource's: the services' lock order) serializes
            # this user's bookings, so the count below cannot be overtaken by a racing one.
            quota_policy_lock(user=user)
            # A racing post of this very uuid may have committed while we waited for the lock.
            existing = Life.objects.filter(life_uuid=uuid).first()
            if existing is not None:
                return _same_or_exists(existing, user, fingerprint)
            _check_lives_cap(user=user)
            _check_no_conflict(
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
        raise _conflict(spec.resource_id) from exc
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


def plan_set_state(*, plan: Plan, to: str, **fields: Any) -> Plan:
    """Compare-and-set `plan` from its loaded state to `to`, with `fields` in
    the same UPDATE; `plan` is updated in place. Raises InvalidTransition (nothing written)
    when `PLAN_TRANSITIONS` forbids the move or the row changed concurrently."""
    return PLAN_TRANSITIONS.move_one(plan, to=to, updated_at=timezone.now(), **fields)


def plans_set_state(
    plans: QuerySet[Plan], *, old: str | tuple[str, ...], to: str, **fields: Any
) -> int:
    """Compare-and-set every plan of `plans` still in `old` to `to` (one UPDATE, `fields`
    included); returns how many moved. Raises InvalidTransition when the table forbids a move
    from one of `old` to `to`."""
    return PLAN_TRANSITIONS.move(plans, old=old, to=to, **fields)


def life_set_state(*, life: Life, to: str) -> Life:
    """Compare-and-set `life` from its loaded state to `to` (InvalidTransition when
    `LIFE_TRANSITIONS` forbids it or the row changed concurrently)."""
    return LIFE_TRANSITIONS.move_one(life, to=to, updated_at=timezone.now())


def _plans_locked(life: Life) -> dict[str, Plan]:
    plans = Plan.objects.select_for_update(of=("self",)).filter(life=life).order_by("pk")
    return {plan.kind: plan for plan in plans}


PATCHABLE = {"term", "birth_time", "death_time", "birth", "death", "birth_action", "death_action"}


def life_change(
    *,
    user: AbstractBaseUser,
    life_uuid: str,
    data: dict[str, Any],
    booking_token_id: str | None = None,
    now: dt.datetime | None = None,
) -> Life:
    """Change a Life's times and/or actions (PATCH), re-running every booking rule.

    The change is made with the API token `booking_token_id` (None: a session or a password),
    which from now on carries the Life, as if it had been booked with it.

    Only plans that have not started (Standby, Preset) may change; a Preset plan's claim is
    released (it goes back to Standby, so its old timer can never fire it). Raises
    InvalidSchedule, TooLate, PlanStarted (409), ResourceConflict (excluding the Life itself),
    NotFound / PermissionDenied. Locks the resource row, the Life and its plans.
    """
    now = now or timezone.now()
    unknown = sorted(set(data) - PATCHABLE)
    if unknown:
        raise InvalidSchedule(
            "Only times and actions can be changed.",
            fields={name: ["This field cannot be changed."] for name in unknown},
        )
    current = life_get(life_uuid=life_uuid, user=user)
    merged: dict[str, Any] = {
        "schedule_type": current.schedule_type,
        "resource_id": current.resource_id,
        "birth_time": current.birth_time,
        "death_time": current.death_time,
        "birth_action": current.birth_action,
        "death_action": current.death_action,
    }
    term = data.get("term") or {}
    for name in ("birth_time", "death_time"):
        value = term.get(name) if isinstance(term, dict) else None
        value = value if value is not None else data.get(name)
        if value is not None:
            merged[name] = value
    for kind in ("birth", "death"):
        value = data.get(kind) or data.get(f"{kind}_action")
        if value is not None:
            merged[f"{kind}_action"] = value
    spec = life_spec_build(merged)
    _check_topic_calls(user=user, spec=spec)
    changed: dict[str, bool] = {
        PlanKind.BIRTH: spec.birth_time != current.birth_time
        or spec.birth_action != current.birth_action,
        PlanKind.DEATH: spec.death_time != current.death_time
        or spec.death_action != current.death_action,
    }
    late_check = {}
    if changed[PlanKind.BIRTH]:
        late_check["birth_time"] = spec.birth_time
    if changed[PlanKind.DEATH] and spec.death_time is not None:
        late_check["death_time"] = spec.death_time
    _check_not_too_late(late_check, now)
    half = _guard_half()
    guard_start, guard_end = spec.birth_time - half, spec.end_time + half
    try:
        with transaction.atomic():
            _resource_lock(current.resource_id)
            life = life_get(life_uuid=life_uuid, user=user, for_update=True)
            if life.state not in LIVING_STATES:
                raise PlanStarted(f"This Life is {life.state}; it can no longer be changed.")
            plans = _plans_locked(life)
            for kind, plan in plans.items():
                if changed[kind] and plan.state not in PENDING_PLAN_STATES:
                    raise PlanStarted(f"The {kind} plan is {plan.state}; it cannot be changed.")
            _check_no_conflict(
                user_id=user.pk,
                resource_id=life.resource_id,
                guard_start=guard_start,
                guard_end=guard_end,
                exclude_pk=life.pk,
            )
            for kind, plan in plans.items():
                if not changed[kind]:
                    continue
                time = spec.birth_time if kind == PlanKind.BIRTH else spec.death_time
                action = spec.birth_action if kind == PlanKind.BIRTH else spec.death_action
                fields = {"time": time, "due_at": time, "action": action, "attempts_count": 0}
                release = {"arm_token": "", "lease_owner": "", "lease_expires_at": None}
                if plan.state == PlanState.PRESET:
                    plan_set_state(plan=plan, to=PlanState.STANDBY, **fields, **release)
                else:
                    # Still Standby (locked): only its time and action change.
                    Plan.objects.filter(pk=plan.pk).update(**fields, **release)
            Life.objects.filter(pk=life.pk).update(
                birth_time=spec.birth_time,
                death_time=spec.death_time,
                birth_action=spec.birth_action,
                death_action=spec.death_action,
                guard_start=guard_start,
                guard_end=guard_end,
                fingerprint=spec.fingerprint(),
                booking_token_id=booking_token_id,
                updated_at=timezone.now(),
            )
    except IntegrityError as exc:
        raise _conflict(current.resource_id) from exc
    life.refresh_from_db()
    return life


def life_cancel(
    *,
    life_uuid: str,
    user: AbstractBaseUser | None,
    operator: bool = False,
    now: dt.datetime | None = None,
) -> Life:
    """Cancel a Life (DELETE, or an operator in the admin with `user=None, operator=True`).

    Before birth: every pending plan → Cancelled, Life → Stillbirth; no action runs. A term
    Life already born: its death plan is armed now and handed to a worker after commit (an
    operator's cancel instead drops the death action: plan Cancelled, Life Dead — the way to
    stop a death that keeps failing). Idempotent for a Stillbirth Life. Raises
    InvalidTransition (Dead), PlanStarted (the birth action is running right now),
    NotFound / PermissionDenied. Locks the Life and its plans.
    """
    now = now or timezone.now()
    token = new_hex_id()
    fire: int | None = None
    with transaction.atomic():
        life = life_get(life_uuid=life_uuid, user=user, for_update=True)
        if life.state == LifeState.STILLBIRTH:
            return life
        if life.state == LifeState.DEAD:
            raise InvalidTransition("This Life is already Dead.")
        plans = _plans_locked(life)
        if life.state == LifeState.INEXISTENT:
            birth = plans[PlanKind.BIRTH]
            if birth.state == PlanState.RUNNING:
                raise PlanStarted("The birth action is running right now; try again shortly.")
            for plan in plans.values():
                if plan.state in PENDING_PLAN_STATES:
                    plan_set_state(plan=plan, to=PlanState.CANCELLED, finished_at=now)
            life_set_state(life=life, to=LifeState.STILLBIRTH)
        else:
            death = plans.get(PlanKind.DEATH)
            if operator:
                if death is not None and death.state in PENDING_PLAN_STATES:
                    plan_set_state(plan=death, to=PlanState.CANCELLED, finished_at=now)
                elif death is not None and death.state == PlanState.FAILED:
                    pass
                elif death is not None and death.state == PlanState.RUNNING:
                    raise PlanStarted("The death action is running right now; try again shortly.")
                life_set_state(life=life, to=LifeState.DEAD)
            elif death is not None and death.state in PENDING_PLAN_STATES:
                claim = {
                    "arm_token": token,
                    "lease_owner": "cancel",
                    "lease_expires_at": now + dt.timedelta(seconds=lease_seconds()),
                    "due_at": now,
                }
                # Standby → Preset, or a Preset death re-armed for now (Preset → Preset).
                plan_set_state(plan=death, to=PlanState.PRESET, **claim)
                fire = death.pk
        if fire is not None:
            # Lost with a refusing broker, the plan is fired again when the claim's lease ends.
            enqueue_on_commit(PLAN_EXECUTE, fire, token)
    life.refresh_from_db()
    return life


def plan_retry(*, plan_id: int, now: dt.datetime | None = None) -> Plan:
    """An operator retries a Failed plan: Failed → Standby, due now (the watcher arms it).

    A birth plan is retried only while its Life is still Inexistent. Raises InvalidTransition.
    """
    now = now or timezone.now()
    with transaction.atomic():
        plan = Plan.objects.select_for_update(of=("self",)).select_related("life").get(pk=plan_id)
        if plan.kind == PlanKind.BIRTH and plan.life.state != LifeState.INEXISTENT:
            raise InvalidTransition("Only a Life that has not been born can retry its birth.")
        plan_set_state(
            plan=plan, to=PlanState.STANDBY, due_at=now, attempts_count=0, finished_at=None
        )
    return plan


def life_history_purge(*, now: dt.datetime, dry_run: bool = False) -> CleanupReport:
    """Delete finished Lives older than SCHEDULE_HISTORY_DURATION_DAYS (with their plans and
    attempts): Stillbirth by birth_time, Dead by death_time (a point Life: its birth_time).
    Idempotent."""
    cutoff = now - dt.timedelta(days=float(settings.SCHEDULE_HISTORY_DURATION_DAYS))
    old = Life.objects.filter(
        Q(state=LifeState.STILLBIRTH, birth_time__lt=cutoff)
        | Q(state=LifeState.DEAD, death_time__lt=cutoff)
        | Q(state=LifeState.DEAD, death_time__isnull=True, birth_time__lt=cutoff)
    )
    if dry_run:
        uuids = list(old.values_list("life_uuid", flat=True)[:1000])
        return CleanupReport(kind="schedule", count=old.count(), items=uuids)
    total = 0
    while True:
        batch = list(old.values_list("pk", flat=True)[:1000])
        if not batch:
            break
        Life.objects.filter(pk__in=batch).delete()
        total += len(batch)
    return CleanupReport(kind="schedule", count=total)


def parse_schedule_header(value: str) -> str:
    """Validate an X-Schedule-Datetime value early (raises InvalidSchedule); returns it."""
    try:
        parse_time(value)
    except ValueError as exc:
        raise InvalidSchedule(
            f"X-Schedule-Datetime: {exc}.", fields={"X-Schedule-Datetime": [str(exc)]}
        ) from exc
    return value
