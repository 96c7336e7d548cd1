"""Which worker takes a connection (config/server/accept.py), on gunicorn as config/gunicorn.py
runs it, serving the project's application with a `/slow` path (tests/core/slow_wsgi.py):

- a worker whose thread is busy leaves new connections to a worker that is free (before, its
  event loop went on accepting them, and their requests waited behind the busy thread);
- connections that send nothing, or trickle their heads or bodies, hold no thread and do not
  stop a worker from accepting: one worker alone still answers at once;
- SIGTERM lets the request being served finish, and the process exits cleanly.
"""

from __future__ import annotations

import concurrent.futures
import socket
import subprocess
import time
from http import HTTPStatus

import pytest

from tests.core.test_slow_clients import still_open
from tests.latency import served_within
from tests.processes import Start, http_request, start_gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def start_web(start: Start, workers: int) -> tuple[int, subprocess.Popen[bytes]]:
    return start_gunicorn(start, "web", workers, app="tests.core.slow_wsgi:application")


def timed(port: int, path: str) -> tuple[int, float]:
    started = time.monotonic()
    status, _, _ = http_request(port, "GET", path)
    return status, time.monotonic() - started


def test_new_requests_go_to_the_free_worker_while_the_other_ones_thread_is_busy(
    start_process: Start,
) -> None:
    port, _ = start_web(start_process, workers=2)
    for _ in range(4):  # both workers have served (and loaded what a request needs)
        assert http_request(port, "GET", "/healthz")[0] == HTTPStatus.OK
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(timed, port, "/slow?seconds=4")
        time.sleep(0.5)  # one worker's thread is now asleep in it
        quick = [timed(port, "/healthz") for _ in range(20)]
        status, seconds = slow.result(30)
    assert (status, seconds >= 4) == (HTTPStatus.OK, True)
    assert all(status == HTTPStatus.OK for status, _ in quick)
    # Each was served by the free worker; none waited for the busy one (about 3.5 s for the
    # first that would).
    assert max(seconds for _, seconds in quick) < 2.0, quick


def test_silent_and_trickling_connections_do_not_stop_one_worker_from_accepting(
    start_process: Start,
) -> None:
    port, _ = start_web(start_process, workers=1)
    openings = [
        b"",  # connected, sends nothing
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",  # a head in progress
        b"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{",  # a body in progress
    ]
    attackers = []
    try:
        for opening in openings * 60:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if opening:
                sock.sendall(opening)
            attackers.append(sock)
        time.sleep(0.5)
        served_within(1, lambda: [timed(port, "/healthz") for _ in range(5)])
        assert all(still_open(sock) for sock in attackers)
    finally:
        for sock in attackers:
            sock.close()


def test_sigterm_lets_the_request_being_served_finish(start_process: Start) -> None:
    port, web = start_web(start_process, workers=1)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(timed, port, "/slow?seconds=2")
        time.sleep(0.5)
        web.terminate()
        status, _ = slow.result(30)
    assert status == HTTPStatus.OK
    assert web.wait(20) == 0
