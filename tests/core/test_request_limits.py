"""Request heads past the limits answer in the one JSON error body: the app's own 414 / 431
(in-process and behind a real gunicorn), and gunicorn's answer past its own, higher limits."""

from __future__ import annotations

import json
import socket
from http import HTTPStatus
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.processes import Start, http_request, start_gunicorn


def _json(body: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(body)
    return data


@pytest.mark.django_db
def test_a_url_over_max_url_length_is_a_json_414(client: Client) -> None:
    path = "/api/jobs/?status=" + "q" * settings.MAX_URL_LENGTH
    response = client.get(path)
    assert response.status_code == HTTPStatus.REQUEST_URI_TOO_LONG
    assert response.json()["code"] == "uri_too_long"
    assert response.json()["max_url_length"] == settings.MAX_URL_LENGTH


@pytest.mark.django_db
def test_a_url_at_max_url_length_goes_through(client: Client) -> None:
    path = "/api/jobs/?x="
    path += "q" * (settings.MAX_URL_LENGTH - len(path))
    response = client.get(path)
    assert response.status_code == HTTPStatus.UNAUTHORIZED  # reached the view


@pytest.mark.django_db
def test_too_many_header_lines_is_a_json_431(client: Client) -> None:
    headers = {f"X-Extra-{n}": "1" for n in range(settings.MAX_REQUEST_HEADERS + 1)}
    response = client.get("/api/me/", headers=headers)
    assert response.status_code == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
    assert response.json()["code"] == "request_header_fields_too_large"


@pytest.mark.django_db
def test_a_header_line_over_the_size_limit_is_a_json_431(client: Client) -> None:
    response = client.get("/api/me/", headers={"X-Big": "b" * settings.MAX_REQUEST_HEADER_SIZE})
    assert response.status_code == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_behind_gunicorn_the_app_answers_long_heads_and_gunicorn_answers_json_beyond(
    start_process: Start,
) -> None:
    port, _ = start_gunicorn(start_process, "web", workers=1)

    # Over gunicorn's default request line (4094) but under the configured one: the app's 414.
    status, headers, body = http_request(port, "GET", "/api/jobs/?status=" + "q" * 5000)
    assert status == HTTPStatus.REQUEST_URI_TOO_LONG
    assert headers["Content-Type"].startswith("application/json")
    assert _json(body)["code"] == "uri_too_long"

    # Over the default 100 header lines: the app's 431, not gunicorn's.
    many = {f"X-Extra-{n}": "1" for n in range(150)}
    status, headers, body = http_request(port, "GET", "/api/me/", None, **many)
    assert status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
    assert _json(body)["code"] == "request_header_fields_too_large"

    # Past gunicorn's own maximum request line (8190 bytes): gunicorn answers, in the same body.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /api/?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414")
    assert b"Content-Type: application/json" in head
    assert _json(payload) == {
        "success": False,
        "code": "uri_too_long",
        "error": _json(payload)["error"],
    }


def _raw(port: int, data: bytes) -> tuple[bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    return head, payload


@pytest.mark.django_db(transaction=True)
def test_behind_gunicorn_a_malformed_head_is_a_json_error_never_html_or_a_500(
    start_process: Start,
) -> None:
    port, _ = start_gunicorn(start_process, "web", workers=1)
    host = b"Host: 127.0.0.1\r\nConnection: close\r\n"
    post = b"POST /api/jobs/ HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
    cases = [
        (b"G@T /api/ HTTP/1.1\r\n" + host + b"\r\n", 400, "invalid_request"),
        (b"GET /api/ HTTP/9.9\r\n" + host + b"\r\n", 400, "invalid_request"),
        (b"GET /api/\r\n\r\n", 400, "invalid_request"),  # HTTP/0.9
        (b"GET /api/ HTTP/1.1\r\n" + host + b"X-A: a\x00b\r\n\r\n", 400, "invalid_request"),
        (b"GET /api/ HTTP/1.1\r\n" + host + b"X-A: a\r\n b\r\n\r\n", 400, "invalid_request"),
        (post + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "invalid_request"),
        (post + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, None),
        (post + b"Content-Length: -1\r\n\r\n", 400, "invalid_request"),
        (post + b"Transfer-Encoding: gzip\r\n\r\n{}", 400, "invalid_request"),
        (post + b"Expect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417, "expectation_failed"),
        (
            b"GET /api/ HTTP/1.1\r\n"
            + host
            + b"".join(b"X-%d: 1\r\n" % n for n in range(300))
            + b"\r\n",
            431,
            "request_header_fields_too_large",
        ),
        # A quoted cookie whose octal escape Django unquotes into a NUL: no session, no 500.
        (
            b"GET /api/me/ HTTP/1.1\r\n" + host + b'Cookie: sessionid="abcdefgh\\000ijkl"\r\n\r\n',
            401,
            "not_authenticated",
        ),
    ]
    for request, status, code in cases:
        head, payload = _raw(port, request)
        assert head.startswith(b"HTTP/1.1 %d" % status), (request[:60], head)
        assert b"Content-Type: application/json" in head, (request[:60], head)
        body = _json(payload)
        assert body["success"] is False
        if code:
            assert body["code"] == code, (request[:60], body)
