"""The one HTTP request of a plan's attempt: the action's target checked again, signed (a
one-time self-call signature for the platform itself, Standard Webhooks for a receiver) and
sent to the address that was checked. Never raises: every failure is an `Outcome`."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.schedule.exceptions import UnknownTopic
from apps.schedule.models import Life, Plan
from apps.schedule.selectors import BOOKING_TOKEN_GONE, plan_authority_live
from apps.schedule.selfcalls import (
    ATTEMPT_HEADER,
    SelfCall,
    external_signature,
    self_call_headers,
    url_target,
)
from apps.schedule.targets import (
    BOOKING_HEADERS,
    Target,
    TargetRefused,
    header_problem,
    resolve_target,
)
from apps.schedule.task_runs import action_topic_call
from apps.schedule.transport import TRANSPORT_ERRORS, Ahead, connect_ahead, send

CONNECTION_ERROR = 599
# Less time than this before a plan's time: its request connects when sent, as always.
AHEAD_MIN_SECONDS = 0.005
EXCERPT = 2000


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str
    duration_ms: float
    excerpt: str
    #: No retry can change it (the booking's credential is gone): a death fails for good too.
    final: bool = False


# Headers a topic call never takes from its action: the body's type and coding, and a
# credential other than the platform's signature, which would make the endpoint refuse it.
TOPIC_CALL_SETS = frozenset({"content-type", "content-encoding", "authorization", "cookie"})


def _body_text(action: dict[str, Any]) -> tuple[str, dict[str, str]]:
    body = action.get("body")
    headers = {str(k): str(v) for k, v in (action.get("headers") or {}).items()}
    try:
        call = action_topic_call(action)
    except UnknownTopic:
        call = None
    if call is not None:
        # Sent exactly as the booking's checks read it (the pairing of a death that undoes its
        # birth's grant runs even after the token is gone): a JSON object of topic and content.
        headers = {k: v for k, v in headers.items() if k.lower() not in TOPIC_CALL_SETS}
        headers["Content-Type"] = "application/json"
        return json.dumps({"topic": call.topic, "content": call.content}), headers
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


def _connect_ahead(target: Target, *, not_before: float, connect_timeout: float) -> Ahead | None:
    """A plan started ahead of its time opens its request's connection to an external
    receiver in the meantime (`transport.connect_ahead`), giving up at its time. Not for the
    platform's own calls: an idle connection would hold one of its web workers."""
    left = not_before - time.time()
    if target.relative or left < AHEAD_MIN_SECONDS:
        return None
    return connect_ahead(target=target, timeout=min(connect_timeout, left))


def action_request(plan: Plan, life: Life, *, not_before: float | None = None) -> Outcome:
    """Make one signed HTTP request for `plan` (no redirects); never raises. A relative
    path (the platform itself) gets a one-time self-call signature, an external receiver a
    Standard Webhooks one (`selfcalls`). Everything is made ready first; the request is sent
    no earlier than `not_before` (a `time.time()`), so a plan started ahead of its time by
    the watcher's own pool reaches its target at its time, the database work already done.

    The target is checked again now and an absolute URL's host resolved once: the request
    connects to the address that was checked (`transport.send`)."""
    action = plan.action
    started = time.monotonic()
    try:
        target = resolve_target(str(action["path"]))
    except TargetRefused as exc:
        return Outcome(None, f"refused: {exc}", 0.0, "")
    if not plan_authority_live(plan=plan):
        # Not sent, to the platform (which would refuse the self-call: `authentication`) or
        # to a receiver: the credential that booked it no longer speaks for its owner.
        return Outcome(None, f"refused: {BOOKING_TOKEN_GONE}", 0.0, "", final=True)
    payload, action_headers = _body_text(action)
    body = payload.encode()
    # A booking header (refused at booking since) would book the call instead of making it.
    headers = [
        (k, v)
        for k, v in action_headers.items()
        if k.lower() not in RESERVED_HEADERS and k.lower().replace("_", "-") not in BOOKING_HEADERS
    ]
    # Booked before header names and values were checked: refused, never raised mid-delivery.
    problem = next((p for k, v in headers if (p := header_problem(k, v)) is not None), None)
    if problem is not None:
        return Outcome(None, f"refused: {problem}", 0.0, "")
    connect_timeout = float(action.get("connect_timeout") or 5)
    request_timeout = float(action.get("request_timeout") or 30)
    ahead = None
    if not_before is not None and not_before > time.time():
        ahead = _connect_ahead(target, not_before=not_before, connect_timeout=connect_timeout)
        time.sleep(max(not_before - time.time(), 0.0))
        started = time.monotonic()  # the attempt's duration counts from its request
    sent_at = timezone.now()
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
            ahead=ahead,
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
