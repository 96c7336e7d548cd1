"""Every state change of a plan or a Life goes through here (`PLAN_TRANSITIONS`,
`LIFE_TRANSITIONS`: one compare-and-set each), and the operator's retry of a failed plan."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.schedule.models import (
    LIFE_TRANSITIONS,
    PENDING_PLAN_STATES,
    PLAN_TRANSITIONS,
    Life,
    LifeState,
    Plan,
    PlanKind,
    PlanState,
)


def lease_seconds() -> float:
    """How long a watcher's claim lasts without renewal: five watch intervals, at least 1 s."""
    return max(5 * float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000, 1.0)


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


def plans_locked(life: Life) -> dict[str, Plan]:
    """`life`'s plans by kind, locked in pk order (call inside `transaction.atomic()`)."""
    plans = Plan.objects.select_for_update(of=("self",)).filter(life=life).order_by("pk")
    return {plan.kind: plan for plan in plans}


def life_birth_lost(*, life_id: int, now: dt.datetime) -> None:
    """The birth will never run: Life → Stillbirth, its death plan → Cancelled (not run).
    Locks the Life; call inside the transaction that failed or invalidated the birth."""
    life = Life.objects.select_for_update(of=("self",)).get(pk=life_id)
    if life.state == LifeState.INEXISTENT:
        life_set_state(life=life, to=LifeState.STILLBIRTH)
    death = Plan.objects.filter(
        life_id=life_id, kind=PlanKind.DEATH, state__in=PENDING_PLAN_STATES
    ).first()
    if death is not None:
        plan_set_state(plan=death, to=PlanState.CANCELLED, finished_at=now)


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
