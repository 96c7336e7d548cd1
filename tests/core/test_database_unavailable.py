"""While the database cannot be reached (a PostgreSQL restart), the API answers 503
`service_unavailable` in the SPEC's error body with `Retry-After`: never a 500, never a page.

The outage is real: the connection is closed and pointed at a database that cannot be opened
(a closed port on PostgreSQL, a file in a missing folder on SQLite), so connecting fails.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.core.test_errors import assert_error
from tests.factories.tokens import make_token
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def database_down() -> Iterator[None]:
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-folder/yoyaku/db.sqlite3"
    else:
        connection.settings_dict["HOST"] = "127.0.0.1"
        connection.settings_dict["PORT"] = str(_closed_port())
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def _client_with_token() -> APIClient:
    user = make_user(username="outage")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user)}")
    return client


def _assert_unavailable(response: Any) -> None:
    assert_error(response, HTTPStatus.SERVICE_UNAVAILABLE, "service_unavailable")
    assert response["Retry-After"] == "1"


def test_unknown_token_answers_503_while_the_database_is_down() -> None:
    with database_down():
        _assert_unavailable(APIClient().get("/api/jobs/", HTTP_AUTHORIZATION="Bearer abc"))


def test_authenticated_requests_answer_503_then_work_again() -> None:
    client = _client_with_token()
    # Django's test client re-raises what a middleware raised; a server answers instead.
    client.raise_request_exception = False
    with database_down():
        _assert_unavailable(client.get("/api/jobs/"))
        _assert_unavailable(client.post("/api/jobs/", {"submission_id": "x"}, format="json"))
        # A middleware (header booking) authenticates before any view: 503 there too.
        _assert_unavailable(
            client.get("/api/jobs/", HTTP_X_SCHEDULE_DATETIME="2099-01-01 00:00:00")
        )
    assert client.get("/api/jobs/").status_code == HTTPStatus.OK
