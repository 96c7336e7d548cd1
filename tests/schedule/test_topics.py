"""Task topics declare who may call them: quota.boost / quota.restore are staff-only, bounded
by QUOTA_MAX_BOOST, and a boost must be booked with its restore. Played by a plain user who
tries every door: the task API, a booked Life, a header booking, a Life that fires after its
owner lost the right."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.quotas.models import QuotaPolicy
from apps.schedule.models import Life, LifeState, PlanKind, PlanState, TaskRun
from tests.schedule.conftest import at
from tests.schedule.test_execution import fire

pytestmark = pytest.mark.django_db
TASKS = "/api/schedule/tasks/"
SCHEDULES = "/api/schedules/"


def _task(topic: str, concurrent: int = 1) -> dict[str, Any]:
    return {"topic": topic, "content": {"concurrent": concurrent}}


def _call(body: dict[str, Any]) -> dict[str, Any]:
    return {"path": TASKS, "method": "POST", "body": body}


def _boost_term(concurrent: int = 2, restore: int | None = None) -> dict[str, Any]:
    return {
        "schedule_type": "term",
        "term": {"birth_time": at(60), "death_time": at(120)},
        "birth": _call(_task("quota.boost", concurrent)),
        "death": _call(_task("quota.restore", concurrent if restore is None else restore)),
    }


def _limit(client: APIClient) -> int:
    return int(client.get("/api/quotas/me/").json()["max_concurrent_jobs"])


@pytest.mark.usefixtures("q_sync")
def test_a_plain_user_cannot_boost_their_own_quota(
    user_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = user_client.post(TASKS, _task("quota.boost", 1000), format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    body = response.json()
    assert (body["success"], body["code"]) == (False, "permission_denied")
    assert _limit(user_client) == 5
    assert TaskRun.objects.count() == 0


def test_a_plain_user_cannot_restore_either(user_client: APIClient) -> None:
    response = user_client.post(TASKS, _task("quota.restore"), format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"


def test_an_unknown_topic_is_400_with_the_error_body(staff_client: APIClient) -> None:
    response = staff_client.post(TASKS, {"topic": "quota.grant", "content": {}}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert (body["success"], body["code"]) == (False, "unknown_topic")
    assert "quota.boost" in body["error"]
    assert "topic" in body["fields"]


@pytest.mark.parametrize("concurrent", [0, 101, 1000])
def test_a_boost_outside_quota_max_boost_is_refused(
    staff_client: APIClient, concurrent: int
) -> None:
    response = staff_client.post(TASKS, _task("quota.boost", concurrent), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "content.concurrent" in response.json()["fields"]
    assert TaskRun.objects.count() == 0


@pytest.mark.usefixtures("q_sync")
def test_staff_boosts_are_bounded_in_total_and_never_lift_a_limit_of_zero(
    staff_user: User,
    staff_client: APIClient,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.QUOTA_MAX_BOOST = 10
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            response = staff_client.post(TASKS, _task("quota.boost", 8), format="json")
        assert response.status_code == HTTPStatus.ACCEPTED
    assert _limit(staff_client) == 5 + 10
    QuotaPolicy.objects.filter(user=staff_user).update(max_concurrent_jobs=0)
    assert _limit(staff_client) == 0


def test_a_plain_user_cannot_book_a_life_that_boosts(user_client: APIClient) -> None:
    response = user_client.post(SCHEDULES, _boost_term(), format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert Life.objects.count() == 0


def test_a_plain_user_cannot_book_a_boost_through_the_header(user_client: APIClient) -> None:
    response = user_client.post(
        TASKS, _task("quota.boost", 3), format="json", HTTP_X_SCHEDULE_DATETIME=at(10)
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert Life.objects.count() == 0


def test_a_plain_user_cannot_hide_the_boost_in_a_text_body(user_client: APIClient) -> None:
    body = {
        "schedule_type": "term",
        "term": {"birth_time": at(60), "death_time": at(120)},
        "birth": _call(_task("quota.boost")) | {"body": json.dumps(_task("quota.boost"))},
        "death": _call(_task("quota.restore")) | {"body": json.dumps(_task("quota.restore"))},
    }
    response = user_client.post(SCHEDULES, body, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert Life.objects.count() == 0


def test_staff_books_a_boost_only_paired_with_its_restore(staff_client: APIClient) -> None:
    assert staff_client.post(SCHEDULES, _boost_term(2), format="json").status_code == 201
    point = {
        "schedule_type": "point",
        "term": {"birth_time": at(200)},
        "birth": _call(_task("quota.boost", 2)),
    }
    unpaired = [
        point,
        _boost_term(2, restore=1),
        {**_boost_term(2), "death": _call(_task("quota.boost", 2))},
        {**_boost_term(2), "death": {"path": "/api/me/", "method": "GET"}},
    ]
    for body in unpaired:
        response = staff_client.post(SCHEDULES, body, format="json")
        assert response.status_code == HTTPStatus.BAD_REQUEST, body
        payload = response.json()
        assert payload["code"] == "invalid_schedule"
        assert "quota.restore" in payload["error"]
    header = staff_client.post(
        TASKS, _task("quota.boost", 2), format="json", HTTP_X_SCHEDULE_DATETIME=at(10)
    )
    assert header.status_code == HTTPStatus.BAD_REQUEST
    assert header.json()["code"] == "invalid_schedule"
    assert Life.objects.count() == 1


def test_a_life_calling_an_unknown_topic_is_invalid(user_client: APIClient) -> None:
    body = {
        "schedule_type": "point",
        "term": {"birth_time": at(60)},
        "birth": _call({"topic": "nope", "content": {}}),
    }
    response = user_client.post(SCHEDULES, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"
    assert "birth_action" in response.json()["fields"]


def test_a_plain_user_cannot_patch_a_boost_into_a_life(user_client: APIClient) -> None:
    plain = {
        "schedule_type": "term",
        "term": {"birth_time": at(60), "death_time": at(120)},
        "birth": {"path": "/api/me/", "method": "GET"},
        "death": {"path": "/api/me/", "method": "GET"},
    }
    life_uuid = user_client.post(SCHEDULES, plain, format="json").json()["life_uuid"]
    changes = {"birth": _call(_task("quota.boost")), "death": _call(_task("quota.restore"))}
    response = user_client.patch(f"{SCHEDULES}{life_uuid}/", changes, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert Life.objects.get().birth_action["path"] == "/api/me/"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("q_sync")
def test_a_boost_booked_by_staff_does_not_run_after_they_lose_staff(
    live_server: Any, settings: Any, staff_user: User, staff_client: APIClient
) -> None:
    """The Life fires as its owner over real HTTP: the endpoint checks the owner now."""
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    life_uuid = staff_client.post(SCHEDULES, _boost_term(4), format="json").json()["life_uuid"]
    User.objects.filter(pk=staff_user.pk).update(is_staff=False, is_superuser=False)
    plan = Life.objects.get(life_uuid=life_uuid).plans.get(kind=PlanKind.BIRTH)
    assert fire(plan) == "failed"
    assert plan.attempts.get().status_code == HTTPStatus.FORBIDDEN
    assert not QuotaPolicy.objects.filter(user=staff_user, concurrent_boost__gt=0).exists()
    life = Life.objects.get(life_uuid=life_uuid)
    assert life.state == LifeState.STILLBIRTH
    assert life.plans.get(kind=PlanKind.DEATH).state == PlanState.CANCELLED


def test_a_pending_boost_is_not_run_for_an_owner_who_lost_staff(staff_user: User) -> None:
    from apps.schedule.task_runs import task_run_create, task_run_execute

    run = task_run_create(user=staff_user, topic="quota.boost", content={"concurrent": 3})
    User.objects.filter(pk=staff_user.pk).update(is_staff=False, is_superuser=False)
    assert task_run_execute(task_run_id=run.task_run.pk) == "failed"
    run.task_run.refresh_from_db()
    assert (run.task_run.state, run.task_run.error) == (TaskRun.State.FAILED, "permission denied")
    assert not QuotaPolicy.objects.filter(user=staff_user, concurrent_boost__gt=0).exists()
