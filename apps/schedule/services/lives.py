"""Changing (PATCH), cancelling (DELETE, the operator's cancel) and purging Lives. Lock order:
the package's (`apps.schedule.services`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import InvalidTransition
from apps.core.models_utils import new_hex_id
from apps.core.queue import PLAN_EXECUTE, enqueue_on_commit
from apps.schedule.booking import LifeSpec, life_spec_build
from apps.schedule.delivery import WATCHER, delivery_mode
from apps.schedule.exceptions import InvalidSchedule, PlanStarted
from apps.schedule.models import (
    LIVING_STATES,
    PENDING_PLAN_STATES,
    Life,
    LifeState,
    Plan,
    PlanKind,
    PlanState,
)
from apps.schedule.selectors import life_get
from apps.schedule.services.booking import (
    check_no_conflict,
    check_not_too_late,
    check_topic_calls,
    guard_band,
    resource_conflict,
    resource_lock,
)
from apps.schedule.services.plans import (
    lease_seconds,
    life_set_state,
    plan_set_state,
    plans_locked,
)

PATCHABLE = {"term", "birth_time", "death_time", "birth", "death", "birth_action", "death_action"}


def _check_patchable(data: dict[str, Any]) -> None:
    """InvalidSchedule naming each field of `data` that cannot change."""
    unknown = sorted(set(data) - PATCHABLE)
    if unknown:
        raise InvalidSchedule(
            "Only times and actions can be changed.",
            fields={name: ["This field cannot be changed."] for name in unknown},
        )


def _change_spec(current: Life, data: dict[str, Any]) -> LifeSpec:
    """The Life as it would be with `data`'s times and actions, validated like a booking."""
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
    return life_spec_build(merged)


def _changed_plans(current: Life, spec: LifeSpec) -> dict[str, bool]:
    """Which of the Life's plans (by kind) the change moves or rewrites."""
    return {
        PlanKind.BIRTH: spec.birth_time != current.birth_time
        or spec.birth_action != current.birth_action,
        PlanKind.DEATH: spec.death_time != current.death_time
        or spec.death_action != current.death_action,
    }


def _check_changed_times(spec: LifeSpec, changed: dict[str, bool], now: dt.datetime) -> None:
    """TooLate for a changed plan's new time (an unchanged one may already be near)."""
    times = {}
    if changed[PlanKind.BIRTH]:
        times["birth_time"] = spec.birth_time
    if changed[PlanKind.DEATH] and spec.death_time is not None:
        times["death_time"] = spec.death_time
    check_not_too_late(times, now)


def _plans_changeable(life: Life, changed: dict[str, bool]) -> dict[str, Plan]:
    """The Life's plans, locked; PlanStarted when the Life is over or a changed plan has left
    Standby/Preset."""
    if life.state not in LIVING_STATES:
        raise PlanStarted(f"This Life is {life.state}; it can no longer be changed.")
    plans = plans_locked(life)
    for kind, plan in plans.items():
        if changed[kind] and plan.state not in PENDING_PLAN_STATES:
            raise PlanStarted(f"The {kind} plan is {plan.state}; it cannot be changed.")
    return plans


def _plans_rewrite(plans: dict[str, Plan], spec: LifeSpec, changed: dict[str, bool]) -> None:
    """Give each changed plan its new time and action, from its first attempt again. A Preset
    plan's claim is released (→ Standby), so its old timer can never fire it."""
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
    _check_patchable(data)
    current = life_get(life_uuid=life_uuid, user=user)
    spec = _change_spec(current, data)
    check_topic_calls(user=user, spec=spec)
    changed = _changed_plans(current, spec)
    _check_changed_times(spec, changed, now)
    guard_start, guard_end = guard_band(spec)
    try:
        with transaction.atomic():
            resource_lock(current.resource_id)
            life = life_get(life_uuid=life_uuid, user=user, for_update=True)
            plans = _plans_changeable(life, changed)
            check_no_conflict(
                user_id=user.pk,
                resource_id=life.resource_id,
                guard_start=guard_start,
                guard_end=guard_end,
                exclude_pk=life.pk,
            )
            _plans_rewrite(plans, spec, changed)
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
        raise resource_conflict(current.resource_id) from exc
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
        plans = plans_locked(life)
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
                # Plans delivered by watchers: a claim that ends at once, so the next poll of
                # any watcher takes the death over (a new token) rather than wait for the
                # task below behind the queue's gradings; whichever starts first, only one can.
                lease = 0.0 if delivery_mode() == WATCHER else lease_seconds()
                claim = {
                    "arm_token": token,
                    "lease_owner": "cancel",
                    "lease_expires_at": now + dt.timedelta(seconds=lease),
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
