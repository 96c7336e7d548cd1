"""The schedule API: booking, validation order and codes, idempotency, list, detail, PATCH,
DELETE (SPEC §6)."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.schedule.models import Life, LifeState, Plan, PlanState
from tests.schedule.conftest import action, at, point_body, term_body

pytestmark = pytest.mark.django_db
URL = "/api/schedules/"


def test_create_term_life_with_the_tutorial_wire_format(user_client: APIClient) -> None:
    body = term_body(resource_id="room-1", life_uuid="0f" * 16)
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    data = response.json()
    assert data["life_uuid"] == "0f" * 16
    assert data["state"] == "Inexistent"
    assert [p["kind"] for p in data["plans"]] == ["birth", "death"]
    assert {p["state"] for p in data["plans"]} == {"Standby"}
    assert data["owner"]["username"] == "alice"
    assert data["birth_time"].endswith("Z") or "+00:00" in data["birth_time"]


def test_create_point_life_with_the_flat_names_and_a_generated_uuid(
    user_client: APIClient,
) -> None:
    body = {"schedule_type": "point", "birth_time": at(30), "birth_action": action()}
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.CREATED
    assert len(response.json()["life_uuid"]) == 32
    assert [p["kind"] for p in response.json()["plans"]] == ["birth"]


def test_iso_8601_times_with_an_offset_are_accepted(user_client: APIClient) -> None:
    when = (timezone.now() + dt.timedelta(hours=2)).astimezone(dt.timezone(dt.timedelta(hours=9)))
    body = {"schedule_type": "point", "birth_time": when.isoformat(), "birth_action": action()}
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.CREATED
    stored = Life.objects.get(life_uuid=response.json()["life_uuid"]).birth_time
    assert abs((stored - when).total_seconds()) < 1


def test_naive_times_are_read_in_schedule_timezone(user_client: APIClient, settings: Any) -> None:
    settings.SCHEDULE_TIMEZONE = "Asia/Tokyo"
    local = (timezone.now() + dt.timedelta(hours=3)).astimezone(dt.timezone(dt.timedelta(hours=9)))
    body = point_body(when=local.strftime("%Y-%m-%d %H:%M:%S"))
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.CREATED
    stored = Life.objects.get(life_uuid=response.json()["life_uuid"]).birth_time
    assert abs((stored - local).total_seconds()) < 1


def test_reposting_the_same_life_uuid_and_body_returns_it(user_client: APIClient) -> None:
    body = point_body(life_uuid="ab" * 16)
    first = user_client.post(URL, body, format="json")
    again = user_client.post(URL, body, format="json")
    assert first.status_code == HTTPStatus.CREATED
    assert again.status_code == HTTPStatus.OK
    assert again.json()["life_uuid"] == first.json()["life_uuid"]
    assert Life.objects.count() == 1


def test_reposting_a_life_uuid_with_another_body_is_life_exists(user_client: APIClient) -> None:
    user_client.post(URL, point_body(life_uuid="ab" * 16), format="json")
    response = user_client.post(URL, point_body(life_uuid="ab" * 16, when=at(90)), format="json")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "life_exists"


def test_another_users_life_uuid_is_life_exists(
    user_client: APIClient, other_client: APIClient
) -> None:
    body = point_body(life_uuid="cd" * 16)
    user_client.post(URL, body, format="json")
    response = other_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "life_exists"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**point_body(), "schedule_type": "forever"}, "schedule_type"),
        ({"schedule_type": "point", "birth": action()}, "birth_time"),
        ({"schedule_type": "point", "term": {"birth_time": "2030-01-01 10:00:00"}}, "birth_action"),
        ({**point_body(), "term": {"birth_time": "15/12/2030 10:00"}}, "birth_time"),
        ({**point_body(), "term": {"birth_time": "2030-12-15T10:00:00"}}, "birth_time"),
        ({k: v for k, v in term_body().items() if k != "death"}, "death_action"),
        ({**point_body(), "birth": {"path": "/x"}}, "birth"),
        ({**point_body(), "birth": action("http://10.0.0.5/hook")}, "birth_action"),
        ({**point_body(), "birth": action("http://169.254.169.254/latest")}, "birth_action"),
        ({**point_body(), "birth": action("http://user:pw@example.com/")}, "birth_action"),
        ({**point_body(), "birth": action("ftp://example.com/")}, "birth_action"),
        ({**point_body(), "birth": action("/x", body={"a": "nul\x00"})}, "birth_action"),
        ({**point_body(), "resource_id": "r\x00"}, "resource_id"),
        ({**point_body(), "life_uuid": "not-a-uuid"}, "life_uuid"),
    ],
)
def test_bad_bookings_are_invalid_schedule(
    user_client: APIClient, body: dict[str, Any], field: str
) -> None:
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    assert response.json()["code"] == "invalid_schedule"
    assert field in response.json()["fields"]
    assert Life.objects.count() == 0


def test_term_with_birth_after_death_is_invalid(user_client: APIClient) -> None:
    response = user_client.post(URL, term_body(birth=at(120), death=at(60)), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"
    assert "death_time" in response.json()["fields"]


def test_term_shorter_than_minimum_life_term_is_invalid(user_client: APIClient) -> None:
    response = user_client.post(URL, term_body(birth=at(60), death=at(62)), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"


def test_birth_within_the_guard_time_is_too_late(user_client: APIClient) -> None:
    response = user_client.post(URL, point_body(when=at(0, seconds=20)), format="json")
    assert response.status_code == HTTPStatus.NOT_ACCEPTABLE
    assert response.json()["code"] == "too_late"


def test_a_past_time_is_too_late(user_client: APIClient) -> None:
    response = user_client.post(URL, point_body(when=at(-60)), format="json")
    assert response.status_code == HTTPStatus.NOT_ACCEPTABLE
    assert response.json()["code"] == "too_late"


def test_invalid_schedule_comes_before_too_late(user_client: APIClient) -> None:
    body = {**point_body(when=at(-60)), "birth": {"path": "/x"}}
    response = user_client.post(URL, body, format="json")
    assert response.json()["code"] == "invalid_schedule"


def test_overlapping_life_on_one_resource_is_a_conflict(user_client: APIClient) -> None:
    first = user_client.post(URL, term_body(resource_id="gpu-1"), format="json")
    assert first.status_code == HTTPStatus.CREATED
    # A point 90 minutes after the term's death: inside the 60-minute guard of the death.
    second = user_client.post(URL, point_body(when=at(170), resource_id="gpu-1"), format="json")
    assert second.status_code == HTTPStatus.CONFLICT
    assert second.json()["code"] == "resource_conflict"
    far = user_client.post(URL, point_body(when=at(200), resource_id="gpu-1"), format="json")
    assert far.status_code == HTTPStatus.CREATED
    other = user_client.post(URL, point_body(when=at(90), resource_id="gpu-2"), format="json")
    assert other.status_code == HTTPStatus.CREATED


def test_too_late_comes_before_resource_conflict(user_client: APIClient) -> None:
    user_client.post(URL, point_body(when=at(60), resource_id="gpu-1"), format="json")
    response = user_client.post(URL, point_body(when=at(-1), resource_id="gpu-1"), format="json")
    assert response.json()["code"] == "too_late"


def test_a_cancelled_life_frees_its_resource(user_client: APIClient) -> None:
    first = user_client.post(URL, point_body(resource_id="gpu-1"), format="json").json()
    user_client.delete(f"{URL}{first['life_uuid']}/")
    again = user_client.post(URL, point_body(resource_id="gpu-1"), format="json")
    assert again.status_code == HTTPStatus.CREATED


def test_list_shows_only_own_lives_and_filters(
    user_client: APIClient, other_client: APIClient
) -> None:
    user_client.post(URL, point_body(resource_id="a"), format="json")
    user_client.post(URL, term_body(resource_id="b"), format="json")
    other_client.post(URL, point_body(resource_id="c"), format="json")
    assert len(user_client.get(URL).json()) == 2
    assert [x["resource_id"] for x in user_client.get(URL, {"resource_id": "b"}).json()] == ["b"]
    assert [
        x["schedule_type"] for x in user_client.get(URL, {"schedule_type": "point"}).json()
    ] == ["point"]
    assert len(user_client.get(URL, {"state": "Inexistent"}).json()) == 2
    assert user_client.get(URL, {"state": "Dead"}).json() == []
    bad = user_client.get(URL, {"state": "dead"})
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json()["code"] == "invalid_schedule"


def test_detail_of_another_users_life_is_forbidden(
    user_client: APIClient, other_client: APIClient
) -> None:
    uuid = user_client.post(URL, point_body(), format="json").json()["life_uuid"]
    response = other_client.get(f"{URL}{uuid}/")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert "plans" not in response.json()


def test_unknown_life_is_not_found(user_client: APIClient) -> None:
    response = user_client.get(f"{URL}{'0' * 32}/")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_anonymous_is_unauthorized(api_client: APIClient) -> None:
    response = api_client.post(URL, point_body(), format="json")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_patch_moves_times_and_rearms_plans(user_client: APIClient) -> None:
    uuid = user_client.post(URL, term_body(), format="json").json()["life_uuid"]
    Plan.objects.filter(life__life_uuid=uuid, kind="birth").update(
        state=PlanState.PRESET, arm_token="t" * 32, lease_owner="w1"
    )
    response = user_client.patch(
        f"{URL}{uuid}/", {"term": {"birth_time": at(30), "death_time": at(45)}}, format="json"
    )
    assert response.status_code == HTTPStatus.OK, response.json()
    birth = Plan.objects.get(life__life_uuid=uuid, kind="birth")
    assert birth.state == PlanState.STANDBY
    assert birth.arm_token == ""
    assert abs((birth.due_at - timezone.now()).total_seconds() - 1800) < 5


def test_patch_revalidates_excluding_itself(user_client: APIClient) -> None:
    uuid = user_client.post(URL, point_body(when=at(60), resource_id="r"), format="json").json()[
        "life_uuid"
    ]
    user_client.post(URL, point_body(when=at(300), resource_id="r"), format="json")
    ok = user_client.patch(f"{URL}{uuid}/", {"birth_time": at(70)}, format="json")
    assert ok.status_code == HTTPStatus.OK
    clash = user_client.patch(f"{URL}{uuid}/", {"birth_time": at(280)}, format="json")
    assert clash.status_code == HTTPStatus.CONFLICT
    assert clash.json()["code"] == "resource_conflict"
    late = user_client.patch(f"{URL}{uuid}/", {"birth_time": at(0, seconds=10)}, format="json")
    assert late.status_code == HTTPStatus.NOT_ACCEPTABLE
    assert late.json()["code"] == "too_late"
    bad = user_client.patch(f"{URL}{uuid}/", {"birth_time": "soon"}, format="json")
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json()["code"] == "invalid_schedule"
    other = user_client.patch(f"{URL}{uuid}/", {"resource_id": "s"}, format="json")
    assert other.status_code == HTTPStatus.BAD_REQUEST


def test_patch_refuses_every_field_it_cannot_change_and_changes_nothing(
    user_client: APIClient, other_user: Any
) -> None:
    uuid = user_client.post(URL, point_body(when=at(60)), format="json").json()["life_uuid"]
    before = Life.objects.get(life_uuid=uuid)
    sneaky = {"birth_time": at(90), "owner": other_user.pk, "state": "Dead", "resource_id": "r"}
    response = user_client.patch(f"{URL}{uuid}/", sneaky, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["code"] == "invalid_schedule"
    assert set(body["fields"]) == {"owner", "state", "resource_id"}
    after = Life.objects.get(life_uuid=uuid)
    assert (after.owner_id, after.state, after.resource_id, after.birth_time) == (
        before.owner_id,
        before.state,
        before.resource_id,
        before.birth_time,
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"birth": "GET /api/me/"}, "birth"),
        ({"birth_action": {"path": "/api/me/", "method": "BREW"}}, "birth_action"),
        ({"term": {"birth_time": ["2030-01-01"]}}, "term"),
        (
            {"birth_action": {"path": "/api/me/", "method": "GET", "retry_count": 10**6}},
            "birth_action",
        ),
    ],
)
def test_patch_validates_every_field_it_takes(
    user_client: APIClient, change: dict[str, Any], field: str
) -> None:
    uuid = user_client.post(URL, point_body(when=at(60)), format="json").json()["life_uuid"]
    before = Plan.objects.get(life__life_uuid=uuid)
    response = user_client.patch(f"{URL}{uuid}/", change, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"
    assert field in response.json()["fields"]
    after = Plan.objects.get(life__life_uuid=uuid)
    assert (after.action, after.time) == (before.action, before.time)


def test_patch_of_a_started_plan_is_refused(user_client: APIClient) -> None:
    uuid = user_client.post(URL, term_body(), format="json").json()["life_uuid"]
    Plan.objects.filter(life__life_uuid=uuid, kind="birth").update(state=PlanState.DONE)
    Life.objects.filter(life_uuid=uuid).update(state=LifeState.ALIVE)
    response = user_client.patch(f"{URL}{uuid}/", {"birth_time": at(30)}, format="json")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "plan_started"
    death = user_client.patch(f"{URL}{uuid}/", {"death_time": at(200)}, format="json")
    assert death.status_code == HTTPStatus.OK


def test_delete_before_birth_is_stillbirth_and_stays_readable(user_client: APIClient) -> None:
    uuid = user_client.post(URL, term_body(), format="json").json()["life_uuid"]
    response = user_client.delete(f"{URL}{uuid}/")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["state"] == "Stillbirth"
    assert {p["state"] for p in response.json()["plans"]} == {"Cancelled"}
    assert user_client.get(f"{URL}{uuid}/").json()["state"] == "Stillbirth"
    again = user_client.delete(f"{URL}{uuid}/")
    assert again.status_code == HTTPStatus.OK


def test_delete_of_a_dead_life_is_invalid_transition(user_client: APIClient) -> None:
    uuid = user_client.post(URL, point_body(), format="json").json()["life_uuid"]
    Life.objects.filter(life_uuid=uuid).update(state=LifeState.DEAD)
    response = user_client.delete(f"{URL}{uuid}/")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"


def test_delete_while_birth_runs_is_plan_started(user_client: APIClient) -> None:
    uuid = user_client.post(URL, point_body(), format="json").json()["life_uuid"]
    Plan.objects.filter(life__life_uuid=uuid).update(state=PlanState.RUNNING)
    response = user_client.delete(f"{URL}{uuid}/")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "plan_started"


def test_delete_of_another_users_life_is_forbidden(
    user_client: APIClient, other_client: APIClient
) -> None:
    uuid = user_client.post(URL, point_body(), format="json").json()["life_uuid"]
    assert other_client.delete(f"{URL}{uuid}/").status_code == HTTPStatus.FORBIDDEN
    assert Life.objects.get(life_uuid=uuid).state == LifeState.INEXISTENT


@pytest.mark.parametrize(
    ("birth", "death"),
    [
        ("9999-12-31 23:59:59", None),
        ("9999-12-31T23:59:59-14:00", None),
        ("0001-01-01 00:00:00", None),
        (None, "9999-12-31T23:59:59-14:00"),
    ],
)
def test_a_time_at_the_edge_of_the_calendar_is_a_400_never_a_500(
    user_client: APIClient, birth: str | None, death: str | None
) -> None:
    # The guard band around the Life and time-zone arithmetic overflowed `datetime` (a 500).
    body = term_body(birth=birth, death=death) if death else point_body(when=birth)
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_schedule"
    assert not Life.objects.exists()


def test_a_far_but_representable_time_is_booked(user_client: APIClient) -> None:
    response = user_client.post(URL, point_body(when="9998-06-01 00:00:00"), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
