"""Lock-out as a weapon: behind a proxy every client shares the proxy's socket address, and the
attacker writes any X-Forwarded-For it likes. The lock-out keys on (username, the address the
trusted proxies saw), so an attacker locks out only themself, through the real login forms
(the admin's and /accounts/login/)."""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.factories.users import make_user
from tests.processes import Start, http_request, start_gunicorn

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests"
LOGIN_URLS = ["/accounts/login/", "/admin/login/"]
PROXY = "10.0.0.2"  # the nginx in front: every request's socket address
OWNER = "203.0.113.7"
ATTACKER = "198.51.100.66"
FAILURE_LIMIT = 5  # AXES_FAILURE_LIMIT's default, which the process below runs with


@pytest.fixture
def owner(db: None) -> User:
    # Staff, so that the admin's login form accepts the right password too.
    return make_user(username="owner", is_staff=True)


@pytest.fixture
def one_proxy(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1


def _post(url: str, password: str, *, remote: str, forwarded: str | None) -> tuple[Client, Any]:
    client = Client(REMOTE_ADDR=remote)
    extra: dict[str, Any] = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    response = client.post(url, {"username": "owner", "password": password}, **extra)
    return client, response


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def _attack(url: str, limit: int, *, remote: str, forwarded: str | None) -> Any:
    """`limit` wrong passwords; returns the last answer."""
    response = None
    for _ in range(limit):
        _, response = _post(url, "wrong-guess", remote=remote, forwarded=forwarded)
    return response


@pytest.mark.usefixtures("one_proxy")
@pytest.mark.parametrize("url", LOGIN_URLS)
def test_a_forged_forwarded_for_cannot_lock_the_owner_out_from_their_address(
    url: str, owner: User, settings: Any
) -> None:
    # The attacker claims to be the owner; nginx appends the address it really saw.
    last = _attack(url, settings.AXES_FAILURE_LIMIT, remote=PROXY, forwarded=f"{OWNER}, {ATTACKER}")
    assert last.status_code == HTTPStatus.TOO_MANY_REQUESTS  # the attacker locked themself

    client, response = _post(url, PASSWORD, remote=PROXY, forwarded=OWNER)
    assert response.status_code == HTTPStatus.FOUND
    assert _logged_in(client)
    # The attacker, even with the right password now, stays locked out.
    client, response = _post(url, PASSWORD, remote=PROXY, forwarded=f"{OWNER}, {ATTACKER}")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert not _logged_in(client)


@pytest.mark.usefixtures("one_proxy")
@pytest.mark.parametrize("url", LOGIN_URLS)
def test_failures_from_one_client_do_not_lock_the_username_from_another(
    url: str, owner: User, settings: Any
) -> None:
    _attack(url, settings.AXES_FAILURE_LIMIT, remote=PROXY, forwarded=ATTACKER)

    client, response = _post(url, PASSWORD, remote=PROXY, forwarded=OWNER)
    assert response.status_code == HTTPStatus.FOUND
    assert _logged_in(client)


@pytest.mark.usefixtures("one_proxy")
def test_a_header_that_is_not_an_address_cannot_pick_a_fresh_identity(
    owner: User, settings: Any
) -> None:
    """Garbage where the proxy's entry should be counts against the socket address, whatever
    the garbage: rotating it does not reset the count."""
    url = "/accounts/login/"
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        _, response = _post(url, "wrong-guess", remote=PROXY, forwarded=f"not-an-ip-{attempt}")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    # A client behind the working proxy is not affected.
    client, response = _post(url, PASSWORD, remote=PROXY, forwarded=OWNER)
    assert _logged_in(client)


@pytest.mark.parametrize("url", LOGIN_URLS)
def test_by_default_a_forged_forwarded_for_is_ignored(url: str, owner: User, settings: Any) -> None:
    assert settings.TRUSTED_PROXY_COUNT == 0
    # A new forged address per guess: still one client, locked at the limit.
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        _, response = _post(url, "wrong-guess", remote=ATTACKER, forwarded=f"192.0.2.{attempt + 1}")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    # Claiming the owner's address locked out the attacker's own, not the owner's.
    client, response = _post(url, PASSWORD, remote=OWNER, forwarded=None)
    assert response.status_code == HTTPStatus.FOUND
    assert _logged_in(client)
    client, response = _post(url, PASSWORD, remote=ATTACKER, forwarded=OWNER)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert not _logged_in(client)


@pytest.mark.usefixtures("one_proxy")
def test_api_tokens_are_not_subject_to_the_lock_out(
    owner: User, settings: Any, client_for: Callable[[User], APIClient]
) -> None:
    # Locked out on the login forms from the owner's own address...
    _attack("/accounts/login/", settings.AXES_FAILURE_LIMIT, remote=PROXY, forwarded=OWNER)
    _, response = _post("/accounts/login/", PASSWORD, remote=PROXY, forwarded=OWNER)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS

    # ...the owner's API token still works from there.
    api = client_for(owner)
    api.defaults.update(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=OWNER)
    me = api.get("/api/me/")
    assert me.status_code == HTTPStatus.OK
    assert me.json()["username"] == "owner"


def _form_login(port: int, password: str, forwarded: str) -> int:
    """The login page as a browser behind the proxy uses it: GET the form (CSRF cookie and
    token), POST it; returns the POST's status."""
    status, headers, page = http_request(port, "GET", "/accounts/login/")
    assert status == HTTPStatus.OK
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match is not None
    form = urlencode(
        {"csrfmiddlewaretoken": match.group(1).decode(), "username": "owner", "password": password}
    )
    status, _, _ = http_request(
        port,
        "POST",
        "/accounts/login/",
        form.encode(),
        **{
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": cookie,
            "X-Forwarded-For": forwarded,
        },
    )
    return status


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_behind_gunicorn_the_setting_from_the_environment_protects_the_owner(
    start_process: Start,
) -> None:
    """The web process as production starts it, with TRUSTED_PROXY_COUNT=1 in its environment;
    this test plays the proxy on loopback (the socket address is 127.0.0.1 for everyone)."""
    make_user(username="owner")
    port, _ = start_gunicorn(
        start_process, "web", workers=1, DEBUG="false", TRUSTED_PROXY_COUNT="1"
    )
    statuses = [
        _form_login(port, "wrong-guess", f"{OWNER}, {ATTACKER}") for _ in range(FAILURE_LIMIT)
    ]
    assert statuses[-1] == HTTPStatus.TOO_MANY_REQUESTS
    assert _form_login(port, PASSWORD, OWNER) == HTTPStatus.FOUND
    assert _form_login(port, PASSWORD, f"{OWNER}, {ATTACKER}") == HTTPStatus.TOO_MANY_REQUESTS
