"""Header booking and the platform's own webhook authentication, over real HTTP (live_server):
the replay runs as the Life's owner with the owner's permissions checked then."""

from __future__ import annotations

import datetime as dt
import json
from http import HTTPStatus
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.quotas.models import Reservation
from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.selfcalls import SelfCall, self_call_headers
from tests.schedule.conftest import at

RESERVATIONS = "/api/quotas/reservations/"


def fire(life_uuid: str) -> Plan:
    plan = Plan.objects.get(life__life_uuid=life_uuid, kind="birth")
    [armed] = plan_claim(owner="test", now=plan.due_at)
    plan_execute(plan_id=plan.pk, token=armed.token)
    plan.refresh_from_db()
    return plan


@pytest.fixture
def platform(live_server: Any, settings: Any) -> str:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    return str(live_server.url)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("q_sync")
def test_a_scheduled_request_is_replayed_as_its_owner(
    user: User, user_client: APIClient, platform: str
) -> None:
    body = {"ttl_seconds": 120}
    response = user_client.post(
        f"{RESERVATIONS}?source=header", body, format="json", HTTP_X_SCHEDULE_DATETIME=at(30)
    )
    assert response.status_code == HTTPStatus.ACCEPTED
    life_uuid = response.json()["life_uuid"]
    assert Reservation.objects.count() == 0
    plan = fire(life_uuid)
    assert plan.state == PlanState.DONE
    attempt = plan.attempts.get()
    assert attempt.status_code == HTTPStatus.CREATED
    reservation = Reservation.objects.get()
    assert reservation.user == user
    assert json.loads(attempt.response_excerpt)["reservation_id"] == reservation.pk
    assert Life.objects.get(life_uuid=life_uuid).state == LifeState.DEAD


@pytest.mark.django_db(transaction=True)
def test_the_xaas_header_books_a_get_and_records_its_response(
    user_client: APIClient, platform: str
) -> None:
    response = user_client.get("/api/me/", HTTP_X_XAAS_SCHEDULE_DATETIME=at(10))
    assert response.status_code == HTTPStatus.ACCEPTED
    plan = fire(response.json()["life_uuid"])
    attempt = plan.attempts.get()
    assert attempt.status_code == HTTPStatus.OK
    assert json.loads(attempt.response_excerpt)["username"] == "alice"


@pytest.mark.django_db(transaction=True)
def test_the_replay_has_only_its_owners_permissions(
    user_client: APIClient, other_client: APIClient, platform: str
) -> None:
    theirs = other_client.post(
        "/api/schedules/",
        {
            "schedule_type": "point",
            "birth_time": at(90),
            "birth_action": {"path": "/api/me/", "method": "GET"},
        },
        format="json",
    ).json()["life_uuid"]
    booked = user_client.delete(f"/api/quotas/me/?x={theirs}", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert booked.status_code == HTTPStatus.ACCEPTED
    response = user_client.get(f"/api/schedules/{theirs}/")
    assert response.status_code == HTTPStatus.FORBIDDEN
    plan = fire(booked.json()["life_uuid"])
    assert plan.attempts.get().status_code in {HTTPStatus.METHOD_NOT_ALLOWED, HTTPStatus.NOT_FOUND}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "status", "code"),
    [
        ("tomorrow", HTTPStatus.BAD_REQUEST, "invalid_schedule"),
        ("2001-01-01 00:00:00", HTTPStatus.NOT_ACCEPTABLE, "too_late"),
    ],
)
def test_bad_schedule_headers(user_client: APIClient, value: str, status: int, code: str) -> None:
    response = user_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=value)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert Life.objects.count() == 0


@pytest.mark.django_db
def test_a_bad_token_with_the_header_is_unauthorized(api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION="Bearer nope")
    response = api_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert Life.objects.count() == 0


@pytest.mark.django_db
def test_anonymous_requests_with_the_header_are_not_booked(api_client: APIClient) -> None:
    response = api_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert Life.objects.count() == 0


@pytest.mark.django_db
def test_schedules_endpoint_itself_ignores_the_header(user_client: APIClient) -> None:
    response = user_client.get("/api/schedules/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert response.status_code == HTTPStatus.OK
    assert Life.objects.count() == 0


@pytest.mark.django_db
def test_a_session_booking_needs_the_csrf_token(user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    body = json.dumps({"ttl_seconds": 60})
    forged = client.post(
        RESERVATIONS, body, content_type="application/json", HTTP_X_SCHEDULE_DATETIME=at(10)
    )
    assert forged.status_code == HTTPStatus.FORBIDDEN
    assert Life.objects.count() == 0
    client.get("/admin/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    ok = client.post(
        RESERVATIONS,
        body,
        content_type="application/json",
        HTTP_X_SCHEDULE_DATETIME=at(10),
        HTTP_X_CSRFTOKEN=token,
    )
    assert ok.status_code == HTTPStatus.ACCEPTED
    assert Life.objects.get().owner == user


def _signed(
    plan: Plan, *, method: str = "GET", target: str = "/api/me/", body: bytes = b"", **changes: Any
) -> dict[str, str]:
    """The headers the executor sends for `plan`'s current attempt (the real signer)."""
    fields: dict[str, Any] = {
        "msg_id": plan.webhook_id,
        "timestamp": int(timezone.now().timestamp()),
        "method": method,
        "target": target,
        "body": body,
        "life_uuid": plan.life.life_uuid,
        "plan_kind": plan.kind,
        "attempt": plan.attempts_count + 1,
        **changes,
    }
    return dict(self_call_headers(SelfCall(**fields)))


@pytest.mark.django_db(transaction=True)
def test_webhook_authentication_needs_a_running_plan_and_a_fresh_valid_signature(
    user_client: APIClient, platform: str
) -> None:
    life_uuid = user_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=at(10)).json()["life_uuid"]
    plan = Plan.objects.select_related("life").get(life__life_uuid=life_uuid)
    url = f"{platform}/api/me/"
    # Not executing: refused.
    assert httpx.get(url, headers=_signed(plan)).status_code == 401
    Plan.objects.filter(pk=plan.pk).update(state=PlanState.RUNNING)
    assert httpx.get(url, headers=_signed(plan)).status_code == 200
    forged = {**_signed(plan), "webhook-signature": "v1,AAAA"}
    assert httpx.get(url, headers=forged).status_code == 401
    old = int((timezone.now() - dt.timedelta(minutes=10)).timestamp())
    assert httpx.get(url, headers=_signed(plan, timestamp=old)).status_code == 401
    assert httpx.get(url, headers=_signed(plan, msg_id="msg_other")).status_code == 401
    assert httpx.get(url, headers=_signed(plan, attempt=2)).status_code == 401


@pytest.mark.django_db
def test_a_header_booking_whose_content_type_cannot_be_replayed_is_refused(
    user_client: APIClient,
) -> None:
    # gunicorn hands a header's non-ASCII bytes on as Latin-1 text; replayed, the HTTP client
    # could not send it (the plan stayed Running): refused at booking instead.
    response = user_client.post(
        RESERVATIONS,
        b"{}",
        content_type="application/json; note=caf\u00e9",
        headers={"X-Schedule-Datetime": at(60)},
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_schedule"
    assert not Life.objects.exists()


@pytest.mark.django_db
def test_header_booking_errors_are_the_one_error_body(
    user_client: APIClient, api_client: APIClient
) -> None:
    bad_time = user_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME="tomorrow").json()
    assert bad_time["success"] is False
    assert bad_time["code"] == "invalid_schedule"
    assert bad_time["error"]
    assert "X-Schedule-Datetime" in bad_time["fields"]
    api_client.credentials(HTTP_AUTHORIZATION="Bearer nope")
    bad_token = api_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert bad_token.status_code == HTTPStatus.UNAUTHORIZED
    assert bad_token.json()["success"] is False
    assert bad_token.json()["code"] == "authentication_failed"
    assert bad_token.headers["WWW-Authenticate"]


@pytest.mark.django_db
def test_an_oversized_scheduled_body_is_a_413(user_client: APIClient, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = user_client.post(
        RESERVATIONS, {"pad": "x" * 2000}, format="json", HTTP_X_SCHEDULE_DATETIME=at(10)
    )
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert response.json()["code"] == "request_too_large"
    assert not Life.objects.exists()


@pytest.mark.django_db
def test_an_anonymous_request_to_an_open_view_runs_now_unbooked(api_client: APIClient) -> None:
    response = api_client.get("/api/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert response.status_code == HTTPStatus.OK
    assert "life_uuid" not in response.json()
    assert not Life.objects.exists()
