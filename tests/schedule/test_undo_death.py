"""The death that undoes its birth's grant (`quota.restore` after `quota.boost`) runs even once
the booking token is gone, so it must be exactly that call. An action header `X-Schedule-Datetime`
turned the self-call into a new booking: the death answered 202, booked a Life a year away and
the boost never ended. Played over real HTTP (live_server), SQLite and PostgreSQL."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.quotas.models import QuotaPolicy
from apps.schedule.models import Life, Plan, PlanState
from tests.schedule.conftest import at
from tests.schedule.test_booking_tokens import TASKS, book_term, fire, token_client

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = {"concurrent": 2}
BOOST = {"path": TASKS, "method": "POST", "body": {"topic": "quota.boost", "content": CONTENT}}
RESTORE = {**BOOST, "body": {"topic": "quota.restore", "content": CONTENT}}
NAMES = ["X-Schedule-Datetime", "x-xaas-schedule-datetime", "X_Schedule_Datetime"]


@pytest.fixture
def platform(live_server: Any, settings: Any) -> str:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    return str(live_server.url)


@pytest.mark.parametrize("name", NAMES)
def test_an_action_carrying_a_booking_header_is_refused_at_booking(
    staff_user: User, name: str
) -> None:
    client, _ = token_client(staff_user, scopes=["read", "submit", "admin"])
    body = {
        "schedule_type": "term",
        "birth_time": at(30),
        "death_time": at(90),
        "birth_action": BOOST,
        "death_action": {**RESTORE, "headers": {name: at(60 * 24 * 365)}},
    }
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_schedule"
    assert not Life.objects.exists()


@pytest.mark.usefixtures("platform", "q_sync")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("revoked", [False, True])
def test_a_stored_undoing_death_with_a_booking_header_still_undoes_the_grant(
    staff_user: User, name: str, revoked: bool
) -> None:
    """A row stored before the booking check: the header is not sent and the boost ends, with
    the booking token alive or revoked."""
    client, token_id = token_client(staff_user, scopes=["read", "submit", "admin"])
    life_uuid = book_term(client, BOOST, RESTORE)
    stored = {**RESTORE, "headers": {name: at(60 * 24 * 365)}}
    Life.objects.filter(life_uuid=life_uuid).update(death_action=stored)
    Plan.objects.filter(life__life_uuid=life_uuid, kind="death").update(action=stored)
    assert fire(life_uuid).state == PlanState.DONE
    assert QuotaPolicy.objects.get(user=staff_user).concurrent_boost == 2
    if revoked:
        client.delete(f"/api/tokens/{token_id}/")
    death = fire(life_uuid, kind="death")
    assert death.state == PlanState.DONE
    assert death.attempts.get().status_code == HTTPStatus.ACCEPTED
    assert Life.objects.count() == 1  # the death booked nothing
    assert QuotaPolicy.objects.get(user=staff_user).concurrent_boost == 0


@pytest.mark.usefixtures("platform", "q_sync")
@pytest.mark.parametrize(
    "death",
    [
        {**RESTORE, "headers": {"Content-Type": "text/plain"}},
        {**RESTORE, "headers": {"content-type": "application/x-www-form-urlencoded"}},
        {**RESTORE, "body": '{"topic": "quota.restore", "content": {"concurrent": 2}}'},
        {
            **RESTORE,
            "body": '{"topic": "quota.restore", "content": {"concurrent": 2}}',
            "headers": {"Content-Type": "text/plain"},
        },
        {**RESTORE, "headers": {"Authorization": "Bearer not-a-token"}},
        {**RESTORE, "headers": {"Content-Encoding": "gzip", "Cookie": "sessionid=x"}},
    ],
)
def test_the_undoing_death_cannot_be_sent_in_a_form_the_endpoint_refuses(
    staff_user: User, death: dict[str, Any]
) -> None:
    """The pairing check reads the death's body as JSON; sent as text, as a form, with a
    made-up `Authorization` (tried before the signature), the endpoint refused it (415, 400,
    401) and the death retried for ever: the boost never ended."""
    client, _ = token_client(staff_user, scopes=["read", "submit", "admin"])
    body = {
        "schedule_type": "term",
        "birth_time": at(30),
        "death_time": at(90),
        "birth_action": BOOST,
        "death_action": death,
    }
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    life_uuid = str(response.json()["life_uuid"])
    assert fire(life_uuid).state == PlanState.DONE
    assert fire(life_uuid, kind="death").state == PlanState.DONE
    assert QuotaPolicy.objects.get(user=staff_user).concurrent_boost == 0
