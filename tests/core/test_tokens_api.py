"""`/api/tokens/`: tokens are shown once, listed without secrets, revoked at once; expired or
revoked tokens are 401; a token never mints more than it holds; a password makes a token only
through `authenticate()` (django-axes counts it)."""

from __future__ import annotations

import base64
import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.models import ApiToken
from apps.core.services import token_authenticate
from tests.factories.tokens import make_token
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests"


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def basic(username: str, password: str, ip: str = "198.51.100.9") -> APIClient:
    client = APIClient(REMOTE_ADDR=ip)
    raw = base64.b64encode(f"{username}:{password}".encode()).decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {raw}")
    return client


def create(client: APIClient, **body: Any) -> Any:
    return client.post("/api/tokens/", {"name": "ci", **body}, format="json")


def test_create_shows_the_token_once_with_the_specs_shape_and_default_scopes(user: User) -> None:
    response = create(bearer(make_token(user)))
    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    assert set(body) == {"id", "name", "scopes", "expires_at", "token"}
    assert body["name"] == "ci"
    assert sorted(body["scopes"]) == ["read", "submit"]
    assert body["expires_at"] is None
    assert len(body["id"]) == 32
    assert bearer(body["token"]).get("/api/me/").json()["username"] == "alice"

    listed = bearer(body["token"]).get("/api/tokens/").json()
    assert [t["name"][:5] for t in listed] == ["test-", "ci"]
    for row in listed:
        assert set(row) == {"id", "name", "scopes", "created_at", "expires_at", "last_used_at"}
    assert body["token"] not in str(listed)


def test_the_list_holds_only_the_callers_tokens_even_for_staff(
    user: User, staff_user: User
) -> None:
    alice = make_token(user, name="alice-ci")
    listed = bearer(make_token(staff_user)).get("/api/tokens/").json()
    assert "alice-ci" not in [row["name"] for row in listed]
    assert alice not in str(listed)


def test_revocation_takes_effect_at_once(user: User) -> None:
    manager = bearer(make_token(user))
    created = create(manager).json()
    victim = bearer(created["token"])
    assert victim.get("/api/me/").status_code == HTTPStatus.OK

    assert manager.delete(f"/api/tokens/{created['id']}/").status_code == HTTPStatus.NO_CONTENT
    response = victim.get("/api/me/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json()["code"] == "authentication_failed"
    assert manager.delete(f"/api/tokens/{created['id']}/").status_code == HTTPStatus.NOT_FOUND


def test_another_users_token_cannot_be_revoked(user: User, other_user: User) -> None:
    created = create(bearer(make_token(user))).json()
    response = bearer(make_token(other_user)).delete(f"/api/tokens/{created['id']}/")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert "token" not in response.json()
    assert bearer(created["token"]).get("/api/me/").status_code == HTTPStatus.OK


def test_an_expired_token_is_a_401(user: User) -> None:
    expires = timezone.now() + dt.timedelta(hours=1)
    token = create(bearer(make_token(user)), expires_at=expires.isoformat()).json()["token"]
    assert bearer(token).get("/api/me/").status_code == HTTPStatus.OK
    with time_machine.travel(expires + dt.timedelta(seconds=1)):
        response = bearer(token).get("/api/me/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json() == {
        "success": False,
        "code": "authentication_failed",
        "error": "Token expired.",
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scopes": ["admin"]}, "scopes"),  # alice is no staff
        ({"scopes": ["review"]}, "scopes"),  # nor a reviewer
        ({"scopes": ["root"]}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"scopes": "read"}, "scopes"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"name": ""}, "name"),
        ({"name": "a\u202eb"}, "name"),
        ({"name": "x" * 101}, "name"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(user: User, body: dict[str, Any], field: str) -> None:
    response = create(bearer(make_token(user)), **body)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
    assert field in response.json()["fields"]
    assert not ApiToken.objects.filter(name=body.get("name", "ci")).exists()


def test_a_name_is_unique_per_user_but_not_across_users(user: User, other_user: User) -> None:
    assert create(bearer(make_token(user))).status_code == HTTPStatus.CREATED
    again = create(bearer(make_token(user)))
    assert again.status_code == HTTPStatus.BAD_REQUEST
    assert "name" in again.json()["fields"]
    assert create(bearer(make_token(other_user))).status_code == HTTPStatus.CREATED


def test_a_token_never_mints_a_scope_it_lacks(staff_user: User) -> None:
    narrow = bearer(make_token(staff_user, scopes=["read", "submit"]))
    response = create(narrow, scopes=["read", "submit", "admin"])
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "insufficient_scope"
    assert create(narrow, scopes=["read"]).status_code == HTTPStatus.CREATED
    # A read-only token creates nothing at all (creating is a write).
    response = create(bearer(make_token(staff_user, scopes=["read"])), name="x", scopes=["read"])
    assert response.json()["code"] == "insufficient_scope"


def test_a_token_never_mints_a_token_that_outlives_it(user: User) -> None:
    expires = timezone.now() + dt.timedelta(days=1)
    parent = bearer(make_token(user, expires_at=expires))
    later = create(parent, name="later", expires_at=(expires + dt.timedelta(days=1)).isoformat())
    assert later.status_code == HTTPStatus.BAD_REQUEST
    assert "expires_at" in later.json()["fields"]
    inherited = create(parent, name="inherits").json()
    assert dt.datetime.fromisoformat(inherited["expires_at"]) == expires


def test_a_browser_session_manages_tokens(user: User) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/tokens/").status_code == HTTPStatus.OK
    # Without its CSRF token a cross-site form cannot mint one.
    response = client.post("/api/tokens/", {"name": "web"}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    client = APIClient()
    client.force_login(user)
    response = client.post("/api/tokens/", {"name": "web", "scopes": ["read"]}, format="json")
    assert response.status_code == HTTPStatus.CREATED


def test_a_password_makes_a_token_and_is_accepted_nowhere_else(user: User) -> None:
    response = create(basic("alice", PASSWORD), scopes=["read"])
    assert response.status_code == HTTPStatus.CREATED
    assert bearer(response.json()["token"]).get("/api/me/").json()["username"] == "alice"
    refused = basic("alice", PASSWORD).get("/api/me/")
    assert refused.status_code == HTTPStatus.UNAUTHORIZED
    # Not even the token list: a password makes a token and does nothing else.
    listed = basic("alice", PASSWORD).get("/api/tokens/")
    assert listed.status_code == HTTPStatus.UNAUTHORIZED
    assert listed.json()["success"] is False
    wrong = create(basic("alice", "guess"), name="x")
    assert wrong.status_code == HTTPStatus.UNAUTHORIZED
    assert wrong.json()["code"] == "authentication_failed"


def test_password_guessing_through_the_api_is_locked_out_like_a_login_form(
    user: User, settings: Any
) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        create(basic("alice", "guess"), name="x")
    response = create(basic("alice", PASSWORD), name="x")
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert response.json()["code"] == "login_locked_out"
    assert int(response["Retry-After"]) > 0
    assert not ApiToken.objects.filter(name="x").exists()
    # Tokens are not subject to it, and another address is not locked out.
    assert bearer(make_token(user)).get("/api/me/").status_code == HTTPStatus.OK
    assert create(basic("alice", PASSWORD, ip="192.0.2.1"), name="x").status_code == 201


def test_malformed_basic_headers_are_401s(user: User) -> None:
    for header in ["Basic", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        response = client.post("/api/tokens/", {"name": "x"}, format="json")
        assert response.status_code == HTTPStatus.UNAUTHORIZED, header


def test_last_used_at_is_written_at_most_once_a_minute(
    user: User, django_assert_num_queries: Any
) -> None:
    token = make_token(user)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        with django_assert_num_queries(2):  # the lookup, and the first use
            token_authenticate(token=token)
        with django_assert_num_queries(1):  # the lookup only: no write per request
            token_authenticate(token=token)
        assert ApiToken.objects.get(name__startswith="test-").last_used_at == start
    later = start + dt.timedelta(seconds=61)
    with time_machine.travel(later, tick=False):
        token_authenticate(token=token)
    assert ApiToken.objects.get(name__startswith="test-").last_used_at == later


@pytest.mark.parametrize(
    "header",
    [
        "Bearer yk_000000000000_" + "A" * 43,  # well formed, unknown
        "Bearer " + "0" * 40,  # an old-style key that was never issued
        "Bearer x" + "\u00e9",  # not ASCII
        "Token a b",
    ],
)
def test_unknown_or_malformed_tokens_are_401s(user: User, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get("/api/me/").status_code == HTTPStatus.UNAUTHORIZED


def test_a_guessed_key_id_with_a_wrong_secret_is_a_401(user: User) -> None:
    token = make_token(user)
    forged = token[: len("yk_000000000000_")] + "B" * 43
    assert bearer(forged).get("/api/me/").status_code == HTTPStatus.UNAUTHORIZED


def test_an_inactive_users_token_is_a_401(db: None) -> None:
    user = make_user(username="gone")
    token = make_token(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert bearer(token).get("/api/me/").status_code == HTTPStatus.UNAUTHORIZED
