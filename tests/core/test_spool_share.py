"""Each client address's share of a worker's spool budget (REQUEST_SPOOL_PER_CLIENT), against
the web process started as the Procfile starts it: one client trickling many bodies fills its
own share (503 with Retry-After past it), not the budget the other clients' bodies need."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from contextlib import ExitStack

import pytest
from django.test import RequestFactory, override_settings

from apps.core.client_address import client_ip
from config.server.body import SpoolBudget
from config.server.bridge import client_address
from tests.processes import Start, read_all, start_procfile_web

HOST = b"Host: 127.0.0.1\r\n"


def _post(port: int, forwarded_for: bytes, size: int) -> socket.socket:
    """A connection from `forwarded_for` declaring a `size`-byte body, its head sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        b"POST /api/jobs/ HTTP/1.1\r\n"
        + HOST
        + b"X-Forwarded-For: %s\r\n" % forwarded_for
        + b"Content-Type: application/json\r\nConnection: close\r\n"
        + b"Content-Length: %d\r\n\r\n" % size
    )
    return sock


def _answer(sock: socket.socket, seconds: float) -> bytes:
    """What the server answered on `sock` within `seconds` ('' while it still reads)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(65536)
    except TimeoutError:
        return b""
    except OSError:
        return b"reset"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_one_client_trickling_many_bodies_fills_its_share_and_another_client_still_posts(
    start_process: Start,
) -> None:
    """Seventeen connections of one client, 60,000 bytes each held, took the whole budget of
    1,000,000 bytes: every other client's body was refused 503 while they trickled."""
    port, _ = start_procfile_web(
        start_process,
        TRUSTED_PROXY_COUNT="1",  # the client is the address X-Forwarded-For names
        REQUEST_SPOOL_BUDGET="1000000",
        REQUEST_SPOOL_RESERVE="100000",
        REQUEST_SPOOL_PER_CLIENT="300000",
        MAX_REQUEST_BODY_SIZE_DEFAULT="100000",
        REQUEST_BODY_TIMEOUT="60",
        WEB_CONCURRENCY="1",  # the budget is a worker's
    )
    with ExitStack() as stack:
        held = []
        for _ in range(17):
            sock = stack.enter_context(_post(port, b"10.0.0.1", 90_000))
            with contextlib.suppress(OSError):  # answered and closed while sending
                sock.sendall(b" " * 60_000)
            held.append(sock)
        answers = [_answer(sock, 1) for sock in held]
        # The first client's share holds at most five of its bodies; the others are refused.
        refused = [answer for answer in answers if answer]
        assert len(refused) >= 12, answers
        for answer in refused:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503"), answer[:200]
            assert b"Retry-After: 5" in head
            assert json.loads(body)["code"] == "service_unavailable"
        # Another client (the same socket address, another forwarded one) is not: its bodies
        # reach Django (no credentials there: 401), twice at once.
        with _post(port, b"10.0.0.2", 50_000) as first, _post(port, b"10.0.0.2", 50_000) as second:
            for sock in (first, second):
                sock.sendall(b" " * 50_000)
            for sock in (first, second):
                answer = read_all(sock, 10)
                assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
                body = json.loads(answer.partition(b"\r\n\r\n")[2])
                assert body["code"] == "not_authenticated"
        # The first client's own bodies still wait on its share.
        with _post(port, b"10.0.0.1", 90_000) as extra:
            assert _answer(extra, 5).startswith(b"HTTP/1.1 503")
    # Its connections closed: the share is given back.
    deadline = time.monotonic() + 10
    while True:
        with _post(port, b"10.0.0.1", 50_000) as again:
            with contextlib.suppress(OSError):
                again.sendall(b" " * 50_000)
            answer = read_all(again, 10)
        if answer.startswith(b"HTTP/1.1 401"):
            break
        assert time.monotonic() < deadline, answer[:200]


def test_a_share_is_per_client_and_an_upload_is_held_apart_up_to_its_own_share() -> None:
    budget = SpoolBudget(1000, reserve=100, per_client=300, per_client_large=600)
    assert budget.charge(300, client="a")
    assert not budget.charge(1, client="a")
    assert budget.available(client="a") == 0
    assert budget.charge(300, client="b")
    # An upload (a made-up credential as well) takes its own share, never the reserve.
    assert budget.charge(300, keep=100, client="a", large=True)
    assert not budget.charge(1, keep=100, client="b", large=True)
    budget.release(300, client="a")
    assert budget.available(client="a") == 300  # its share again
    budget.release(300, client="a", large=True)
    budget.release(300, client="b")
    assert budget.held == 0
    assert not budget._clients  # no entry kept per address once its bodies end


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, [b"10.0.0.9"], "127.0.0.5"),
        (1, [b"6.6.6.6, 10.0.0.9"], "10.0.0.9"),
        (2, [b"6.6.6.6", b"10.0.0.9"], "6.6.6.6"),  # two lines, joined as in the environ
        (1, [b"not an address"], "127.0.0.5"),
        (1, [], "127.0.0.5"),
    ],
)
def test_the_server_keys_a_body_on_the_address_the_application_finds(
    proxies: int, forwarded: list[bytes], expected: str
) -> None:
    scope = {
        "client": ("127.0.0.5", 4000),
        "headers": [(b"x-forwarded-for", value) for value in forwarded],
    }
    factory = RequestFactory()
    meta = {"REMOTE_ADDR": "127.0.0.5"}
    if forwarded:
        meta["HTTP_X_FORWARDED_FOR"] = b",".join(forwarded).decode()
    with override_settings(TRUSTED_PROXY_COUNT=proxies):
        assert client_ip(factory.get("/", **meta)) == expected  # type: ignore[arg-type]
    assert client_address(scope, proxies) == expected
