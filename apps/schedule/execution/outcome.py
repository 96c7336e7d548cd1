"""An attempt's outcome recorded: the attempt row, the plan moved on (Done, Failed, a retry
armed later) and its Life with it, in one transaction of compare-and-sets."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.schedule.execution.request import Outcome
from apps.schedule.models import Life, LifeState, Plan, PlanAttempt, PlanKind, PlanState
from apps.schedule.services.plans import life_birth_lost, life_set_state, plans_set_state


def plan_record(*, plan: Plan, life: Life, outcome: Outcome, started: dt.datetime) -> str:
    """Record the attempt and move the plan (and its Life) on, in one transaction: the Life's
    compare-and-set (when it changes; Life before plan, the services' lock order), the plan's
    compare-and-set from Running under this delivery's arm token and id, the attempt row.

    `plan` and `life` were loaded after this delivery's own Running CAS: while a plan is
    Running nothing else writes it (cancels and changes refuse with PlanStarted), so its
    `attempts_count` is current without a lock. A lost compare-and-set (a redelivery resumed
    the plan, a Life changed under us) raises InvalidTransition and rolls everything back.
    """
    now = timezone.now()
    success = outcome.status_code is not None and 200 <= outcome.status_code < 300
    retryable = outcome.status_code in settings.EXECUTION_RETRY_CODES
    number = plan.attempts_count + 1
    life_state: str | None = None
    birth_lost = False
    fields: dict[str, Any]
    if success:
        new, result, fields = PlanState.DONE, "done", {"finished_at": now}
        life_state = (
            LifeState.DEAD
            if plan.kind == PlanKind.DEATH or life.schedule_type == "point"
            else LifeState.ALIVE
        )
    elif outcome.final and plan.kind == PlanKind.DEATH:
        # Refused for good: the Life's term is over, its death action never ran.
        new, result, fields = PlanState.FAILED, "failed", {"finished_at": now}
        life_state = LifeState.DEAD
    elif retryable and number <= int(plan.action.get("retry_count") or 0):
        interval = dt.timedelta(seconds=float(plan.action.get("retry_interval") or 0))
        new, result, fields = PlanState.STANDBY, "retry", {"due_at": now + interval}
    elif plan.kind == PlanKind.DEATH:
        interval = dt.timedelta(minutes=float(settings.DEATH_RETRY_INTERVAL))
        new, result, fields = PlanState.STANDBY, "retry", {"due_at": now + interval}
    else:
        new, result, fields = PlanState.FAILED, "failed", {"finished_at": now}
        birth_lost = True
    if new == PlanState.STANDBY:
        fields["arm_token"] = ""
    with transaction.atomic():
        if life_state is not None:
            life_set_state(life=life, to=life_state)
        moved = plans_set_state(
            Plan.objects.filter(pk=plan.pk, arm_token=plan.arm_token, lease_owner=plan.lease_owner),
            old=PlanState.RUNNING,
            to=new,
            attempts_count=number,
            lease_owner="",
            updated_at=now,
            **fields,
        )
        if moved != 1:
            raise InvalidTransition(f"Plan {plan.pk} changed state concurrently.")
        PlanAttempt.objects.create(
            plan_id=plan.pk,
            number=number,
            started_at=started,
            status_code=outcome.status_code,
            error=outcome.error,
            duration_ms=outcome.duration_ms,
            response_excerpt=outcome.excerpt,
        )
        if birth_lost:
            life_birth_lost(life_id=life.pk, now=now)
    plan.state, plan.attempts_count, plan.lease_owner = new, number, ""
    for name, value in fields.items():
        setattr(plan, name, value)
    return result
