"""Reservations the platform keeps for itself (a phase's reveal, SPEC §11.3): at most one
pending point Life per action path, whose birth calls that path of the platform at its time.

Such a Life is owned by the platform's account (`apps.core.accounts.platform_account`) and
booked without an API token, so its authority never lapses with a person's token or rights
(`selectors.plan_authority_live`); it is outside every user's Lives cap and resource
conflicts (no `resource_id`); and it is delivered like every Life: armed by any number of
watchers, fired on time, at least once with one `webhook-id`, retried on 5xx and 599. The time
is not held to the 406 rule: a time already past (within BIRTH_DELAY_LIMIT_TIME) fires at the
next watch; the caller decides what an older time means.

Lock order: the package's. A per-path row of `ScheduleResource` (never a Life's
`resource_id`) serializes the changes of one path, then its Lives, then their plans.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.core.accounts import PlatformAccountTaken, platform_account
from apps.core.models_utils import new_hex_id
from apps.schedule.booking import LifeSpec, life_spec_build
from apps.schedule.models import (
    PENDING_PLAN_STATES,
    Life,
    LifeState,
    Plan,
    PlanKind,
    PlanState,
    ScheduleType,
)
from apps.schedule.services.booking import guard_band, resource_lock
from apps.schedule.services.plans import life_set_state, plan_set_state, plans_locked

logger = logging.getLogger(__name__)

#: A failed call (5xx, 599: the web process restarting) is retried this often, this far apart.
RETRY_COUNT = 5
RETRY_INTERVAL = 10.0
_LOCK_PREFIX = "platform:"


def _lock_name(path: str) -> str:
    return f"{_LOCK_PREFIX}{path}"[:200]


def _pending(
    *, owner_id: int, path: str | None = None, prefix: str | None = None
) -> QuerySet[Life]:
    """The platform's Lives whose birth has not started, by exact path or path prefix."""
    waiting = Plan.objects.filter(kind=PlanKind.BIRTH, state__in=PENDING_PLAN_STATES)
    lives = Life.objects.filter(
        owner_id=owner_id,
        schedule_type=ScheduleType.POINT,
        state=LifeState.INEXISTENT,
        pk__in=waiting.values("life_id"),
    )
    if path is not None:
        lives = lives.filter(birth_action__path=path)
    if prefix is not None:
        lives = lives.filter(birth_action__path__startswith=prefix)
    return lives


def _spec(path: str, at: dt.datetime) -> LifeSpec:
    return life_spec_build(
        {
            "schedule_type": ScheduleType.POINT,
            "birth_time": at,
            "birth_action": {
                "path": path,
                "method": "POST",
                "retry_count": RETRY_COUNT,
                "retry_interval": RETRY_INTERVAL,
            },
        }
    )


def _life_create(*, owner: AbstractBaseUser, spec: LifeSpec) -> Life:
    guard_start, guard_end = guard_band(spec)
    life = Life.objects.create(
        owner_id=owner.pk,
        schedule_type=spec.schedule_type,
        birth_time=spec.birth_time,
        birth_action=spec.birth_action,
        guard_start=guard_start,
        guard_end=guard_end,
        fingerprint=spec.fingerprint(),
    )
    Plan.objects.create(
        life=life,
        kind=PlanKind.BIRTH,
        time=spec.birth_time,
        due_at=spec.birth_time,
        action=spec.birth_action,
        webhook_id=f"msg_{new_hex_id()}",
    )
    return life


def _life_move(*, life: Life, birth: Plan, spec: LifeSpec) -> None:
    """A new time (and action) for a pending birth, from its first attempt again. A Preset
    plan's claim is released (→ Standby), so the old arming can never start it."""
    if birth.time == spec.birth_time and birth.action == spec.birth_action:
        return
    fields: dict[str, Any] = {
        "time": spec.birth_time,
        "due_at": spec.birth_time,
        "action": spec.birth_action,
        "attempts_count": 0,
        "arm_token": "",
        "lease_owner": "",
        "lease_expires_at": None,
    }
    if birth.state == PlanState.PRESET:
        plan_set_state(plan=birth, to=PlanState.STANDBY, **fields)
    else:
        Plan.objects.filter(pk=birth.pk).update(**fields, updated_at=timezone.now())
    guard_start, guard_end = guard_band(spec)
    Life.objects.filter(pk=life.pk).update(
        birth_time=spec.birth_time,
        birth_action=spec.birth_action,
        guard_start=guard_start,
        guard_end=guard_end,
        fingerprint=spec.fingerprint(),
        updated_at=timezone.now(),
    )


def _life_cancel(*, life: Life, birth: Plan, now: dt.datetime) -> None:
    plan_set_state(plan=birth, to=PlanState.CANCELLED, finished_at=now)
    life_set_state(life=life, to=LifeState.STILLBIRTH)


def _platform_owner() -> Any:
    """The platform's account, or None (logged) when its reserved name is held by an account
    a person could use: nothing is booked, moved or accepted as the platform's call then; the
    overdue check still reveals late."""
    try:
        return platform_account()
    except PlatformAccountTaken:
        logger.exception("schedule: the platform's reservations are off")
        return None


def platform_reservation_set(
    *, path: str, at: dt.datetime | None, now: dt.datetime | None = None
) -> Life | None:
    """Make the platform's pending reservation of `path` fire at `at`: book it, move it, or
    (with `at=None`) cancel it. Returns the pending Life (None when there is none).

    Idempotent: the same `at` again changes nothing. A birth already started (Running) is no
    longer pending and is left to finish; a new reservation is booked beside it when `at`
    asks for one. Raises InvalidSchedule when `path` is no route of the platform. Locks the
    path's lock row, then its pending Lives and their plans.
    """
    now = now or timezone.now()
    owner = _platform_owner()
    if owner is None:
        return None
    spec = None if at is None else _spec(path, at)
    with transaction.atomic():
        resource_lock(_lock_name(path))
        lives = _pending(owner_id=owner.pk, path=path).select_for_update(of=("self",))
        keep: Life | None = None
        for life in lives.order_by("pk"):
            birth = plans_locked(life)[PlanKind.BIRTH]
            if birth.state not in PENDING_PLAN_STATES:
                continue  # started since it was read: left to finish
            if spec is not None and keep is None:
                _life_move(life=life, birth=birth, spec=spec)
                keep = life
            else:
                _life_cancel(life=life, birth=birth, now=now)
        if spec is not None and keep is None:
            keep = _life_create(owner=owner, spec=spec)
    if keep is not None:
        keep.refresh_from_db()
    return keep


def platform_reservations(*, prefix: str) -> dict[str, dt.datetime]:
    """The platform's pending reservations whose path starts with `prefix`: path → time."""
    owner = _platform_owner()
    if owner is None:
        return {}
    rows = _pending(owner_id=owner.pk, prefix=prefix).values_list("birth_action", "birth_time")
    return {str(action["path"]): time for action, time in rows}


def platform_call(*, user: Any, auth: Any, path: str) -> bool:
    """Whether a request to `path`, authenticated as `user` with `auth`, is the platform's own
    reservation calling it: the self-call authentication (`authentication`) gave the Running
    plan of a Life that the platform's account owns and whose action is this very path."""
    if not isinstance(auth, Plan) or auth.state != PlanState.RUNNING:
        return False
    account = _platform_owner()
    return account is not None and bool(
        getattr(user, "pk", None) == account.pk
        and auth.life.owner_id == account.pk
        and auth.action.get("path") == path
    )
