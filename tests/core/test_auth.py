from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories.tokens import make_token

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("keyword", ["Bearer", "Token", "bearer"])
def test_token_is_accepted_with_either_keyword(keyword: str, user, api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION=f"{keyword} {make_token(user)}")
    response = api_client.get("/api/me/")
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {
        "id": user.id,
        "username": "alice",
        "is_staff": False,
        "is_reviewer": False,
    }


def test_other_schemes_are_not_token_auth(user, api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION=f"Basic {make_token(user)}")
    assert api_client.get("/api/me/").status_code == HTTPStatus.UNAUTHORIZED


def test_session_login_reaches_the_api_and_unsafe_methods_need_csrf(user) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/me/").json()["username"] == "alice"
    response = client.post("/api/me/", {}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert "CSRF" in response.json()["error"]


def test_the_api_root_is_an_index_without_authentication(api_client: Any) -> None:
    from django.urls import resolve

    response = api_client.get("/api/")

    assert response.status_code == 200
    body = response.json()
    assert body["schema"].endswith("/api/schema/")
    assert body["docs"].endswith("/api/docs/")
    for entry in body["collections"].values():
        path = entry["url"].split("://", 1)[1].split("/", 1)[1]
        assert resolve("/" + path).url_name != "api-not-found", path
    assert api_client.get(body["schema"]).status_code == 200
