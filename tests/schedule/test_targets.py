"""Target rules played by an attacker: relative paths that try to leave the platform, names
that resolve (or rebind) to internal addresses. Every receiver is a real HTTP server on
loopback; only the DNS answers of a test-only name are scripted, since no rebinding DNS server
can be put behind the system resolver here."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.schedule.models import Life, LifeState, Plan, PlanKind, PlanState
from tests.schedule.conftest import Receiver, at
from tests.schedule.factories import book_point
from tests.schedule.test_execution import fire

pytestmark = pytest.mark.django_db
URL = "/api/schedules/"


def _point(path: str, method: str = "GET") -> dict[str, Any]:
    return {
        "schedule_type": "point",
        "term": {"birth_time": at(60)},
        "birth": {"path": path, "method": method},
    }


@pytest.mark.parametrize(
    "path",
    [
        "/ //127.0.0.1:9999/",  # urljoin strips the space: a network-path reference
        "/\t//127.0.0.1:9999/",
        "/\n//127.0.0.1:9999/",
        "/api/me/\r\nHost: evil",
        "/api/me/\x7f",
        "/api/me/\u200b",  # zero-width space (a format character)
        "/api/me/\u2028",  # line separator
        "//127.0.0.1:9999/",
        "/\\127.0.0.1:9999/",
        "api/me/",
        "/tasks",  # the seed tutorial's path: not a route of this platform
        "/api/no-such-route/",
        "/api/../admin/",
        "/api/%2e%2e/admin/",
        "/admin/",
        "/api/me/#frag",
    ],
)
def test_a_relative_path_that_is_not_an_api_route_is_refused_at_booking(
    user_client: APIClient, path: str
) -> None:
    response = user_client.post(URL, _point(path), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "invalid_schedule"
    assert "birth_action" in body["fields"]
    assert Life.objects.count() == 0


@pytest.mark.parametrize(
    "path", ["/api/me/", "/api/quotas/me/", "/api/jobs/?status=queued", "/api/jobs/abc/cancel/"]
)
def test_a_relative_path_to_an_api_route_is_accepted(user_client: APIClient, path: str) -> None:
    response = user_client.post(URL, _point(path), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["birth_action"]["path"] == path


def test_a_space_smuggled_path_never_reaches_another_host_at_fire_time(
    user: User, receiver: Receiver, settings: Any
) -> None:
    """A Life stored before the rule existed (or written past the booking check) is checked
    again when it fires: nothing is sent to the host the path smuggles in."""
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = []
    life = book_point(user, url="/api/me/")
    evil = f"/ //{receiver.host}/"
    Plan.objects.filter(life=life).update(action={"path": evil, "method": "GET"})
    Life.objects.filter(pk=life.pk).update(birth_action={"path": evil, "method": "GET"})
    plan = life.plans.get(kind=PlanKind.BIRTH)
    assert fire(plan) == "failed"
    assert receiver.requests == []
    attempt = plan.attempts.get()
    assert attempt.status_code is None
    assert attempt.error.startswith("refused")
    assert attempt.response_excerpt == ""
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH
    plan.refresh_from_db()
    assert plan.state == PlanState.FAILED


@pytest.mark.parametrize(
    "base", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/yoyaku"]
)
def test_a_relative_url_is_built_on_the_base_urls_host(settings: Any, base: str) -> None:
    from apps.schedule.targets import resolve_target

    settings.SCHEDULE_WEBHOOK_BASE_URL = base
    target = resolve_target("/api/jobs/?status=queued")
    prefix = base.rstrip("/")
    assert target.url == f"{prefix}/api/jobs/?status=queued"
    assert (target.relative, target.host, target.port) == (True, "127.0.0.1", 8000)


def test_the_seed_tutorial_path_is_refused_with_a_clear_message() -> None:
    from apps.schedule.targets import TargetRefused, check_action_path

    with pytest.raises(TargetRefused, match="not an API route"):
        check_action_path("/tasks")
