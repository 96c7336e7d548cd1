"""`/healthz` with DEBUG off: anyone sees `status` and the component states; the grader's
details (interpreter, limits, isolation) only staff or a request with the metrics token."""

from __future__ import annotations

import json
import sys
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.core.test_database_unavailable import database_down
from tests.processes import Start, http_request, start_gunicorn

pytestmark = pytest.mark.django_db

METRICS_TOKEN = "metrics-token-for-tests"
PUBLIC_KEYS = {"status", "database", "broker", "watcher"}


@pytest.fixture(autouse=True)
def _production(settings: Any) -> None:
    settings.DEBUG = False
    settings.METRICS_TOKEN = METRICS_TOKEN


def _assert_no_grader_details(response: Any) -> None:
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert set(body) == PUBLIC_KEYS
    assert body["status"] in {"ok", "degraded"}
    text = response.content.decode()
    for secret in ("grader", "python", "limits", "isolation", "bubblewrap", "memory_bytes"):
        assert secret not in text


def _assert_grader_details(response: Any, settings: Any) -> None:
    assert response.status_code == HTTPStatus.OK
    grader = response.json()["grader"]
    assert grader["python"] == settings.GRADING_PYTHON
    assert grader["isolation"] in {"bubblewrap", "none"}
    assert grader["limits"]["memory_bytes"] == settings.GRADING_MEMORY_LIMIT


def test_anonymous_sees_the_states_but_no_grader_details() -> None:
    _assert_no_grader_details(Client().get("/healthz"))


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer wrong-token",
        f"Bearer {METRICS_TOKEN}x",
        f"Token {METRICS_TOKEN}",
        f"Basic {METRICS_TOKEN}",
        "Bearer",
    ],
)
def test_a_wrong_token_is_no_error_and_shows_no_details(authorization: str) -> None:
    _assert_no_grader_details(Client().get("/healthz", HTTP_AUTHORIZATION=authorization))


def test_a_signed_in_user_who_is_not_staff_sees_no_details(user: User) -> None:
    client = Client()
    client.force_login(user)
    _assert_no_grader_details(client.get("/healthz"))


def test_an_api_token_of_a_plain_user_shows_no_details(user_client: Any) -> None:
    _assert_no_grader_details(user_client.get("/healthz"))


def test_a_staff_users_api_token_does_not_open_the_details(staff_client: Any) -> None:
    """Only the operator's monitoring token (or a staff session) reveals the sandbox."""
    _assert_no_grader_details(staff_client.get("/healthz"))


def test_without_a_metrics_token_set_no_bearer_opens_the_details(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    _assert_no_grader_details(Client().get("/healthz", HTTP_AUTHORIZATION="Bearer "))


def test_the_metrics_token_shows_the_grader_details(settings: Any) -> None:
    response = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    _assert_grader_details(response, settings)


def test_a_staff_session_shows_the_grader_details(staff_user: User, settings: Any) -> None:
    client = Client()
    client.force_login(staff_user)
    _assert_grader_details(client.get("/healthz"), settings)


def test_with_debug_on_the_details_are_open(settings: Any) -> None:
    settings.DEBUG = True
    _assert_grader_details(Client().get("/healthz"), settings)


def test_a_degraded_grader_still_degrades_the_public_status(settings: Any) -> None:
    """Anonymous probes learn that something is wrong, not what: a refused interpreter (the
    platform's own) makes `status` degraded without showing the reason or the path."""
    settings.GRADING_PYTHON = sys.executable
    anonymous = Client().get("/healthz")
    _assert_no_grader_details(anonymous)
    assert anonymous.json()["status"] == "degraded"
    assert sys.executable not in anonymous.content.decode()

    detailed = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").json()
    assert detailed["grader"]["grading"] == "refused"
    assert "warning" in detailed["grader"]


def test_the_answer_is_never_kept_by_a_shared_cache() -> None:
    response = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert response["Cache-Control"] == "no-store"
    assert {"Authorization", "Cookie"} <= {v.strip() for v in response["Vary"].split(",")}


@pytest.mark.django_db(transaction=True)
def test_a_staff_session_during_a_database_outage_gets_the_503_report(
    staff_user: User,
) -> None:
    """The session cannot be read while the database is down: the report is still the 503
    health answer (no details), never a 500."""
    client = Client()
    client.force_login(staff_user)
    with database_down():
        response = client.get("/healthz")
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    body = response.json()
    assert body["database"] == "unavailable"
    assert "grader" not in body


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_behind_gunicorn_anonymous_sees_no_details_and_the_token_does(
    start_process: Start, settings: Any
) -> None:
    """The web process as production starts it, DEBUG off and METRICS_TOKEN from the
    environment."""
    port, _ = start_gunicorn(
        start_process, "web", workers=1, DEBUG="false", METRICS_TOKEN=METRICS_TOKEN
    )
    status, _, body = http_request(port, "GET", "/healthz")
    assert status == HTTPStatus.OK
    public = json.loads(body)
    assert set(public) == PUBLIC_KEYS
    assert b"python" not in body
    assert b"limits" not in body

    status, _, body = http_request(port, "GET", "/healthz", Authorization=f"Bearer {METRICS_TOKEN}")
    assert status == HTTPStatus.OK
    assert json.loads(body)["grader"]["python"] == settings.GRADING_PYTHON
