"""LEADERBOARD_PUBLIC: on (the default) anyone reads the leaderboard; off, an anonymous
visitor gets neither the API's rows nor the page."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.factories.submissions import make_graded_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def ranked(user: User) -> None:
    make_graded_submission(user, score=0.9, question_id="q")


def test_public_by_default(api_client: APIClient, ranked: None) -> None:
    from django.conf import settings

    assert settings.LEADERBOARD_PUBLIC is True  # the shipped default
    response = api_client.get("/api/leaderboard/")
    assert response.status_code == HTTPStatus.OK
    assert [row["user"]["username"] for row in response.json()] == ["alice"]
    assert Client().get("/leaderboard/").status_code == HTTPStatus.OK


def test_private_leaderboard_api_needs_authentication(
    settings: Any, api_client: APIClient, ranked: None, client_for: Callable[[User], APIClient]
) -> None:
    settings.LEADERBOARD_PUBLIC = False
    response = api_client.get("/api/leaderboard/", {"question_id": "q"})
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "not_authenticated"
    assert "alice" not in response.content.decode()

    reader = client_for(User.objects.create_user(username="reader"))
    response = reader.get("/api/leaderboard/", {"question_id": "q"})
    assert response.status_code == HTTPStatus.OK
    assert [row["score"] for row in response.json()] == [0.9]


def test_private_leaderboard_page_redirects_to_login(settings: Any, user: User) -> None:
    settings.LEADERBOARD_PUBLIC = False
    response = Client().get("/leaderboard/")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"] == "/accounts/login/?next=/leaderboard/"

    client = Client()
    client.force_login(user)
    assert client.get("/leaderboard/").status_code == HTTPStatus.OK
