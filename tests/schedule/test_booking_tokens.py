"""A booking made with an API token acts only while that token lives: once the token is revoked
or has expired, the Life's birth is refused at replay (the executor does not send it, and the
platform's door refuses the self-call), so the booked request never runs. Played over real HTTP
(live_server) through the real claim and execution path, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import httpx
import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.services import token_create
from apps.quotas.models import QuotaPolicy, Reservation
from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.selfcalls import SelfCall, self_call_headers
from tests.schedule.conftest import Receiver, at

RESERVATIONS = "/api/quotas/reservations/"
TASKS = "/api/schedule/tasks/"
GONE = "the API token that booked this Life was revoked or has expired"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def platform(live_server: Any, settings: Any) -> str:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    return str(live_server.url)


def token_client(user: User, **options: Any) -> tuple[APIClient, str]:
    """A client sending a fresh token of `user` (every scope it may hold), and the token's id."""
    created = token_create(user=user, name=f"t-{timezone.now().timestamp()}", **options)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {created.token}")
    return client, str(created.api_token.pk)


def fire(life_uuid: str, kind: str = "birth") -> Plan:
    """Claim and execute the plan the way the watcher and a worker do, at its due time."""
    plan = Plan.objects.get(life__life_uuid=life_uuid, kind=kind)
    [armed] = plan_claim(owner="test", now=plan.due_at)
    plan_execute(plan_id=plan.pk, token=armed.token)
    plan.refresh_from_db()
    return plan


def book_reservation(client: APIClient, minutes: float = 30) -> str:
    response = client.post(
        RESERVATIONS, {"ttl_seconds": 120}, format="json", HTTP_X_SCHEDULE_DATETIME=at(minutes)
    )
    assert response.status_code == HTTPStatus.ACCEPTED, response.content
    return str(response.json()["life_uuid"])


def assert_refused(plan: Plan) -> None:
    assert plan.state == PlanState.FAILED
    attempt = plan.attempts.get()
    assert attempt.status_code is None
    assert GONE in attempt.error
    assert Life.objects.get(pk=plan.life_id).state == LifeState.STILLBIRTH


@pytest.mark.usefixtures("platform")
def test_a_header_booking_whose_token_was_revoked_never_runs(user: User) -> None:
    client, token_id = token_client(user)
    life_uuid = book_reservation(client)
    assert Life.objects.get(life_uuid=life_uuid).booking_token_id == token_id
    # The owner revokes the (say, leaked) token through the API, with another credential.
    owner, _ = token_client(user)
    assert owner.delete(f"/api/tokens/{token_id}/").status_code == HTTPStatus.NO_CONTENT
    plan = fire(life_uuid)
    assert_refused(plan)
    assert not Reservation.objects.exists()


@pytest.mark.usefixtures("platform")
def test_a_header_booking_whose_token_expired_never_runs(user: User) -> None:
    client, _ = token_client(user, expires_at=timezone.now() + dt.timedelta(minutes=10))
    life_uuid = book_reservation(client, minutes=30)
    due = Plan.objects.get(life__life_uuid=life_uuid).due_at
    with time_machine.travel(due + dt.timedelta(seconds=1), tick=True):
        plan = fire(life_uuid)
    assert_refused(plan)
    assert not Reservation.objects.exists()


@pytest.mark.usefixtures("platform")
def test_a_life_booked_with_a_revoked_token_never_runs_its_birth(user: User) -> None:
    client, token_id = token_client(user)
    body = {
        "schedule_type": "point",
        "birth_time": at(30),
        "birth_action": {"path": RESERVATIONS, "method": "POST", "body": {"ttl_seconds": 60}},
    }
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    life_uuid = response.json()["life_uuid"]
    assert client.delete(f"/api/tokens/{token_id}/").status_code == HTTPStatus.NO_CONTENT
    assert_refused(fire(life_uuid))
    assert not Reservation.objects.exists()


def test_the_platform_refuses_a_signed_self_call_once_the_booking_token_is_revoked(
    user: User, platform: str
) -> None:
    """The token is revoked after the executor's check, while the request is on its way: the
    platform's own door refuses the correctly signed self-call."""
    client, token_id = token_client(user)
    life_uuid = book_reservation(client)
    plan = Plan.objects.select_related("life").get(life__life_uuid=life_uuid)
    Plan.objects.filter(pk=plan.pk).update(state=PlanState.RUNNING)
    client.delete(f"/api/tokens/{token_id}/")
    call = SelfCall(
        msg_id=plan.webhook_id,
        timestamp=int(timezone.now().timestamp()),
        method="POST",
        target=RESERVATIONS,
        body=b'{"ttl_seconds":120}',
        life_uuid=life_uuid,
        plan_kind="birth",
        attempt=1,
    )
    headers = {**dict(self_call_headers(call)), "Content-Type": "application/json"}
    response = httpx.post(f"{platform}{RESERVATIONS}", content=call.body, headers=headers)
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert GONE in response.json()["error"]
    assert not Reservation.objects.exists()


@pytest.mark.usefixtures("platform")
def test_a_booking_with_a_live_token_runs(user: User) -> None:
    client, _ = token_client(user, expires_at=timezone.now() + dt.timedelta(hours=2))
    life_uuid = book_reservation(client)
    plan = fire(life_uuid)
    assert plan.state == PlanState.DONE
    assert plan.attempts.get().status_code == HTTPStatus.CREATED
    assert Reservation.objects.get().user == user


@pytest.mark.usefixtures("platform")
def test_a_session_booking_carries_no_token_and_runs(user: User) -> None:
    client = APIClient()
    client.force_login(user)
    life_uuid = book_reservation(client)
    assert Life.objects.get(life_uuid=life_uuid).booking_token_id is None
    assert fire(life_uuid).state == PlanState.DONE
    assert Reservation.objects.get().user == user


@pytest.mark.usefixtures("platform")
def test_a_life_booked_by_a_life_stays_bound_to_the_first_token(user: User) -> None:
    """A token cannot launder its authority through a Life whose action books another Life."""
    client, token_id = token_client(user)
    inner = {"path": RESERVATIONS, "method": "POST", "body": {"ttl_seconds": 60}}
    outer_body = {"schedule_type": "point", "birth_time": at(60), "birth_action": inner}
    outer = {"path": "/api/schedules/", "method": "POST", "body": outer_body}
    body = {"schedule_type": "point", "birth_time": at(30), "birth_action": outer}
    first = client.post("/api/schedules/", body, format="json").json()["life_uuid"]
    assert fire(first).state == PlanState.DONE
    second = Life.objects.exclude(life_uuid=first).get()
    assert second.booking_token_id == token_id
    client.delete(f"/api/tokens/{token_id}/")
    assert_refused(fire(second.life_uuid))
    assert not Reservation.objects.exists()


def book_term(client: APIClient, birth: dict[str, Any], death: dict[str, Any]) -> str:
    body = {
        "schedule_type": "term",
        "birth_time": at(30),
        "death_time": at(90),
        "birth_action": birth,
        "death_action": death,
    }
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    return str(response.json()["life_uuid"])


@pytest.mark.usefixtures("platform")
def test_a_born_term_lifes_own_death_is_refused_once_its_token_is_revoked(user: User) -> None:
    """A leaked token books a Life born now whose death, weeks later, acts as the owner: the
    owner revokes the token, and the death never runs."""
    client, token_id = token_client(user)
    reservation = client.post(RESERVATIONS, {"ttl_seconds": 3600}, format="json").json()
    release = {"path": f"{RESERVATIONS}{reservation['reservation_id']}/release/", "method": "POST"}
    life_uuid = book_term(client, {"path": "/api/me/", "method": "GET"}, release)
    assert fire(life_uuid).state == PlanState.DONE
    client.delete(f"/api/tokens/{token_id}/")
    death = fire(life_uuid, kind="death")
    assert death.state == PlanState.FAILED
    assert death.attempts.get().status_code is None
    assert GONE in death.attempts.get().error
    assert Life.objects.get(life_uuid=life_uuid).state == LifeState.DEAD
    assert Reservation.objects.get(pk=reservation["reservation_id"]).released_at is None


@pytest.mark.usefixtures("platform", "q_sync")
def test_the_death_that_undoes_its_birth_still_runs_after_the_token_is_revoked(
    staff_user: User,
) -> None:
    """A grant made under a live token always ends: `quota.restore` after `quota.boost`."""
    client, token_id = token_client(staff_user, scopes=["read", "submit", "admin"])
    content = {"concurrent": 2}
    boost = {"path": TASKS, "method": "POST", "body": {"topic": "quota.boost", "content": content}}
    restore = {**boost, "body": {"topic": "quota.restore", "content": content}}
    life_uuid = book_term(client, boost, restore)
    assert fire(life_uuid).state == PlanState.DONE
    assert QuotaPolicy.objects.get(user=staff_user).concurrent_boost == 2
    client.delete(f"/api/tokens/{token_id}/")
    death = fire(life_uuid, kind="death")
    assert death.state == PlanState.DONE
    assert death.attempts.get().status_code == HTTPStatus.ACCEPTED
    assert QuotaPolicy.objects.get(user=staff_user).concurrent_boost == 0


def test_an_external_webhook_booked_with_a_revoked_token_is_never_sent(
    user: User, receiver: Receiver
) -> None:
    """The platform's signature on a call to a receiver speaks for the owner too: a booking
    whose token is gone sends nothing anywhere."""
    client, token_id = token_client(user)
    action = {"path": f"http://{receiver.host}/hook", "method": "POST", "body": {"x": 1}}
    response = client.post(
        "/api/schedules/",
        {"schedule_type": "point", "birth_time": at(30), "birth_action": action},
        format="json",
    )
    assert response.status_code == HTTPStatus.CREATED, response.content
    client.delete(f"/api/tokens/{token_id}/")
    assert_refused(fire(response.json()["life_uuid"]))
    assert receiver.requests == []


def test_a_change_binds_the_life_to_the_credential_that_made_it(user: User) -> None:
    """A PATCH re-authorises the Life: made with a token, the Life lives and dies with that
    token; made by the owner's session, it carries no token any more."""
    first, first_id = token_client(user)
    second, second_id = token_client(user)
    body = {
        "schedule_type": "point",
        "birth_time": at(30),
        "birth_action": {"path": "/api/me/", "method": "GET"},
    }
    life_uuid = first.post("/api/schedules/", body, format="json").json()["life_uuid"]
    assert Life.objects.get(life_uuid=life_uuid).booking_token_id == first_id
    url = f"/api/schedules/{life_uuid}/"
    assert second.patch(url, {"birth_time": at(40)}, format="json").status_code == HTTPStatus.OK
    assert Life.objects.get(life_uuid=life_uuid).booking_token_id == second_id
    session = APIClient()
    session.force_login(user)
    assert session.patch(url, {"birth_time": at(50)}, format="json").status_code == HTTPStatus.OK
    assert Life.objects.get(life_uuid=life_uuid).booking_token_id is None
