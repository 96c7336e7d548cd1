"""Plan execution: watchers' claims (leases), late-plan invalidation and the action executor.

Exactly once: a watcher arms a plan by moving it Standby → Preset with a fresh `arm_token`
(claims take `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, the IMMEDIATE transaction on
SQLite). A delivery runs the action only after the compare-and-set Preset(token) → Running
succeeds, so two deliveries of one arming (or a stale timer of an older arming) never both run.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.core.logcontext import log_context
from apps.core.models_utils import new_hex_id
from apps.core.queue import PLAN_EXECUTE, enqueue
from apps.schedule.metrics import (
    plan_attempt_recorded,
    plan_fired,
    plan_skipped,
    plans_invalidated,
)
from apps.schedule.models import (
    Life,
    LifeState,
    Plan,
    PlanAttempt,
    PlanKind,
    PlanState,
)
from apps.schedule.selectors import BOOKING_TOKEN_GONE, plan_authority_live
from apps.schedule.selfcalls import (
    ATTEMPT_HEADER,
    SelfCall,
    external_signature,
    self_call_headers,
    url_target,
)
from apps.schedule.services import (
    lease_seconds,
    life_set_state,
    plan_set_state,
    plans_set_state,
)
from apps.schedule.targets import TargetRefused, header_problem, resolve_target
from apps.schedule.transport import TRANSPORT_ERRORS, send

logger = logging.getLogger(__name__)
CONNECTION_ERROR = 599
EXCERPT = 2000
# Most abandoned Running plans handed to workers again per fallback pass (once a minute).
REDELIVER_BATCH = 200


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
            _birth_lost(plan.life_id, now)
            done += 1
        plans_invalidated(kind=plan.kind)
        logger.warning("plan %s missed its window (due %s): invalidated", plan.pk, plan.due_at)
    return done


def _birth_lost(life_id: int, now: dt.datetime) -> None:
    """The birth will never run: Life → Stillbirth, its death plan → Cancelled (not run)."""
    life = Life.objects.select_for_update(of=("self",)).get(pk=life_id)
    if life.state == LifeState.INEXISTENT:
        life_set_state(life=life, to=LifeState.STILLBIRTH)
    death = Plan.objects.filter(
        life_id=life_id, kind=PlanKind.DEATH, state__in=[PlanState.STANDBY, PlanState.PRESET]
    ).first()
    if death is not None:
        plan_set_state(plan=death, to=PlanState.CANCELLED, finished_at=now)


# --- the executor ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str
    duration_ms: float
    excerpt: str


def _body_text(action: dict[str, Any]) -> tuple[str, dict[str, str]]:
    body = action.get("body")
    headers = {str(k): str(v) for k, v in (action.get("headers") or {}).items()}
    if body is None:
        return "", headers
    if isinstance(body, str):
        return body, headers
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return json.dumps(body), headers


# Headers the platform sets itself; an action's own headers never override them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "x-schedule-life-uuid",
        "x-schedule-plan",
        "x-schedule-attempt",
    }
)


def _request(plan: Plan, life: Life) -> Outcome:
    """Make one signed HTTP request for `plan` (no redirects); never raises. A relative
    path (the platform itself) gets a one-time self-call signature, an external receiver a
    Standard Webhooks one (`selfcalls`).

    The target is checked again now and an absolute URL's host resolved once: the request
    connects to the address that was checked (`transport.send`)."""
    action = plan.action
    started = time.monotonic()
    try:
        target = resolve_target(str(action["path"]))
    except TargetRefused as exc:
        return Outcome(None, f"refused: {exc}", 0.0, "")
    if target.relative and not plan_authority_live(plan=plan):
        # Not sent: the platform would refuse the self-call anyway (`authentication`).
        return Outcome(None, f"refused: {BOOKING_TOKEN_GONE}", 0.0, "")
    payload, action_headers = _body_text(action)
    body = payload.encode()
    sent_at = timezone.now()
    headers = [(k, v) for k, v in action_headers.items() if k.lower() not in RESERVED_HEADERS]
    # Booked before header names and values were checked: refused, never raised mid-delivery.
    problem = next((p for k, v in headers if (p := header_problem(k, v)) is not None), None)
    if problem is not None:
        return Outcome(None, f"refused: {problem}", 0.0, "")
    attempt = plan.attempts_count + 1
    if target.relative:
        # The platform's own call: a one-time signature bound to this very request.
        call = SelfCall(
            msg_id=plan.webhook_id,
            timestamp=int(sent_at.timestamp()),
            method=str(action["method"]),
            target=url_target(target.url),
            body=body,
            life_uuid=life.life_uuid,
            plan_kind=plan.kind,
            attempt=attempt,
        )
        headers += self_call_headers(call)
    else:
        headers += [
            ("webhook-id", plan.webhook_id),
            ("webhook-timestamp", str(int(sent_at.timestamp()))),
            (
                "webhook-signature",
                external_signature(msg_id=plan.webhook_id, timestamp=sent_at, body=payload),
            ),
            ("X-Schedule-Life-UUID", life.life_uuid),
            ("X-Schedule-Plan", plan.kind),
            (ATTEMPT_HEADER, str(attempt)),
        ]
    connect_timeout = float(action.get("connect_timeout") or 5)
    request_timeout = float(action.get("request_timeout") or 30)
    try:
        reply = send(
            target=target,
            method=str(action["method"]),
            headers=headers,
            body=body,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            max_seconds=min(
                connect_timeout + request_timeout, float(settings.SCHEDULE_ACTION_MAX_SECONDS)
            ),
            max_body=EXCERPT * 4,
        )
    except TRANSPORT_ERRORS as exc:
        elapsed = (time.monotonic() - started) * 1000
        error = f"{type(exc).__name__}: {exc}".replace("\x00", "")[:EXCERPT]
        return Outcome(CONNECTION_ERROR, error, elapsed, "")
    elapsed = (time.monotonic() - started) * 1000
    # PostgreSQL cannot store NUL in text; a receiver's body must never break the record.
    text = reply.body.decode("utf-8", errors="replace")
    excerpt = text[:EXCERPT].replace("\x00", "")
    return Outcome(reply.status, "", elapsed, excerpt)


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


def plan_run(plan: Plan) -> str:
    """Run a plan this delivery started (`plans_start`): one HTTP attempt (outside any
    transaction), record it, then Done / Failed / a retry scheduled (Running → Standby).

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
        outcome = _request(plan, life)
        started = plan.started_at or timezone.now()  # always set by plans_start
        result = _plan_record(plan=plan, life=life, outcome=outcome, started=started)
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


def _plan_record(*, plan: Plan, life: Life, outcome: Outcome, started: dt.datetime) -> str:
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
            _birth_lost(life.pk, now)
    plan.state, plan.attempts_count, plan.lease_owner = new, number, ""
    for name, value in fields.items():
        setattr(plan, name, value)
    return result


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
