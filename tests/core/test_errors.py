"""Every error kind leaves the API in the one SPEC body, with the right status and code."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.core.urls")]


def assert_error(response: Any, status: HTTPStatus, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert body["code"] == code
    assert isinstance(body["error"], str)
    assert body["error"]
    return body


def test_missing_credentials_answer_401_not_authenticated(api_client: APIClient) -> None:
    response = api_client.get("/api/me/")
    assert_error(response, HTTPStatus.UNAUTHORIZED, "not_authenticated")
    assert response["WWW-Authenticate"] == "Bearer"


def test_unknown_token_answers_401_authentication_failed(api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION="Bearer not-a-real-token")
    assert_error(api_client.get("/api/me/"), HTTPStatus.UNAUTHORIZED, "authentication_failed")


def test_malformed_authorization_header_answers_401(api_client: APIClient) -> None:
    api_client.credentials(HTTP_AUTHORIZATION="Bearer two parts")
    body = assert_error(
        api_client.get("/api/me/"), HTTPStatus.UNAUTHORIZED, "authentication_failed"
    )
    assert "Bearer <token>" in body["error"]


def test_permission_denied_answers_403(user_client: APIClient) -> None:
    assert_error(
        user_client.get("/api/test/admin-only/"), HTTPStatus.FORBIDDEN, "permission_denied"
    )


def test_unknown_api_path_answers_json_404(user_client: APIClient, api_client: APIClient) -> None:
    body = assert_error(user_client.get("/api/no/such/thing/"), HTTPStatus.NOT_FOUND, "not_found")
    assert "/api/no/such/thing/" in body["error"]
    # No authentication is needed to learn that a path does not exist.
    assert_error(api_client.get("/api/nothing-here"), HTTPStatus.NOT_FOUND, "not_found")


def test_wrong_method_answers_405(user_client: APIClient) -> None:
    assert_error(
        user_client.delete("/api/me/"), HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"
    )


def test_unsupported_media_type_answers_415(api_client: APIClient) -> None:
    response = api_client.post("/api/test/echo/", data="name=x", content_type="text/csv")
    assert_error(response, HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")


def test_malformed_json_answers_400_invalid_request(api_client: APIClient) -> None:
    response = api_client.post("/api/test/echo/", data="{not json", content_type="application/json")
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert "JSON parse error" in body["error"]


def test_validation_error_lists_fields(api_client: APIClient) -> None:
    response = api_client.post("/api/test/echo/", {"name": "toolong", "count": 0}, format="json")
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert set(body["fields"]) == {"name", "count"}
    assert all(isinstance(msg, str) for msgs in body["fields"].values() for msg in msgs)


def test_domain_error_keeps_code_extra_and_headers(api_client: APIClient) -> None:
    response = api_client.get("/api/test/domain/")
    body = assert_error(response, HTTPStatus.IM_A_TEAPOT, "teapot")
    assert body["hint"] == "brew"
    assert body["error"] == "I am a teapot."
    assert response["Retry-After"] == "7"


def test_throttling_answers_429_with_retry_after(api_client: APIClient) -> None:
    cache.clear()
    assert api_client.get("/api/test/throttled/").status_code == HTTPStatus.OK
    response = api_client.get("/api/test/throttled/")
    body = assert_error(response, HTTPStatus.TOO_MANY_REQUESTS, "rate_limited")
    assert int(response["Retry-After"]) > 0
    assert body["retry_after"] > 0


def test_unhandled_exception_answers_json_500_not_a_stack_trace(api_client: APIClient) -> None:
    api_client.raise_request_exception = False
    response = api_client.get("/api/test/crash/")
    body = assert_error(response, HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error")
    assert "boom" not in body["error"]


def test_disallowed_host_under_api_answers_json_400(api_client: APIClient) -> None:
    response = api_client.get("/api/me/", HTTP_HOST="evil.example")
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
