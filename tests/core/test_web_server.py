"""The web worker (config/server) serves what sync workers served: a large streamed file whole,
a HEAD without a body, a body in several pieces followed by a kept-alive request, a chunked
body."""

from __future__ import annotations

import hashlib
import json
import socket
from http import HTTPStatus
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

from tests.processes import Start, http_request, read_all, start_procfile_web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BUNDLE = "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"


def test_a_large_static_file_arrives_whole_and_head_has_no_body(start_process: Start) -> None:
    port, _ = start_procfile_web(start_process)
    expected = Path(str(finders.find(BUNDLE))).read_bytes()
    assert len(expected) > 1024 * 1024  # many of the response's chunks

    status, headers, body = http_request(port, "GET", f"/static/{BUNDLE}")
    assert status == HTTPStatus.OK
    assert hashlib.sha256(body).digest() == hashlib.sha256(expected).digest()
    assert int(headers["Content-Length"]) == len(expected)

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"HEAD /static/{BUNDLE} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + b"Connection: close\r\n\r\n"
        )
        answer = read_all(sock, 10)
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert rest == b""


def test_bodies_in_pieces_and_chunked_reach_the_app_and_kept_alive_requests_follow(
    start_process: Start,
) -> None:
    port, _ = start_procfile_web(start_process)
    payload = json.dumps({"submission_id": "nope"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # Two requests on one connection; the first body in three pieces.
        sock.sendall(
            b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(payload)
        )
        for piece in (payload[:3], payload[3:9], payload[9:]):
            sock.sendall(piece)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = read_all(sock, 10)
    # Anonymous: the API answers 401 to the first (its body was read whole, the connection
    # stayed in step), then /healthz 200.
    assert answer.startswith(b"HTTP/1.1 401")
    assert answer.count(b"HTTP/1.1 ") == 2
    assert b"HTTP/1.1 200" in answer

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b'5\r\n{"a":\r\n3\r\n 1}\r\n0\r\n\r\n'
        )
        answer = read_all(sock, 10)
    assert answer.startswith(b"HTTP/1.1 401")
