"""A request whose `Host` is not in ALLOWED_HOSTS: one WARNING line in the log (no traceback)
and the API's JSON error body, on every path."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client, override_settings


@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/api/", "/healthz"])
@override_settings(ALLOWED_HOSTS=["testserver"], DEBUG=False)
def test_a_host_not_allowed_is_one_warning_line_and_the_json_error_body(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It was an ERROR with a 15-line traceback, and pages outside /api/ answered with
    Django's HTML 400 page."""
    with caplog.at_level(logging.INFO):
        response = Client(HTTP_HOST="evil.example").get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["code"] == "invalid_request"
    assert b"<html" not in response.content.lower()
    records = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert len(records) == 1
    assert records[0].levelname == "WARNING"
    assert records[0].exc_info is None
    assert "evil.example" in records[0].getMessage()
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@override_settings(ALLOWED_HOSTS=["testserver"], DEBUG=False)
def test_an_allowed_host_still_reaches_the_pages(client: Client) -> None:
    assert client.get("/healthz").status_code in (200, 503)
