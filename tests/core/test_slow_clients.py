"""Slow clients against the web process started exactly as the Procfile starts it: 200
connections from one address trickling their heads or bodies a byte at a time leave `/healthz`
answering in under a second; a head not complete within REQUEST_HEADER_TIMEOUT is dropped
though its bytes keep coming; a body too slow or too large is refused without a thread."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest

from tests.latency import served_within
from tests.processes import Start, http_request, read_all, start_procfile_web, stop

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ATTACKERS = 200


def healthz_seconds(port: int) -> float:
    started = time.monotonic()
    status, _, _ = http_request(port, "GET", "/healthz")
    assert status == HTTPStatus.OK
    return time.monotonic() - started


@contextlib.contextmanager
def trickling(port: int, opening: bytes, byte: bytes) -> Iterator[list[socket.socket]]:
    """ATTACKERS connections that send `opening`, then `byte` one at a time, each in turn, until
    the block ends. Yields the sockets (a reset or closed one is replaced by nothing)."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(ATTACKERS)]
    for sock in sockets:
        sock.sendall(opening)
    stopping = threading.Event()

    def trickle() -> None:
        while not stopping.is_set():
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.send(byte)
            stopping.wait(0.1)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield sockets
    finally:
        stopping.set()
        thread.join()
        for sock in sockets:
            sock.close()


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed nor answered the connection."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer's first byte, or b"" once closed
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def _healthz_answers_while_trickling(
    port: int, web: subprocess.Popen[bytes], opening: bytes, byte: bytes
) -> None:
    """While every attacker has sent part of its request and keeps sending more, `/healthz`
    answers five times in under a second each; then the web process stops cleanly."""
    with trickling(port, opening, byte) as sockets:
        time.sleep(1)
        served_within(1, lambda: [(HTTPStatus.OK, healthz_seconds(port)) for _ in range(5)])
        assert all(still_open(sock) for sock in sockets)
    stop(web)
    assert web.returncode == 0


HEAD = b"GET /api/me/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def test_healthz_answers_while_200_connections_trickle_their_heads(start_process: Start) -> None:
    # The deadline above the test's length: every attacker stays connected throughout.
    port, web = start_procfile_web(start_process, REQUEST_HEADER_TIMEOUT="120")
    _healthz_answers_while_trickling(port, web, HEAD, b"a")


def test_healthz_answers_while_200_connections_trickle_their_bodies(
    start_process: Start,
) -> None:
    port, web = start_procfile_web(start_process, REQUEST_BODY_TIMEOUT="120")
    opening = (
        b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    _healthz_answers_while_trickling(port, web, opening, b" ")


def test_a_head_not_complete_within_the_deadline_is_dropped_though_bytes_keep_coming(
    start_process: Start,
) -> None:
    port, _ = start_procfile_web(start_process, REQUEST_HEADER_TIMEOUT="2")
    # In time: a head trickled for about a second, then completed, is answered.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(HEAD)
        for _ in range(10):
            sock.sendall(b"b")
            time.sleep(0.1)
        sock.sendall(b"\r\nConnection: close\r\n\r\n")
        assert read_all(sock, 10).startswith(b"HTTP/1.1 401")

    # Too late: a byte every 0.1 s, for up to 20 s, never resets the deadline.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(HEAD)
        started = time.monotonic()
        dropped_after = None
        while time.monotonic() - started < 20:
            try:
                sock.sendall(b"c")
            except OSError:
                dropped_after = time.monotonic() - started
                break
            if not still_open(sock):
                dropped_after = time.monotonic() - started
                break
            time.sleep(0.1)
        assert dropped_after is not None, "the trickled head was never dropped"
        assert dropped_after >= 1.5, dropped_after  # the deadline, not some other refusal
        assert read_all(sock, 5) == b""  # dropped without an answer


def test_a_body_slower_than_the_minimum_rate_is_refused_and_one_too_large_is_never_read(
    start_process: Start, tmp_path: Path
) -> None:
    port, _ = start_procfile_web(start_process, REQUEST_BODY_TIMEOUT="1")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n"
        )
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < 20 and not answer:
            with contextlib.suppress(OSError):
                sock.sendall(b" ")
            if not still_open(sock):
                answer = read_all(sock, 5)
            time.sleep(0.1)
    head, _, body = answer.partition(b"\r\n\r\n")
    # The web process's log carries the traceback of anything but the refusal.
    assert head.startswith(b"HTTP/1.1 408"), (answer[:200], (tmp_path / "web.log").read_text())
    assert json.loads(body)["code"] == "request_timeout"

    from django.conf import settings

    declared = settings.MAX_REQUEST_BODY_SIZE + 1
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/submissions/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer x\r\nContent-Type: multipart/form-data; boundary=x\r\n"
            b"Content-Length: %d\r\n\r\n" % declared
        )
        answer = read_all(sock, 30)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(body)["code"] == "request_too_large"
    assert json.loads(body)["max_request_size"] == settings.MAX_REQUEST_BODY_SIZE
    assert re.search(rb"(?i)content-type: application/json", head)
