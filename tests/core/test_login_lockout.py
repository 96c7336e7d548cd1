"""The attacker guesses passwords on the login forms: django-axes locks the (username, IP)
pair out after AXES_FAILURE_LIMIT failures, and then even the right password is refused."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests"
LOGIN_URLS = ["/accounts/login/", "/admin/login/"]


@pytest.fixture
def victim(db: None) -> User:
    # Staff, so that the admin's login form would accept the right password too.
    return make_user(username="victim", is_staff=True)


def _login(url: str, username: str, password: str, ip: str = "203.0.113.7", **extra: Any) -> Any:
    client = Client(REMOTE_ADDR=ip)
    response = client.post(url, {"username": username, "password": password}, **extra)
    return client, response


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def _fail_until_locked(url: str, username: str, limit: int) -> None:
    for attempt in range(1, limit + 1):
        client, response = _login(url, username, "wrong-guess")
        # The form again with its error; the failure that reaches the limit locks the pair.
        expected = HTTPStatus.TOO_MANY_REQUESTS if attempt >= settings.AXES_FAILURE_LIMIT else 200
        assert response.status_code == expected
        assert not _logged_in(client)


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_right_password_still_works_one_failure_short_of_the_limit(
    url: str, victim: User, settings: Any
) -> None:
    _fail_until_locked(url, "victim", settings.AXES_FAILURE_LIMIT - 1)
    client, response = _login(url, "victim", PASSWORD)
    assert response.status_code == HTTPStatus.FOUND
    assert _logged_in(client)


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_failed_logins_lock_the_pair_out_even_for_the_right_password(
    url: str, victim: User, settings: Any
) -> None:
    _fail_until_locked(url, "victim", settings.AXES_FAILURE_LIMIT)

    client, response = _login(url, "victim", PASSWORD)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert int(response["Retry-After"]) == int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert b"Too many failed logins" in response.content
    assert not _logged_in(client)


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_lockout_is_per_username_and_ip_pair(url: str, victim: User, settings: Any) -> None:
    make_user(username="neighbour", is_staff=True)
    _fail_until_locked(url, "victim", settings.AXES_FAILURE_LIMIT)

    # The same username from another address, and another username from the same address.
    client, _ = _login(url, "victim", PASSWORD, ip="198.51.100.9")
    assert _logged_in(client)
    client, _ = _login(url, "neighbour", PASSWORD)
    assert _logged_in(client)
    client, response = _login(url, "victim", PASSWORD)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert not _logged_in(client)


def test_a_json_client_gets_the_error_body(victim: User, settings: Any) -> None:
    _fail_until_locked("/accounts/login/", "victim", settings.AXES_FAILURE_LIMIT)
    client, response = _login(
        "/accounts/login/", "victim", PASSWORD, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "login_locked_out"
    assert body["retry_after"] == int(response["Retry-After"]) > 0
    assert not _logged_in(client)


def test_the_lock_lifts_after_the_cool_off(victim: User, settings: Any) -> None:
    _fail_until_locked("/accounts/login/", "victim", settings.AXES_FAILURE_LIMIT)
    later = dt.datetime.now(tz=dt.UTC) + settings.AXES_COOLOFF_TIME + dt.timedelta(seconds=5)
    with time_machine.travel(later):
        client, response = _login("/accounts/login/", "victim", PASSWORD)
    assert response.status_code == HTTPStatus.FOUND
    assert _logged_in(client)
