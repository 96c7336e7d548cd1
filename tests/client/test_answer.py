"""A direct request's answer is read as `http.client` reads it (`yoyaku_client.answer`): the
same status, headers and body for every way a body can end, the same refusals for what is
not an HTTP/1.x answer, and no more than the limit."""

from __future__ import annotations

import http.client
import io
import socket

import pytest

from yoyaku_client.answer import Disconnected, ProtocolError, TooLarge, read_answer

JSON = b'{"ok": true}'
ANSWERS = {
    "a length": b"HTTP/1.1 201 Created\r\nContent-Length: 12\r\nX-A: 1\r\n\r\n" + JSON,
    "chunked, extensions, a trailer": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=x\r\n" + JSON[:5] + b"\r\n7\r\n" + JSON[5:] + b"\r\n0\r\nX-T: 1\r\n\r\n"
    ),
    "to the end of the connection": b"HTTP/1.0 200 OK\r\nContent-Type: a/b\r\n\r\n" + JSON,
    "an invalid length": b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n" + JSON,
    "a negative length": b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n" + JSON,
    "100 Continue first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + JSON
    ),
    "204": b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
    "a folded header": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 2\r\n\r\n{}",
    "bare line feeds": b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
    "latin-1 in a header": "HTTP/1.1 409 Conflict\r\nX-A: é\r\nContent-Length: 2\r\n\r\n{}".encode(
        "latin-1"
    ),
}
REFUSED = {
    "nothing": b"",
    "no status line": b"\r\n\r\n{}",
    "a malformed status": b"HTTP/1.1 20O OK\r\nContent-Length: 2\r\n\r\n{}",
    "not HTTP": b"SSH-2.0-OpenSSH\r\n\r\n",
    "a line too long": b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70000 + b"\r\n\r\n",
    "too many headers": b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n",
    "a short body": b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + JSON,
    "a bad chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "a cut chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
}


def _theirs(data: bytes, method: str) -> tuple[int, list[tuple[str, str]], bytes]:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(data)
        left.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(right, method=method)
        response.begin()
        return response.status, response.getheaders(), response.read()


def _ours(
    data: bytes, method: str, limit: int = 1 << 20
) -> tuple[int, list[tuple[str, str]], bytes]:
    return read_answer(io.BufferedReader(io.BytesIO(data)), method, limit)


@pytest.mark.parametrize("name", sorted(ANSWERS))
@pytest.mark.parametrize("method", ["GET", "POST", "HEAD"])
def test_an_answer_reads_as_http_client_reads_it(name: str, method: str) -> None:
    status, headers, body = _ours(ANSWERS[name], method)
    expected = _theirs(ANSWERS[name], method)
    assert (status, body) == (expected[0], expected[2])
    assert headers == [(k, " ".join(v.split())) for k, v in expected[1]] or headers == expected[1]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_not_an_answer_is_refused_as_http_client_refuses_it(name: str) -> None:
    error = Disconnected if name == "nothing" else ProtocolError
    with pytest.raises(error):
        _ours(REFUSED[name], "GET")
    with pytest.raises((http.client.HTTPException, ValueError)):
        _theirs(REFUSED[name], "GET")


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n" + b"x" * 11,
        b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 11,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n"
        + b"x" * 11
        + b"\r\n0\r\n\r\n",
    ],
)
def test_a_body_over_the_limit_is_refused(data: bytes) -> None:
    with pytest.raises(TooLarge):
        _ours(data, "GET", limit=10)
    assert _ours(data, "GET", limit=11)[2] == b"x" * 11
