"""More of a hostile plain-HTTP server against a direct request's answer (`yoyaku_client.answer`,
`yoyaku_client.direct`), on loopback: an answer split one byte per segment, 1xx answers before
it (endless ones too), framing that conflicts (`Content-Length` with chunked, repeated,
overflowing chunk sizes), endless trailers or folded lines, NUL and CR inside values, a close
mid-body, a status of non-ASCII digits, a retry delay no float holds, an answer before the
request was sent whole, a cut answer retried. Each ends in the client's own errors (an
`ApiError` with the server's words, or a `TransportError`), within a bound, never as a success
the server did not give, never as a traceback."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.client.hostile import Handle, Hostile, endless
from tests.client.test_attacks_direct import run
from yoyaku_client.answer import ProtocolError, read_answer
from yoyaku_client.errors import ApiError, TransportError
from yoyaku_client.transport import RetryPolicy, Transport

NOT_FOUND = b'{"error": "Not found.", "code": "not_found"}'
HEAD_404 = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
LENGTH_404 = HEAD_404 + f"Content-Length: {len(NOT_FOUND)}\r\n\r\n".encode() + NOT_FOUND


def _send(data: bytes, then_wait: float = 0.0) -> Handle:
    def handle(conn: socket.socket) -> None:
        conn.sendall(data)
        time.sleep(then_wait)

    return handle


def _bytewise(data: bytes) -> Handle:
    """Each byte in a segment of its own (Nagle off): every read of the client gets one."""

    def handle(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])

    return handle


def _endless(opening: bytes, line: bytes, seconds: float = 4.0) -> Handle:
    return endless(opening, line, seconds, copies=16)


def _get(url: str, timeout: float = 1.0) -> tuple[object, float]:
    """`GET /api/quotas/me/` once; what it gave (the response or the client's error) and
    the seconds it took. Any other exception fails the test."""
    transport = Transport(url, token="tok", retry=RetryPolicy.none(), timeout=timeout)
    started = time.monotonic()
    try:
        return transport.request("GET", "/quotas/me/"), time.monotonic() - started
    except (ApiError, TransportError) as exc:
        return exc, time.monotonic() - started
    finally:
        transport.close()


# The server's 404 read whole and right: the client's error carries its code.
READ_RIGHT: dict[str, Handle] = {
    "one byte per segment": _bytewise(LENGTH_404),
    "one byte per segment, chunked": _bytewise(
        HEAD_404
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + f"{len(NOT_FOUND):x}\r\n".encode()
        + NOT_FOUND
        + b"\r\n0\r\n\r\n"
    ),
    "100 Continue and 103 Early Hints first": _send(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n"
        b"\r\n" + LENGTH_404
    ),
    "chunked beside a lying Content-Length": _send(
        HEAD_404
        + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(NOT_FOUND):x}\r\n".encode()
        + NOT_FOUND
        + b"\r\n0\r\n\r\n"
    ),
    "a trailer": _send(
        HEAD_404
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + f"{len(NOT_FOUND):x}\r\n".encode()
        + NOT_FOUND
        + b"\r\n0\r\nX-Trailer: 1\r\nContent-Length: 0\r\n\r\n"
    ),
    "bare line feeds": _send(LENGTH_404.replace(b"\r\n", b"\n")),
    "NUL and CR inside header values": _send(
        HEAD_404
        + b"X-A: a\0b\rc\r\nRetry-After: 1\r5\r\n"
        + f"Content-Length: {len(NOT_FOUND)}\r\n\r\n".encode()
        + NOT_FOUND
    ),
    "bytes after the body, a second answer": _send(LENGTH_404 + b"HTTP/1.1 200 OK\r\n\r\n{}"),
}


@pytest.mark.parametrize("name", sorted(READ_RIGHT))
def test_an_odd_but_whole_answer_is_read_right(
    name: str, hostile: Callable[[Handle], Hostile]
) -> None:
    server = hostile(READ_RIGHT[name])
    outcome, _ = _get(server.url)
    assert isinstance(outcome, ApiError), outcome
    assert (outcome.status, outcome.code) == (404, "not_found")
    server.close()
    assert len(server.received) == 1


# No answer the client can take: a TransportError, within the timeout and a margin.
NO_ANSWER: dict[str, Handle] = {
    "a status of non-ASCII digits": _send(
        "HTTP/1.1 2²3 OK\r\nContent-Length: 2\r\n\r\n{}".encode("latin-1")
    ),
    "a status of superscripts": _send(
        "HTTP/1.1 ²³¹ OK\r\nContent-Length: 2\r\n\r\n{}".encode("latin-1")
    ),
    "endless 100 Continue": _endless(b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
    "endless folded lines": _endless(
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n", b" " + b"a" * 4000 + b"\r\n"
    ),
    "endless trailer": _endless(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n", b"X-T: 1\r\n"
    ),
    "a chunk size past 2**64": _send(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\n{}",
        then_wait=2,
    ),
    "junk after a chunk size": _send(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 junk\r\n{}\r\n0\r\n\r\n"
    ),
    "a chunk longer than its size": _send(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n0\r\n\r\n"
    ),
    "a close mid-body": _send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"),
    "a close mid-chunk": _send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{}"),
    "a close before the last chunk": _send(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n"
    ),
    "a close after the status line": _send(b"HTTP/1.1 200 OK\r\n"),
    "a 1xx and then nothing": _send(b"HTTP/1.1 100 Continue\r\n\r\n"),
    "HTTP/0.9 (a body, no head)": _send(b'{"ok": true}'),
}


@pytest.mark.parametrize("name", sorted(NO_ANSWER))
def test_what_cannot_be_read_is_the_client_s_transport_error(
    name: str, hostile: Callable[[Handle], Hostile]
) -> None:
    server = hostile(NO_ANSWER[name])
    outcome, seconds = _get(server.url)
    assert isinstance(outcome, TransportError), outcome
    assert seconds < 1.0 + 5, seconds
    server.close()
    assert len(server.received) == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": "Slow down.", "code": "throttled", "retry_after": 1' + b"0" * 400 + b"}",
        b'{"error": "Slow down.", "code": "throttled", "retry_after": 1e999}',
        b'{"error": "Slow down.", "code": "throttled", "retry_after": "nan"}',
    ],
)
def test_a_retry_delay_no_float_holds_is_an_api_error(
    body: bytes, hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    """A 429 whose delay overflows a float: the command says the server's error, in JSON
    a reader can parse, without a traceback."""
    answer = (
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: "
        + "¹".encode("latin-1")
        + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    server = hostile(_send(answer))
    code, stdout, stderr, seconds = run(server.url, tmp_path, "quota")
    assert "Traceback" not in stdout + stderr, stderr
    assert code == 1, (stdout, stderr)
    assert json.loads(stdout)["code"] == "throttled", stdout
    assert seconds < 10


def test_a_cut_answer_is_retried_on_a_connection_of_its_own(
    hostile: Callable[[Handle], Hostile],
) -> None:
    """No keep-alive: the first connection's partial answer is never read as (a part of) the
    second's; a safe request is sent again on a new connection, one request on each."""
    served: list[int] = []

    def handle(conn: socket.socket) -> None:
        served.append(1)
        if len(served) == 1:
            conn.sendall(HEAD_404 + b"Content-Length: 500\r\n\r\n" + NOT_FOUND[:10])
        else:
            conn.sendall(LENGTH_404)

    server = hostile(handle)
    transport = Transport(
        server.url, token="tok", retry=RetryPolicy(max_attempts=2), sleep=lambda _: None
    )
    with pytest.raises(ApiError) as caught:
        transport.request("GET", "/quotas/me/")
    transport.close()
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    server.close()
    assert len(server.received) == 2
    assert all(request.count(b" HTTP/1.1\r\n") == 1 for request in server.received)
    assert all(b"Connection: close\r\n" in request for request in server.received)


class _Refuser:
    """A server that reads a request's head and a little of its body, answers 413 and
    closes at once, with the rest of the body unread (so the client's writes fail)."""

    def __init__(self, answer: bytes) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.answer = answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            conn.sendall(self.answer)

    def close(self) -> None:
        self.thread.join(10)
        self.listener.close()


def test_an_answer_before_the_request_was_sent_whole_is_not_a_success() -> None:
    body = b'{"error": "Too large.", "code": "too_large"}'
    refuser = _Refuser(
        b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    transport = Transport(refuser.url, token="tok", retry=RetryPolicy.none(), timeout=5.0)
    with pytest.raises((ApiError, TransportError)) as caught:
        transport.request("POST", "/submissions/", json={"note": "x" * (16 << 20)})
    transport.close()
    refuser.close()
    if isinstance(caught.value, ApiError):  # the answer read before the reset: the server's
        assert (caught.value.status, caught.value.code) == (413, "too_large")


def _theirs(data: bytes) -> tuple[int, bytes]:
    left, right = socket.socketpair()

    def send() -> None:
        with contextlib.suppress(OSError):  # the reader may stop first
            left.sendall(data)
            left.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)  # larger than the pair's buffers
    sender.start()
    with left, right:
        try:
            response = http.client.HTTPResponse(right, method="GET")
            response.begin()
            return response.status, response.read()
        finally:
            right.shutdown(socket.SHUT_RDWR)
            sender.join(10)


def _ours(data: bytes) -> tuple[int, bytes]:
    status, _, body = read_answer(io.BufferedReader(io.BytesIO(data)), "GET", 1 << 20)
    return status, body


def test_folded_lines_count_toward_the_head_s_limit_as_http_client_counts_them() -> None:
    """Else an endless run of folded lines grew one header's value without a bound (each
    line copying the whole value: memory and time quadratic in what the server sends)."""
    folded = b"HTTP/1.1 200 OK\r\nX-A: 1\r\n" + b" " + b"a" * 60000 + b"\r\n"
    assert _ours(folded + b"Content-Length: 0\r\n\r\n") == (200, b"")
    endless = b"HTTP/1.1 200 OK\r\nX-A: 1\r\n" + (b" " + b"a" * 60000 + b"\r\n") * 101 + b"\r\n"
    with pytest.raises(ProtocolError):
        _ours(endless)
    with pytest.raises(http.client.HTTPException):
        _theirs(endless)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: applic",
        b"HTTP/1.1 100 Continue\r\nX-A: 1\r\n",
    ],
)
def test_a_head_cut_by_the_connection_s_end_is_not_an_answer(data: bytes) -> None:
    """`http.client` reads a 200 with an empty body here: a cut answer taken as a success."""
    with pytest.raises(ProtocolError):
        _ours(data)


def test_conflicting_lengths_read_as_http_client_reads_them() -> None:
    """The first `Content-Length` frames the body; the rest is never read as anything (the
    connection is the request's alone, and closed)."""
    data = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}xxxxxxx"
    assert _ours(data) == _theirs(data) == (404, b"{}")


@pytest.mark.parametrize("offset", ["²", "¹²³", "1²"])
def test_an_upload_offset_of_non_ascii_digits_is_not_a_number(
    offset: str, hostile: Callable[[Handle], Hostile]
) -> None:
    """`str.isdigit` holds for them and `int` refuses "²": the offset is then the body's."""
    from yoyaku_client import Client

    head = (
        f"HTTP/1.1 200 OK\r\nUpload-Offset: {offset}\r\nUpload-Length: {offset}\r\n"
        "Upload-Complete: ?0\r\nContent-Length: 0\r\n\r\n"
    )
    server = hostile(_send(head.encode("latin-1")))
    client = Client(server.url, token="tok", retry=RetryPolicy.none())
    status = client.upload_status("abc")
    client.close()
    assert (status.offset, status.length, status.complete) == (0, None, False)


@pytest.mark.parametrize("charset", ["idna", "undefined", "punycode"])
def test_an_error_in_a_charset_that_refuses_to_replace_is_the_server_s_error(
    charset: str, hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    """These codecs raise for `errors="replace"` (httpx's `text` raises for them too): the
    error body is read as UTF-8 instead of a traceback."""
    body = b"\xffbad gateway"
    answer = (
        f"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset={charset}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    server = hostile(_send(answer))
    code, stdout, stderr, seconds = run(server.url, tmp_path, "quota")
    assert "Traceback" not in stdout + stderr, stderr
    assert code == 1, (stdout, stderr)
    assert "bad gateway" in stdout.lower(), stdout
    assert seconds < 10
