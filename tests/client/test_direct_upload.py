"""Uploads to a plain-HTTP server: the body written by `sendfile` is the body httpx would
send, a file that shrinks fails the upload, and the server's answer (even one sent before the
body was read) or its silence reads as httpx's would."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from yoyaku_client.direct import direct_possible, send_request
from yoyaku_client.multipart import SENDFILE_CHUNK, FilePart, MultipartStream


def _stream(tmp_path: Path, data: bytes, progress: list[tuple[int, int]]) -> MultipartStream:
    path = tmp_path / "part.py"
    path.write_bytes(data)
    return MultipartStream(
        "b0undary",
        [("entrypoint", "main.py")],
        [FilePart(path, "p.py")],
        lambda sent, total: progress.append((sent, total)),
    )


def test_the_body_sent_by_sendfile_is_the_body_iterated(tmp_path: Path) -> None:
    data = os.urandom(SENDFILE_CHUNK + 12345)
    reports: list[tuple[int, int]] = []
    stream = _stream(tmp_path, data, reports)
    left, right = socket.socketpair()
    received = bytearray()
    reader = threading.Thread(target=lambda: _drain(right, received))
    reader.start()
    stream.send_to(left)
    left.close()
    reader.join()
    right.close()
    assert bytes(received) == b"".join(_stream(tmp_path, data, []))
    assert len(received) == stream.length
    assert reports[0] == (0, stream.length)
    assert reports[-1] == (stream.length, stream.length)


def test_a_file_that_shrinks_while_it_is_sent_fails_the_upload(tmp_path: Path) -> None:
    stream = _stream(tmp_path, os.urandom(1000), [])
    (tmp_path / "part.py").write_bytes(b"short")  # after the length was announced
    left, right = socket.socketpair()
    received = bytearray()
    reader = threading.Thread(target=lambda: _drain(right, received))
    reader.start()
    with pytest.raises(OSError, match="shrank while it was being sent"):
        stream.send_to(left)
    left.close()
    reader.join()
    right.close()
    right.close()


def test_an_answer_sent_before_the_body_was_read_is_the_answer(tmp_path: Path) -> None:
    def refuse(conn: socket.socket) -> None:
        conn.recv(1024)  # the head only
        body = b'{"code":"request_too_large"}'
        conn.sendall(
            b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        conn.shutdown(socket.SHUT_WR)
        conn.close()

    with _Server(refuse) as url:
        request = httpx.Request("POST", f"{url}/api/submissions/", headers={"X-A": "1"})
        stream = _stream(tmp_path, os.urandom(8 * SENDFILE_CHUNK), [])
        response = send_request(request, stream, httpx.Timeout(5.0))
    assert response.status_code == 413
    assert response.json() == {"code": "request_too_large"}


def test_a_connection_closed_without_an_answer_reads_as_httpx_says_it(tmp_path: Path) -> None:
    def hang_up(conn: socket.socket) -> None:
        _drain(conn, bytearray(), until=b"--b0undary--\r\n")
        conn.close()

    with _Server(hang_up) as url:
        request = httpx.Request("POST", f"{url}/api/submissions/")
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            send_request(request, _stream(tmp_path, b"x = 1\n", []), httpx.Timeout(5.0))


def test_a_refused_connection_is_a_connect_error(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    request = httpx.Request("POST", f"http://127.0.0.1:{port}/api/submissions/")
    with pytest.raises(httpx.ConnectError):
        send_request(request, _stream(tmp_path, b"x = 1\n", []), httpx.Timeout(5.0))


def test_only_plain_http_without_a_proxy_is_sent_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert direct_possible("http://127.0.0.1:8000")
    assert not direct_possible("https://yoyaku.example")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not direct_possible("http://127.0.0.1:8000")


def _drain(conn: socket.socket, into: bytearray, until: bytes | None = None) -> None:
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            return
        into += chunk
        if until is not None and into.endswith(until):
            return


class _Server:
    """A one-connection server on loopback whose `handle` plays the other side."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.handle = handle
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            self.handle(conn)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.thread.join(timeout=10)
        self.listener.close()
