"""Watchers' claims: arming due plans under a lease (Standby → Preset with a fresh arm token),
renewing and releasing leases, and invalidating births that missed their window."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.models_utils import new_hex_id
from apps.schedule.metrics import plans_invalidated
from apps.schedule.models import LifeState, Plan, PlanKind, PlanState
from apps.schedule.services.plans import (
    lease_seconds,
    life_birth_lost,
    plan_set_state,
    plans_set_state,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArmedPlan:
    plan_id: int
    token: str
    due_at: dt.datetime


def _claimable(now: dt.datetime, horizon: dt.datetime) -> Q:
    earliest = now - dt.timedelta(minutes=float(settings.BIRTH_DELAY_LIMIT_TIME))
    standby_birth = Q(
        state=PlanState.STANDBY,
        kind=PlanKind.BIRTH,
        life__state=LifeState.INEXISTENT,
        due_at__lte=horizon,
    ) & (Q(due_at__gte=earliest) | Q(attempts_count__gt=0))
    standby_death = Q(
        state=PlanState.STANDBY,
        kind=PlanKind.DEATH,
        life__state=LifeState.ALIVE,
        due_at__lte=horizon,
    )
    abandoned = Q(state=PlanState.PRESET, lease_expires_at__lt=now, due_at__lte=horizon)
    return standby_birth | standby_death | abandoned


def plan_claim(
    *,
    owner: str,
    now: dt.datetime | None = None,
    horizon: dt.datetime | None = None,
    limit: int = 5000,
) -> list[ArmedPlan]:
    """Claim (arm) the plans due by `horizon` (default now + PRESET_EXECUTION_TIME) for `owner`.

    Claimable: Standby birth plans of unborn Lives in `[now - BIRTH_DELAY_LIMIT_TIME, horizon]`
    (a retry is claimable however late), Standby death plans of Alive Lives due by `horizon`,
    and Preset plans whose lease expired (a dead watcher's). Each becomes Preset with a new
    token and a lease of `lease_seconds()`. Rows another watcher is claiming are skipped, never
    waited for (SKIP LOCKED); on SQLite the IMMEDIATE transaction serializes claimers.
    """
    now = now or timezone.now()
    horizon = horizon or now + dt.timedelta(minutes=float(settings.PRESET_EXECUTION_TIME))
    token = new_hex_id()
    expires = now + dt.timedelta(seconds=lease_seconds())
    with transaction.atomic():
        candidates = Plan.objects.filter(_claimable(now, horizon)).order_by("due_at")
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        ids = list(candidates.values_list("pk", flat=True)[:limit])
        if not ids:
            return []
        # Standby → Preset, or an expired claim taken over (Preset → Preset).
        plans_set_state(
            Plan.objects.filter(pk__in=ids),
            old=(PlanState.STANDBY, PlanState.PRESET),
            to=PlanState.PRESET,
            arm_token=token,
            lease_owner=owner,
            lease_expires_at=expires,
            updated_at=now,
        )
        rows = Plan.objects.filter(pk__in=ids).values_list("pk", "due_at")
        return [ArmedPlan(plan_id=pk, token=token, due_at=due) for pk, due in rows]


def plan_leases_renew(
    *, owner: str, plan_ids: list[int] | None = None, now: dt.datetime | None = None
) -> int:
    """Extend the leases `owner` holds on `plan_ids` (default: every one); returns how many.
    Lost leases are not renewed.

    A watcher renews only the plans still on its timers: a plan handed to the broker keeps the
    lease it had, so if the broker loses the task (a Redis restart, a killed cluster that had
    pulled it) the plan is claimable again once that lease ends, and a late delivery of the
    lost task finds a new arm token and starts nothing.
    """
    now = now or timezone.now()
    expires = now + dt.timedelta(seconds=lease_seconds())
    rows = Plan.objects.filter(state=PlanState.PRESET, lease_owner=owner)
    if plan_ids is not None:
        if not plan_ids:
            return 0
        rows = rows.filter(pk__in=plan_ids)
    return rows.update(lease_expires_at=expires)


def plan_claims_release(*, owner: str, plan_ids: list[int]) -> int:
    """Give back `owner`'s claims on `plan_ids` (Preset → Standby) so another watcher arms them
    at once instead of after the lease. Plans already handed to a worker are not in the list."""
    with transaction.atomic():
        return plans_set_state(
            Plan.objects.filter(pk__in=plan_ids, lease_owner=owner),
            old=PlanState.PRESET,
            to=PlanState.STANDBY,
            arm_token="",
            lease_owner="",
            lease_expires_at=None,
            updated_at=timezone.now(),
        )


def plan_invalidate_late(*, now: dt.datetime | None = None) -> int:
    """Standby birth plans older than BIRTH_DELAY_LIMIT_TIME (never attempted) → Invalidated;
    their Lives → Stillbirth and their death plans → Cancelled. Returns how many."""
    now = now or timezone.now()
    earliest = now - dt.timedelta(minutes=float(settings.BIRTH_DELAY_LIMIT_TIME))
    late_ids = list(
        Plan.objects.filter(
            state=PlanState.STANDBY,
            kind=PlanKind.BIRTH,
            due_at__lt=earliest,
            attempts_count=0,
        ).values_list("pk", flat=True)[:1000]
    )
    done = 0
    for plan_id in late_ids:
        with transaction.atomic():
            plan = (
                Plan.objects.select_for_update(of=("self",))
                .filter(pk=plan_id, state=PlanState.STANDBY, due_at__lt=earliest)
                .first()
            )
            if plan is None:
                continue
            plan_set_state(plan=plan, to=PlanState.INVALIDATED, finished_at=now)
            life_birth_lost(life_id=plan.life_id, now=now)
            done += 1
        plans_invalidated(kind=plan.kind)
        logger.warning("plan %s missed its window (due %s): invalidated", plan.pk, plan.due_at)
    return done
