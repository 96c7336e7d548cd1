"""Request bodies against the web process started as the Procfile starts it: only an upload
route with a credential takes a large body; everything else, and an upload without credentials,
is refused before the body is read (no `100 Continue` first), a chunked body is cut at the
limit, and a worker holds at most REQUEST_SPOOL_BUDGET bytes of bodies at once (503 with
Retry-After past it). The head alone: a server-written refusal ends the connection, an
absolute-form target reaches Django as its path, HTTP/1.1 without Host is a 400."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.urls import get_resolver
from django.urls.resolvers import URLPattern, URLResolver

from apps.benchmarks.api.parsers import BundleMultiPartParser
from apps.submissions.api.parsers import SingleFileMultiPartParser, StreamingMultiPartParser
from tests.processes import Start, read_all, start_procfile_web

GIB = 1024**3
HOST = b"Host: 127.0.0.1\r\n"


def _head_and_body(sock: socket.socket, seconds: float) -> tuple[bytes, dict[str, Any]]:
    """The first response on `sock` (head, JSON body), read without waiting for the close."""
    sock.settimeout(seconds)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        ).split(b":")[1]
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        rest += chunk
    body: dict[str, Any] = json.loads(rest[:length])
    return head, body


def _declaring(port: int, request_line: bytes, size: int, *extra: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        request_line
        + HOST
        + b"Content-Type: multipart/form-data; boundary=x\r\n"
        + b"".join(extra)
        + b"Content-Length: %d\r\n\r\n" % size
    )
    return sock


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_body_declaring_2_gib_is_refused_before_a_byte_is_sent_and_without_100_continue(
    start_process: Start,
) -> None:
    port, _ = start_procfile_web(start_process)
    expect = b"Expect: 100-continue\r\n"
    cases = [
        # A route that takes no upload: the small limit, whoever asks.
        (b"POST /api/jobs/ HTTP/1.1\r\n", (expect, b"Authorization: Bearer x\r\n"), 413),
        # The upload routes without a credential: 401 before the body.
        (b"POST /api/submissions/ HTTP/1.1\r\n", (expect,), 401),
        (b"POST /api/submissions/%s/files/ HTTP/1.1\r\n" % (b"a" * 32), (expect,), 401),
        # With one (valid or not: the server does not look it up), the large limit.
        (b"POST /api/submissions/ HTTP/1.1\r\n", (expect, b"Authorization: Bearer x\r\n"), 413),
    ]
    for request_line, extra, status in cases:
        started = time.monotonic()
        with _declaring(port, request_line, 2 * GIB, *extra) as sock:
            head, body = _head_and_body(sock, 5)
        assert time.monotonic() - started < 5
        assert head.startswith(b"HTTP/1.1 %d" % status), (request_line, head)
        assert b"100 Continue" not in head
        assert b"Connection: close" in head
        if status == 413:
            assert body["code"] == "request_too_large"
            upload = b"submissions" in request_line
            assert body["max_request_size"] == (
                settings.MAX_REQUEST_BODY_SIZE if upload else settings.MAX_REQUEST_BODY_SIZE_DEFAULT
            )
        else:
            assert body["code"] == "not_authenticated"
            assert b"WWW-Authenticate: Bearer" in head


def _chunked(port: int, path: bytes, size: int, *extra: bytes) -> bytes:
    """POST `size` bytes as 16 KiB chunks, stopping early once the server answers; the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST %s HTTP/1.1\r\n" % path
            + HOST
            + b"Connection: close\r\nContent-Type: application/json\r\n"
            + b"".join(extra)
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sent, piece = 0, b" " * 16384
        try:
            while sent < size:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # answered and closed while sending
        return read_all(sock, 10)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_cut_at_the_limit_of_its_route(start_process: Start) -> None:
    limit = 64 * 1024
    port, _ = start_procfile_web(start_process, MAX_REQUEST_BODY_SIZE_DEFAULT=str(limit))
    bearer = b"Authorization: Bearer x\r\n"

    answer = _chunked(port, b"/api/jobs/", 4 * limit, bearer)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["max_request_size"] == limit

    answer = _chunked(port, b"/api/submissions/", 4 * limit)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["max_request_size"] == limit

    # Under the limit the body reaches Django (anonymous: its own 401, without the limit).
    answer = _chunked(port, b"/api/jobs/", limit // 2)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert "max_request_size" not in json.loads(answer.partition(b"\r\n\r\n")[2])
    # Over it on an upload route with a credential: Django decides (the token is no token).
    answer = _chunked(port, b"/api/submissions/", 2 * limit, bearer)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == "authentication_failed"


@contextmanager
def _holding(port: int, count: int, declared: int, sent: int) -> Iterator[list[socket.socket]]:
    """`count` connections that declare `declared` bytes and send `sent` of them."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(_declaring(port, b"POST /api/jobs/ HTTP/1.1\r\n", declared))
            sock.sendall(b" " * sent)
            sockets.append(sock)
        yield sockets


def _declared_answer(port: int, declared: int) -> bytes:
    """The head answered to `declared` bytes announced and none sent ('' while it waits)."""
    with _declaring(port, b"POST /api/jobs/ HTTP/1.1\r\n", declared) as sock:
        sock.settimeout(1)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bodies_past_the_spool_budget_are_a_503_with_retry_after_until_the_held_ones_end(
    start_process: Start,
) -> None:
    port, _ = start_procfile_web(
        start_process,
        REQUEST_SPOOL_BUDGET="1000000",
        MAX_REQUEST_BODY_SIZE_DEFAULT="600000",
        REQUEST_BODY_TIMEOUT="60",
        WEB_CONCURRENCY="1",  # the budget is a worker's
    )
    with _holding(port, 2, 500_000, 400_000):
        # 800,000 bytes held: a body declaring 300,000 is refused before it is read.
        deadline = time.monotonic() + 10
        while not (answer := _declared_answer(port, 300_000)).startswith(b"HTTP/1.1 503"):
            assert time.monotonic() < deadline, answer[:200]
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"Retry-After: 5" in head
        assert json.loads(body)["code"] == "service_unavailable"
        # A chunked body is cut when its bytes pass the budget.
        answer = _chunked(port, b"/api/jobs/", 300_000)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        # A request without a body is served.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")
            assert read_all(sock, 10).startswith(b"HTTP/1.1 200")
    # The holders left: their bytes are given back, the same body reaches Django.
    deadline = time.monotonic() + 10
    while not (answer := _chunked(port, b"/api/jobs/", 300_000)).startswith(b"HTTP/1.1 401"):
        assert time.monotonic() < deadline, answer[:200]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_body_sent_fast_then_stalled_is_cut_and_gives_its_bytes_back(
    start_process: Start,
) -> None:
    """The minimum rate banked no credit: 400,000 bytes at once earned a body about 390 s of
    silence at 1024 bytes/s, so anonymous connections held the spool budget (every body
    refused 503) for minutes, and a made-up token on an upload route for days."""
    port, _ = start_procfile_web(
        start_process,
        REQUEST_SPOOL_BUDGET="1000000",
        MAX_REQUEST_BODY_SIZE_DEFAULT="600000",
        REQUEST_BODY_TIMEOUT="1",
        WEB_CONCURRENCY="1",  # the budget is a worker's
    )
    with _holding(port, 2, 400_001, 400_000) as holders:
        started = time.monotonic()
        for sock in holders:
            head, body = _head_and_body(sock, 10)
            assert head.startswith(b"HTTP/1.1 408"), head
            assert body["code"] == "request_timeout"
        assert time.monotonic() - started < 5
        # Their bytes are given back: a body the held ones left no room for reaches Django.
        deadline = time.monotonic() + 5
        while not (answer := _chunked(port, b"/api/jobs/", 300_000)).startswith(b"HTTP/1.1 401"):
            assert time.monotonic() < deadline, answer[:200]


def _upload_holding(port: int, size: int) -> socket.socket:
    """An upload with a made-up token sending `size` bytes of a body one byte longer."""
    sock = _declaring(
        port, b"POST /api/submissions/ HTTP/1.1\r\n", size + 1, b"Authorization: Bearer x\r\n"
    )
    with contextlib.suppress(OSError):  # answered and closed while sending
        sock.sendall(b" " * size)
    return sock


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_upload_with_a_made_up_token_cannot_take_the_budget_small_bodies_need(
    start_process: Start,
) -> None:
    """One upload route body with `Authorization: Bearer x` could be charged the whole budget
    (its default is one largest upload): every other body, an API call's or a login form's,
    was refused 503 for as long as the client kept the body coming."""
    port, _ = start_procfile_web(
        start_process,
        REQUEST_SPOOL_BUDGET="1000000",
        REQUEST_SPOOL_RESERVE="300000",
        MAX_REQUEST_BODY_SIZE="2000000",
        MAX_REQUEST_BODY_SIZE_DEFAULT="100000",
        REQUEST_BODY_TIMEOUT="60",
        WEB_CONCURRENCY="1",  # the budget is a worker's
    )
    with _upload_holding(port, 950_000) as greedy:
        head, body = _head_and_body(greedy, 10)
        assert head.startswith(b"HTTP/1.1 503"), head
        assert body["code"] == "service_unavailable"
    with _upload_holding(port, 650_000) as first, _upload_holding(port, 60_000) as second:
        # Uploads share what the reserve leaves; past it (whichever body's bytes land last), 503
        # before the reserve is touched.
        answers = []
        for sock in (first, second):
            try:
                answers.append(_head_and_body(sock, 2)[0])
            except TimeoutError:
                answers.append(b"")
        assert [head[:12] for head in answers if head] == [b"HTTP/1.1 503"], answers
        # Bodies within the default limit still have the reserve.
        for _ in range(2):
            answer = _chunked(port, b"/api/jobs/", 90_000)
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_head_alone_417_and_400_end_the_connection_and_absolute_targets_become_paths(
    start_process: Start,
) -> None:
    port, _ = start_procfile_web(start_process)
    healthz = b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n"
    refused = [
        (b"GET /healthz HTTP/1.1\r\n" + HOST + b"Expect: foo\r\n\r\n", 417, "expectation_failed"),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400, "invalid_request"),  # no Host
        (b"GET /healthz HTTP/1.1\r\n" + HOST + HOST + b"\r\n", 400, "invalid_request"),
    ]
    for request, status, code in refused:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request + healthz)  # a pipelined request that must not be served
            answer = read_all(sock, 10)
        assert answer.startswith(b"HTTP/1.1 %d" % status), (request, answer[:200])
        assert len(re.findall(rb"HTTP/1\.1 \d{3} ", answer)) == 1, answer
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == code

    cases = [
        (b"GET http://127.0.0.1/healthz HTTP/1.1\r\n" + HOST, b"HTTP/1.1 200"),
        (b"GET http://elsewhere.example/api/me/?a=1 HTTP/1.1\r\n" + HOST, b"HTTP/1.1 401"),
        (b"GET /healthz HTTP/1.0\r\n", b"HTTP/1.0 200"),  # HTTP/1.0 needs no Host
    ]
    for request, expected in cases:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request + b"Connection: close\r\n\r\n")
            answer = read_all(sock, 10)
        assert answer.startswith(expected), (request, answer[:300])
    # The upload route is found from the path too: anonymous, 401 before the body.
    with _declaring(port, b"POST HTTP://x/api/submissions/ HTTP/1.1\r\n", 2 * GIB) as sock:
        head, body = _head_and_body(sock, 5)
    assert head.startswith(b"HTTP/1.1 401"), head
    assert body["max_request_size"] == settings.MAX_REQUEST_BODY_SIZE_DEFAULT


def _named_patterns(
    patterns: list[URLPattern | URLResolver],
) -> Iterator[URLPattern]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _named_patterns(pattern.url_patterns)
        else:
            yield pattern


def test_the_upload_url_names_are_exactly_the_routes_whose_views_stream_files() -> None:
    upload_parsers = {StreamingMultiPartParser, SingleFileMultiPartParser, BundleMultiPartParser}
    streaming = {
        pattern.name
        for pattern in _named_patterns(get_resolver().url_patterns)
        if upload_parsers
        & set(getattr(getattr(pattern.callback, "view_class", None), "parser_classes", []))
        # Resumable uploads read the raw body as a stream themselves (no parser).
        or getattr(getattr(pattern.callback, "view_class", None), "streams_request_body", False)
    }
    assert streaming == set(settings.UPLOAD_URL_NAMES)
