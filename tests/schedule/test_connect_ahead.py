"""A plan the watcher's pool starts ahead of its time opens its request's connection in the
meantime and sends the request at its time on it: the receiver sees the connection before the
plan's time and the request after it, once, signed, at the checked address; a connection the
receiver closed meanwhile is replaced at send time. Real TCP servers on loopback throughout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from standardwebhooks.webhooks import Webhook

from apps.schedule.delivery import plan_deliver
from apps.schedule.execution.claims import plan_claim
from apps.schedule.models import Plan, PlanKind, PlanState
from tests.factories.schedule import book_point

pytestmark = pytest.mark.django_db(transaction=True)
LEAD = 0.4


@dataclass
class Wire:
    """A bare HTTP/1.0 server: when each connection was accepted and when its request's
    bytes arrived. It closes the first `drop_first` connections as soon as they are made."""

    listener: socket.socket
    drop_first: int = 0
    accepted: list[float] = field(default_factory=list)
    requests: list[tuple[float, bytes]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(time.time())
            if len(self.accepted) <= self.drop_first:
                conn.close()
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = conn.recv(65536)
            arrived = time.time()
            while data and b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if not data:
                return
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append((arrived, head + b"\r\n\r\n" + body))
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def wire(settings: Any) -> Iterator[Wire]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = Wire(listener)
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{server.port}"]
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        yield server
    finally:
        listener.close()


def armed_birth(user: User, url: str) -> tuple[Plan, str]:
    plan = book_point(user, url=url).plans.get(kind=PlanKind.BIRTH)
    [armed] = [a for a in plan_claim(owner="pool", now=plan.due_at) if a.plan_id == plan.pk]
    return plan, armed.token


def test_the_connection_is_made_ahead_and_the_request_sent_at_the_plans_time(
    user: User, wire: Wire
) -> None:
    plan, token = armed_birth(user, f"http://127.0.0.1:{wire.port}/hook")
    at = time.time() + LEAD
    assert plan_deliver(plan_id=plan.pk, token=token, not_before=at) == "done"
    [accepted] = wire.accepted
    [(arrived, data)] = wire.requests
    assert accepted < at <= arrived
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /hook HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    Webhook(django_settings.SCHEDULE_WEBHOOK_SECRET).verify(body, headers)
    plan.refresh_from_db()
    assert plan.state == PlanState.DONE
    assert plan.attempts.get().status_code == 200


def test_a_connection_the_receiver_closed_meanwhile_is_replaced_at_send_time(
    user: User, wire: Wire
) -> None:
    wire.drop_first = 1
    plan, token = armed_birth(user, f"http://127.0.0.1:{wire.port}/hook")
    at = time.time() + LEAD
    assert plan_deliver(plan_id=plan.pk, token=token, not_before=at) == "done"
    first, second = wire.accepted
    [(arrived, _)] = wire.requests
    assert first < at <= second <= arrived
    plan.refresh_from_db()
    assert plan.state == PlanState.DONE


def test_a_plan_already_due_connects_when_it_sends(user: User, wire: Wire) -> None:
    plan, token = armed_birth(user, f"http://127.0.0.1:{wire.port}/hook")
    started = time.time()
    assert plan_deliver(plan_id=plan.pk, token=token, not_before=started - 1) == "done"
    [accepted] = wire.accepted
    assert accepted >= started
    assert len(wire.requests) == 1


def test_the_connection_made_ahead_goes_to_the_checked_address(
    user: User, start_receiver: Any, scripted_dns: Any, settings: Any
) -> None:
    """The name answers the checked address once and another loopback service after: the
    connection made ahead, and so the request, goes to the checked one only."""
    checked = start_receiver("127.0.0.1")
    port = checked.server.server_address[1]
    internal = start_receiver("127.0.0.2", port)
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"rebind.example.test:{port}", f"127.0.0.1:{port}"]
    scripted_dns.answers["rebind.example.test"] = ["127.0.0.1", "127.0.0.2"]
    plan, token = armed_birth(user, f"http://rebind.example.test:{port}/hook")
    at = time.time() + LEAD
    assert plan_deliver(plan_id=plan.pk, token=token, not_before=at) == "done"
    assert internal.requests == []
    [request] = checked.requests
    assert request.headers["Host"] == f"rebind.example.test:{port}"
    assert request.at >= at
