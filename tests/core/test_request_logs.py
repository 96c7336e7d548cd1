"""Request ids (`X-Request-ID` accepted or made, returned on every response) and log lines that
carry the request id, the user id and the ids of the objects they are about."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from apps.core.logcontext import ContextFilter, JsonFormatter, log_context
from tests import faults
from tests.factories.submissions import make_submission

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.core.urls")]
HEX32 = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """What the console handler writes with LOG_FORMAT=json: the project's filter and
    formatter on a handler of the root logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_client_request_id_is_kept_and_returned(user_client: APIClient) -> None:
    response = user_client.get("/api/me/", HTTP_X_REQUEST_ID="ci-build-42/step.3")
    assert response.status_code == HTTPStatus.OK
    assert response["X-Request-ID"] == "ci-build-42/step.3"


@pytest.mark.parametrize("sent", [None, "", "has space", "x" * 129, "tab\there", "ünïcode"])
def test_a_missing_or_unusable_request_id_is_replaced_by_a_new_one(
    user_client: APIClient, sent: str | None
) -> None:
    headers = {} if sent is None else {"X-Request-ID": sent}
    first = user_client.get("/api/me/", headers=headers)["X-Request-ID"]
    second = user_client.get("/api/me/", headers=headers)["X-Request-ID"]
    assert HEX32.match(first)
    assert HEX32.match(second)
    assert first != second


def test_the_request_id_is_returned_on_every_error_and_redirect() -> None:
    client = Client(raise_request_exception=False)
    answers = {
        "401": client.get("/api/me/", HTTP_X_REQUEST_ID="rid-401"),
        "404 api": client.get("/api/nothing/", HTTP_X_REQUEST_ID="rid-404"),
        "404 page": client.get("/nothing/", HTTP_X_REQUEST_ID="rid-404p"),
        "302": client.get("/ops/", HTTP_X_REQUEST_ID="rid-302"),
        "500": client.get("/api/test/crash/", HTTP_X_REQUEST_ID="rid-500"),
        "418": client.get("/api/test/domain/", HTTP_X_REQUEST_ID="rid-418"),
    }
    faults.fail_next(lambda request: request.path == "/api/me/", 1)
    try:
        answers["503"] = client.get("/api/me/", HTTP_X_REQUEST_ID="rid-503")
    finally:
        faults.clear()
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses == {
        "401": 401,
        "404 api": 404,
        "404 page": 404,
        "302": 302,
        "500": 500,
        "418": 418,
        "503": 503,
    }
    assert {name: r["X-Request-ID"] for name, r in answers.items()} == {
        "401": "rid-401",
        "404 api": "rid-404",
        "404 page": "rid-404p",
        "302": "rid-302",
        "500": "rid-500",
        "418": "rid-418",
        "503": "rid-503",
    }


def test_json_lines_carry_the_request_user_job_and_submission_ids(
    json_lines: io.StringIO, user: User, user_client: APIClient
) -> None:
    submission = make_submission(owner=user)
    response = user_client.post(
        "/api/jobs/",
        {"submission_id": submission.pk},
        format="json",
        HTTP_X_REQUEST_ID="rid-job-1",
    )
    assert response.status_code == HTTPStatus.CREATED
    job_id = response.json()["job_id"]
    lines = records(json_lines)
    assert lines, "nothing was logged"
    for line in lines:
        assert {"time", "level", "logger", "message", "request_id", "user_id"} <= set(line)
        assert line["request_id"] == "rid-job-1"
        assert line["user_id"] == str(user.pk)
    created = next(line for line in lines if line["logger"] == "apps.jobs.services.submission")
    assert created["job_id"] == job_id
    assert created["submission_id"] == submission.pk
    assert created["level"] == "INFO"
    access = next(line for line in lines if line["logger"] == "yoyaku.request")
    assert access["message"].startswith("POST /api/jobs/ 201 ")
    assert (access["status"], access["route"], access["job_id"]) == (201, "jobs", job_id)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", access["time"])


def test_django_s_own_error_line_carries_the_request_id(json_lines: io.StringIO) -> None:
    Client().get("/api/me/", HTTP_X_REQUEST_ID="rid-unauthorized")
    lines = records(json_lines)
    django_line = next(line for line in lines if line["logger"] == "django.request")
    assert django_line["message"] == "Unauthorized: /api/me/"
    assert django_line["request_id"] == "rid-unauthorized"
    assert "request" not in django_line  # the request object itself is not dumped


def test_outside_a_request_ids_are_null_or_bound_by_the_task(json_lines: io.StringIO) -> None:
    logger = logging.getLogger("tests.logs")
    logger.info("no request")
    with log_context(job_id="j1", request_id="rid-task"):
        logger.warning("in a task")
    logger.info("after")
    first, inside, after = records(json_lines)
    assert (first["request_id"], first["user_id"]) == (None, None)
    assert "job_id" not in first
    assert (inside["request_id"], inside["job_id"], inside["level"]) == (
        "rid-task",
        "j1",
        "WARNING",
    )
    assert after["request_id"] is None
    assert "job_id" not in after
