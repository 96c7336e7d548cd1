"""NUL in any id is refused, never a 500 (PostgreSQL cannot compare text with NUL)."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/jobs/a%00b/"),
        ("get", "/api/jobs/a%00b/logs/"),
        ("post", "/api/jobs/a%00b/cancel/"),
        ("post", "/api/quotas/reservations/a%00b/release/"),
        ("post", "/api/quotas/reservations/a%00b/extend/"),
    ],
)
def test_nul_in_a_path_id_is_not_found(user_client: APIClient, method: str, path: str) -> None:
    response = getattr(user_client, method)(path, format="json")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_nul_in_reservation_id_of_a_submission_is_invalid(user_client: APIClient) -> None:
    response = user_client.post(
        "/api/jobs/", {"submission_id": "x", "reservation_id": "a\x00"}, format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
