"""Attacks on which worker takes a connection (config/server/accept.py), on gunicorn as
config/gunicorn.py runs it (one thread a worker): floods of silent connections, slow heads and
bodies, a body that never ends, pipelined keep-alive requests, resets right after connect or
after a request, half-closed connections, heads refused in a loop, answers never read. While
each runs an honest client is answered within a bound, and once it stops the worker accepts
again at once: the gate's count of busy threads never stays above the threads really busy,
nor below (a request whose client left while its thread ran keeps the worker closed until the
thread ends)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus

import pytest

from tests.core.test_accept_fairness import start_web, timed
from tests.latency import served_within
from tests.processes import Start

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BOUND = 2.0  # seconds an honest request may take while an attack runs (tests/latency.py)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0) rather than FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def silent(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    held.extend(_connect(port) for _ in range(300))


def slow_heads(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    for _ in range(100):
        sock = _connect(port)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
        held.append(sock)
    while not stop.wait(0.2):
        for sock in held:
            with contextlib.suppress(OSError):
                sock.send(b"a")


def endless_bodies(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    head = (
        b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000000\r\n\r\n"
    )
    for _ in range(100):
        sock = _connect(port)
        sock.sendall(head)
        held.append(sock)
    while not stop.wait(0.1):
        for sock in held:
            with contextlib.suppress(OSError):
                sock.send(b" " * 64)


def pipelining(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    """Keep-alive connections, each with hundreds of requests sent at once, answers unread."""
    for _ in range(20):
        sock = _connect(port)
        sock.settimeout(0.5)
        with contextlib.suppress(OSError):
            sock.sendall(HEAD * 500)
        held.append(sock)


def resets(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    """Connections reset at once, or right after a request (a thread's work or a quick one):
    requests cancelled before a thread takes them, or while it runs them. The thread's work
    asked for stays a fraction of its time (10 ms a round, rounds 5 ms apart plus twelve
    connections), and each round ends with a quick request whose answer is read before the
    reset: the attack goes at the worker's pace, so what is tested is the resets, not a
    backlog of connections deeper than a loaded machine's worker drains in the bound."""
    while not stop.wait(0.005):
        for head in [b""] * 10 + [b"GET /slow?seconds=0.01 HTTP/1.1\r\n\r\n", HEAD]:
            with contextlib.suppress(OSError):
                sock = _connect(port)
                if head:
                    sock.sendall(head)
                if head == HEAD:
                    sock.recv(65536)
                _reset(sock)


def half_closed(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    for index in range(200):
        sock = _connect(port)
        if index % 2:
            sock.sendall(HEAD)
        sock.shutdown(socket.SHUT_WR)
        held.append(sock)


def refused_heads(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    refused = [
        b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # 414
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X: y\r\n" * 300 + b"\r\n",  # 431
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"y" * 17000 + b"\r\n\r\n",
        b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999\r\n\r\n",
    ]
    while not stop.is_set():
        for head in refused:
            with contextlib.suppress(OSError), _connect(port) as sock:
                sock.sendall(head * 3)
                sock.recv(65536)


def never_read(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    """Answers (an error page and a JSON list) asked for again and again, never read."""
    request = b"GET /api/jobs/?page_size=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for _ in range(20):
        sock = _connect(port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(0.2)
        with contextlib.suppress(OSError):
            sock.sendall((HEAD + request) * 2000)
        held.append(sock)


Attack = Callable[[int, threading.Event, list[socket.socket]], None]
ATTACKS: dict[str, Attack] = {
    "silent connections": silent,
    "slow heads": slow_heads,
    "bodies that never end": endless_bodies,
    "pipelined keep-alive requests": pipelining,
    "resets after connect and after a request": resets,
    "half-closed connections": half_closed,
    "heads refused in a loop": refused_heads,
    "answers never read": never_read,
}


@contextlib.contextmanager
def attacking(port: int, attack: Attack) -> Iterator[None]:
    stop = threading.Event()
    held: list[socket.socket] = []
    thread = threading.Thread(target=attack, args=(port, stop, held), daemon=True)
    thread.start()
    try:
        time.sleep(1.0)
        yield
    finally:
        stop.set()
        thread.join(30)
        for sock in held:
            _reset(sock)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_honest_client_is_served_during_the_attack_and_accepting_resumes(
    name: str, start_process: Start
) -> None:
    port, _ = start_web(start_process, workers=1)
    with attacking(port, ATTACKS[name]):
        served_within(BOUND, lambda: [timed(port, "/healthz") for _ in range(5)])
    # A request whose client left is cancelled within gunicorn's grace (3 s); then the
    # worker's one thread is free, and the gate open: a slow request and a quick one after it
    # take their own time and no more.
    time.sleep(4)
    served_within(0.5 + BOUND, lambda: [timed(port, "/slow?seconds=0.5")])
    served_within(1, lambda: [timed(port, "/healthz") for _ in range(5)])


def test_a_client_leaving_while_its_thread_runs_keeps_its_worker_closed_until_the_thread_ends(
    start_process: Start,
) -> None:
    """Two workers; a client asks for 8 s of a thread and leaves at once. Its request is
    cancelled after the grace (3 s), its thread still busy: the worker must stay closed, so
    that every request after is taken by the other worker (before, it reopened, and some
    waited for the busy thread up to 5 s)."""
    port, _ = start_web(start_process, workers=2)
    for _ in range(4):
        assert timed(port, "/healthz")[0] == HTTPStatus.OK
    sock = _connect(port)
    sock.sendall(b"GET /slow?seconds=8 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.3)
    _reset(sock)
    time.sleep(3.5)  # the grace has passed: the request is cancelled, its thread sleeps on
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        quick = list(pool.map(lambda _: timed(port, "/healthz"), range(30)))
    assert all(status == HTTPStatus.OK for status, _ in quick)
    # One waiting for the busy thread would wait until it ends, over 4 s for the first.
    assert max(seconds for _, seconds in quick) < BOUND, sorted(s for _, s in quick)[-3:]
    time.sleep(4.5)  # the thread has ended: both workers accept
    served_within(1, lambda: [timed(port, "/healthz") for _ in range(10)])
