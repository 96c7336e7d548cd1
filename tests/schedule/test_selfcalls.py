"""A webhook signature is not a bearer password: receivers that replay what they received, and
anyone replaying or re-aiming the platform's own signed calls, get 401. Real HTTP throughout:
the platform is a live server, receivers and the recording proxy are servers on loopback."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import httpx
import pytest
import time_machine
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.schedule.models import ConsumedSignature, Plan, PlanKind
from apps.schedule.selfcalls import (
    SelfCall,
    SignatureInvalid,
    SignatureReplayed,
    external_signature,
    self_call_verify,
    signature_consume,
)
from tests.concurrency import run_concurrently
from tests.factories.schedule import book_point
from tests.schedule.conftest import Received, Receiver
from tests.schedule.test_execution import fire

STOLEN = ("webhook-", "x-schedule-")


def _stolen(received: Received) -> dict[str, str]:
    return {k: v for k, v in received.headers.items() if k.lower().startswith(STOLEN)}


@pytest.fixture
def platform(live_server: Any, settings: Any) -> str:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    return str(live_server.url)


@pytest.fixture
def proxy(platform: str, start_receiver: Callable[..., Receiver], settings: Any) -> Receiver:
    """The platform's base URL points at this loopback server, which sees every self-call the
    executor makes (as a man in the middle would) before the test forwards it."""
    server = start_receiver("127.0.0.1")
    settings.SCHEDULE_WEBHOOK_BASE_URL = server.url
    return server


def _forward(platform: str, received: Received, **changes: Any) -> httpx.Response:
    request = {
        "method": received.method,
        "url": f"{platform}{received.path}",
        "headers": _stolen(received),
        "content": received.body,
        **changes,
    }
    return httpx.request(**request)


@pytest.mark.django_db(transaction=True)
def test_a_receiver_replaying_its_webhook_headers_to_the_platform_gets_401(
    user: User, receiver: Receiver, platform: str
) -> None:
    """The receiver replays its Standard Webhooks headers to list the owner's submissions
    while the plan is still running (the window the old check trusted)."""
    replies: list[httpx.Response] = []

    def replay(received: Received) -> None:
        # Same id, timestamp, signature and body: all the old check looked at.
        paths = ["/api/submissions/", "/api/me/", "/api/quotas/me/"]
        replies.extend(
            _forward(platform, received, method="GET", url=f"{platform}{path}") for path in paths
        )

    receiver.on_request = replay
    life = book_point(user, url=f"{receiver.url}/hook")
    assert fire(life.plans.get(kind=PlanKind.BIRTH)) == "done"
    assert [r.status_code for r in replies] == [HTTPStatus.UNAUTHORIZED] * 3
    for reply in replies:
        body = reply.json()
        assert body["success"] is False
        assert body["code"] == "authentication_failed"
    [delivered] = receiver.requests
    Webhook(django_settings.SCHEDULE_WEBHOOK_SECRET).verify(delivered.body, delivered.headers)
    assert ConsumedSignature.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_self_call_is_accepted_once_and_only_for_its_own_request(
    user: User, proxy: Receiver, platform: str
) -> None:
    results: dict[str, int] = {}

    def man_in_the_middle(received: Received) -> None:
        other = f"{platform}/api/submissions/"
        results["other path"] = _forward(platform, received, url=other).status_code
        results["other method"] = _forward(platform, received, method="DELETE").status_code
        results["other body"] = _forward(platform, received, content=b'{"x": 1}').status_code
        query = f"{platform}{received.path}?as=admin"
        results["other query"] = _forward(platform, received, url=query).status_code
        results["delivered"] = _forward(platform, received).status_code
        results["replayed"] = _forward(platform, received).status_code

    proxy.on_request = man_in_the_middle
    life = book_point(user, url="/api/me/", method="POST")
    assert fire(life.plans.get(kind=PlanKind.BIRTH)) == "done"
    assert results == {
        "other path": HTTPStatus.UNAUTHORIZED,
        "other method": HTTPStatus.UNAUTHORIZED,
        "other body": HTTPStatus.UNAUTHORIZED,
        "other query": HTTPStatus.UNAUTHORIZED,
        # POST /api/me/ authenticates as the owner, then the view refuses the method.
        "delivered": HTTPStatus.METHOD_NOT_ALLOWED,
        "replayed": HTTPStatus.UNAUTHORIZED,
    }
    assert ConsumedSignature.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_threads_racing_one_self_call_signature_are_accepted_once(
    user: User, proxy: Receiver, platform: str
) -> None:
    statuses: list[int] = []

    def race(received: Received) -> None:
        outcomes = run_concurrently(lambda _: _forward(platform, received).status_code, 2)
        statuses.extend(outcome.value for outcome in outcomes)

    proxy.on_request = race
    life = book_point(user, url="/api/me/", method="GET")
    assert fire(life.plans.get(kind=PlanKind.BIRTH)) == "done"
    assert sorted(statuses) == [HTTPStatus.OK, HTTPStatus.UNAUTHORIZED]


def _call(plan: Plan, **changes: Any) -> SelfCall:
    fields: dict[str, Any] = {
        "msg_id": plan.webhook_id,
        "timestamp": int(timezone.now().timestamp()),
        "method": "GET",
        "target": "/api/me/",
        "body": b"",
        "life_uuid": plan.life.life_uuid,
        "plan_kind": plan.kind,
        "attempt": 1,
        **changes,
    }
    return SelfCall(**fields)


@pytest.mark.django_db(transaction=True)
def test_racing_consumers_of_one_signature_yield_exactly_one(user: User) -> None:
    plan = book_point(user, url="/api/me/").plans.get()
    signature = _call(plan).signature()

    def consume(_: int) -> str:
        signature_consume(plan=plan, attempt=1, signature=signature)
        return "accepted"

    outcomes = run_concurrently(consume, 8)
    assert sum(outcome.ok for outcome in outcomes) == 1
    assert all(isinstance(o.error, SignatureReplayed) for o in outcomes if not o.ok)
    assert ConsumedSignature.objects.count() == 1


@pytest.mark.django_db
def test_self_call_and_receiver_signatures_use_different_keys(user: User) -> None:
    plan = book_point(user, url="/api/me/").plans.get()
    call = _call(plan, body=b"{}")
    sent = dt.datetime.fromtimestamp(call.timestamp, tz=dt.UTC)
    external = external_signature(msg_id=call.msg_id, timestamp=sent, body="{}")
    with pytest.raises(SignatureInvalid):
        self_call_verify(call=call, signatures=external, now=timezone.now())
    headers = {
        "webhook-id": call.msg_id,
        "webhook-timestamp": str(call.timestamp),
        "webhook-signature": call.signature(),
    }
    with pytest.raises(WebhookVerificationError):
        Webhook(django_settings.SCHEDULE_WEBHOOK_SECRET).verify("{}", headers)
    assert self_call_verify(call=call, signatures=call.signature(), now=timezone.now())


@pytest.mark.django_db
def test_cleanup_deletes_used_signatures_once_they_cannot_match(user: User) -> None:
    plan = book_point(user, url="/api/me/").plans.get()
    signature_consume(plan=plan, attempt=1, signature=_call(plan).signature())
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=9)):
        call_command("cleanup", "--only", "schedule", stdout=io.StringIO())
    assert ConsumedSignature.objects.count() == 1
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=11)):
        out = io.StringIO()
        call_command("cleanup", "--only", "schedule", stdout=out)
    assert ConsumedSignature.objects.count() == 0
    assert "1 used self-call signature" in out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "headers",
    [
        {"webhook-timestamp": "9" * 40, "X-Schedule-Attempt": "1"},
        {"webhook-timestamp": "-99999999999999", "X-Schedule-Attempt": "1"},
        {"webhook-timestamp": "soon", "X-Schedule-Attempt": "1"},
        {"webhook-timestamp": "1", "X-Schedule-Attempt": "first"},
        {},
    ],
)
def test_malformed_self_call_headers_are_401_never_500(
    api_client: Any, headers: dict[str, str]
) -> None:
    sent = {
        "webhook-id": "msg_x",
        "webhook-signature": "v1,AAAA",
        "X-Schedule-Life-UUID": "0" * 32,
        "X-Schedule-Plan": "birth",
        **headers,
    }
    response = api_client.get("/api/me/", headers=sent)
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json()["code"] == "authentication_failed"
