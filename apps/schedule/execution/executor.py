"""Deliveries: start armed plans (the compare-and-set Preset(token) → Running), run each one's
attempt and record it; resume attempts whose worker died; the fallback pass without timers."""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from django.db import InterfaceError, OperationalError, connections
from django.db.models import Q
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.core.logcontext import log_context
from apps.core.models_utils import new_hex_id
from apps.core.queue import PLAN_EXECUTE, enqueue
from apps.schedule.execution.claims import ArmedPlan, plan_claim, plan_invalidate_late
from apps.schedule.execution.outcome import plan_record
from apps.schedule.execution.request import Outcome, action_request
from apps.schedule.metrics import plan_attempt_recorded, plan_fired, plan_skipped
from apps.schedule.models import Life, LifeState, Plan, PlanAttempt, PlanKind, PlanState
from apps.schedule.services.plans import plan_set_state, plans_set_state

logger = logging.getLogger(__name__)
# Most abandoned Running plans handed to workers again per fallback pass (once a minute).
REDELIVER_BATCH = 200
# How long an attempt's outcome waits for an unreachable database before it is left to the
# redelivery of abandoned attempts.
RECORD_OUTAGE_SECONDS = 30.0
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def plans_start(*, items: list[tuple[int, str]], now: dt.datetime | None = None) -> dict[int, Plan]:
    """Start armed deliveries: every (plan_id, arm token) of `items` still Preset under that
    token → Running, in one conditional UPDATE that marks the rows with a fresh delivery id
    (`lease_owner`, which holds the watcher's id while Preset); then one SELECT loads the plans
    this call won, with their Lives. Returns them by id.

    Exactly once: the UPDATE is the compare-and-set, so of two deliveries of one arming (a
    broker redelivery, a second watcher's timer, a stale timer after PATCH) only one wins each
    plan. A plan this call did not win may be a redelivery after its worker died mid-attempt:
    `_resume_abandoned` restarts it once the first attempt is certainly over.
    """
    if not items:
        return {}  # an empty condition below would match every Preset plan
    now = now or timezone.now()
    delivery = f"run:{new_hex_id()}"
    by_token: dict[str, list[int]] = {}
    for plan_id, token in items:
        by_token.setdefault(token, []).append(plan_id)
    armed = Q()
    for token, plan_ids in by_token.items():
        armed |= Q(arm_token=token, pk__in=plan_ids)
    plans_set_state(
        Plan.objects.filter(armed),
        old=PlanState.PRESET,
        to=PlanState.RUNNING,
        started_at=now,
        lease_owner=delivery,
        lease_expires_at=None,
        updated_at=now,
    )
    ids = [plan_id for plan_id, _ in items]
    started = {
        plan.pk: plan
        for plan in Plan.objects.select_related("life").filter(
            pk__in=ids, state=PlanState.RUNNING, lease_owner=delivery
        )
    }
    for plan in started.values():
        plan_fired(kind=plan.kind, lateness=now - plan.due_at)
    for plan_id, token in items:
        if plan_id not in started and _resume_abandoned(
            plan_id=plan_id, token=token, now=now, delivery=delivery
        ):
            started[plan_id] = Plan.objects.select_related("life").get(pk=plan_id)
    return started


def plan_run(plan: Plan, *, not_before: float | None = None) -> str:
    """Run a plan this delivery started (`plans_start`): one HTTP attempt (outside any
    transaction), record it, then Done / Failed / a retry scheduled (Running → Standby).
    With `not_before` (a `time.time()`), a plan started ahead of its time sends its request
    at that instant, not before, and its attempt is recorded as started then.

    Retry codes are retried `retry_count` times `retry_interval` s apart (each retry is armed
    by a watcher, never slept out in the worker); a death that still fails is retried every
    DEATH_RETRY_INTERVAL until it succeeds or an operator cancels its Life. A plan whose Life
    moved on meanwhile (a birth of a born Life, a death of a Life not Alive) fails unrun.
    """
    with log_context(plan_id=plan.pk, life_uuid=plan.life.life_uuid):
        life = plan.life
        if (plan.kind == PlanKind.BIRTH and life.state != LifeState.INEXISTENT) or (
            plan.kind == PlanKind.DEATH and life.state != LifeState.ALIVE
        ):
            plan_set_state(
                plan=plan, to=PlanState.FAILED, finished_at=timezone.now(), lease_owner=""
            )
            plan_skipped(kind=plan.kind)
            logger.info("plan %s skipped: its Life is %s", plan.pk, life.state)
            return "skipped"
        outcome = action_request(plan, life, not_before=not_before)
        started = plan.started_at or timezone.now()  # always set by plans_start
        if not_before is not None and not_before > started.timestamp():
            started = dt.datetime.fromtimestamp(not_before, tz=dt.UTC)
        result = _record_through_outage(plan=plan, life=life, outcome=outcome, started=started)
        plan_attempt_recorded(
            kind=plan.kind,
            number=plan.attempts_count,
            status_code=outcome.status_code,
            result=result,
        )
        logger.info(
            "plan %s (%s) attempt %s: %s -> %s",
            plan.pk,
            plan.kind,
            plan.attempts_count,
            outcome.status_code if outcome.status_code is not None else outcome.error,
            result,
        )
        return result


def _record_through_outage(
    *, plan: Plan, life: Life, outcome: Outcome, started: dt.datetime
) -> str:
    """`plan_record`, tried again while the database is unreachable (a restart, a failover)
    for up to RECORD_OUTAGE_SECONDS: the attempt was made and its outcome is in hand, so
    waiting out a short outage records it instead of leaving the plan Running for the
    redelivery of abandoned attempts, which would send the request a second time.

    A commit whose acknowledgement was lost is found by its attempt row: the retry's
    compare-and-set then fails, and the plan's recorded state gives the result."""
    deadline = time.monotonic() + RECORD_OUTAGE_SECONDS
    pause = 0.25
    retried = False
    while True:
        try:
            return plan_record(plan=plan, life=life, outcome=outcome, started=started)
        except DATABASE_UNAVAILABLE:
            if time.monotonic() + pause > deadline:
                raise
            logger.warning("plan %s: the database is unreachable; recording again", plan.pk)
        except InvalidTransition:
            recorded = _recorded_result(plan) if retried else None
            if recorded is None:
                raise
            return recorded
        retried = True
        connections.close_all()
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


def _recorded_result(plan: Plan) -> str | None:
    """The result of this delivery's attempt when its record committed unacknowledged."""
    number = plan.attempts_count + 1
    if not PlanAttempt.objects.filter(plan_id=plan.pk, number=number).exists():
        return None
    state = str(Plan.objects.values_list("state", flat=True).get(pk=plan.pk))
    plan.state, plan.attempts_count, plan.lease_owner = state, number, ""
    results: dict[str, str] = {PlanState.DONE: "done", PlanState.FAILED: "failed"}
    return results.get(state, "retry")


def plan_execute(*, plan_id: int, token: str) -> str:
    """Run one armed delivery of a plan: start it (CAS Preset(token) → Running), then
    `plan_run`. Idempotent: a duplicate or stale delivery starts nothing and returns "skipped".

    Five statements when it succeeds (a burst runs thousands): the claim UPDATE, the SELECT of
    the plan and its Life, and the outcome's transaction (Life CAS, plan CAS, attempt INSERT).
    """
    plan = plans_start(items=[(plan_id, token)]).get(plan_id)
    return "skipped" if plan is None else plan_run(plan)


def _resume_abandoned(*, plan_id: int, token: str, now: dt.datetime, delivery: str) -> bool:
    """A redelivery of a plan whose worker died mid-attempt: it may run again once the first
    attempt is certainly over (its connect + request timeouts and a minute have passed).
    Compare-and-set on `started_at`, so only one redelivery resumes it (under `delivery`)."""
    plan = Plan.objects.filter(pk=plan_id, state=PlanState.RUNNING, arm_token=token).first()
    if plan is None or plan.started_at is None:
        return False
    if plan.started_at > now - _attempt_limit(plan.action):
        return False
    return (
        Plan.objects.filter(
            pk=plan_id, state=PlanState.RUNNING, arm_token=token, started_at=plan.started_at
        ).update(started_at=now, lease_owner=delivery, updated_at=now)
        == 1
    )


def _attempt_limit(action: dict[str, Any]) -> dt.timedelta:
    """When an attempt started at T is certainly over: T + its connect and request timeouts +
    a minute (`_resume_abandoned`)."""
    seconds = float(action.get("connect_timeout") or 5) + float(action.get("request_timeout") or 30)
    return dt.timedelta(seconds=seconds + 60)


def plans_running_abandoned(*, now: dt.datetime | None = None) -> list[tuple[int, str]]:
    """(plan id, arm token) of Running plans whose attempt is certainly over without a record:
    their worker died mid-attempt. The Redis broker never redelivers a task, so nothing else
    would ever finish them; a new delivery with their token resumes each once
    (`_resume_abandoned`)."""
    now = now or timezone.now()
    rows = Plan.objects.filter(
        state=PlanState.RUNNING, started_at__lt=now - dt.timedelta(seconds=60)
    ).values_list("pk", "arm_token", "started_at", "action")[:REDELIVER_BATCH]
    return [
        (pk, token)
        for pk, token, started, action in rows
        if started is not None and started < now - _attempt_limit(action)
    ]


def plans_fire_due(*, owner: str, now: dt.datetime | None = None) -> list[ArmedPlan]:
    """One watcher pass without timers (the django-q2 fallback schedule): invalidate late
    plans, claim the plans already due and hand each to a worker now; hand abandoned Running
    plans to a worker again."""
    now = now or timezone.now()
    plan_invalidate_late(now=now)
    armed = plan_claim(owner=owner, now=now, horizon=now)
    for item in armed:
        enqueue(PLAN_EXECUTE, item.plan_id, item.token)
    for plan_id, token in plans_running_abandoned(now=now):
        logger.warning("plan %s: its attempt was abandoned mid-way; delivering it again", plan_id)
        enqueue(PLAN_EXECUTE, plan_id, token)
    return armed
