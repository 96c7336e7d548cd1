"""Bounds on what one user can hold: unfinished Lives per user (SCHEDULE_MAX_LIVES_PER_USER,
proven under racing bookings), the time one attempt may take (SCHEDULE_ACTION_MAX_SECONDS,
against a receiver on loopback that answers one byte at a time) and the share of a batch's
threads one owner's plans get."""

from __future__ import annotations

import datetime as dt
import socketserver
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.schedule.batch import plan_execute_batch
from apps.schedule.booking import life_spec_build
from apps.schedule.exceptions import TooManyLives
from apps.schedule.execution.claims import plan_claim
from apps.schedule.models import Life, LifeState, PlanKind
from apps.schedule.services.booking import life_book
from tests.concurrency import run_concurrently
from tests.factories.schedule import book_point
from tests.schedule.conftest import Received, Receiver, at, point_body
from tests.schedule.test_execution import fire

URL = "/api/schedules/"


@pytest.mark.django_db
def test_the_lives_cap_is_429_too_many_lives_and_counts_only_unfinished_lives(
    user: User, user_client: APIClient, other_client: APIClient, settings: Any
) -> None:
    settings.SCHEDULE_MAX_LIVES_PER_USER = 3
    made = [user_client.post(URL, point_body(when=at(60 + i)), format="json") for i in range(3)]
    assert [r.status_code for r in made] == [HTTPStatus.CREATED] * 3
    refused = user_client.post(URL, point_body(when=at(70)), format="json")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    body = refused.json()
    assert (body["success"], body["code"], body["max_lives"]) == (False, "too_many_lives", 3)
    header = user_client.get("/api/me/", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert header.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert header.json()["code"] == "too_many_lives"
    me = user_client.get("/api/quotas/me/").json()
    assert (me["active_lives"], me["max_lives"]) == (3, 3)
    # Another user's Lives are theirs.
    assert other_client.post(URL, point_body(), format="json").status_code == HTTPStatus.CREATED
    # A cancelled Life (Stillbirth) no longer counts.
    assert user_client.delete(f"{URL}{made[0].json()['life_uuid']}/").status_code == 200
    assert user_client.post(URL, point_body(), format="json").status_code == HTTPStatus.CREATED
    assert Life.objects.filter(owner=user).exclude(state=LifeState.STILLBIRTH).count() == 3


@pytest.mark.django_db
def test_reposting_an_existing_life_at_the_cap_returns_it(
    user_client: APIClient, settings: Any
) -> None:
    settings.SCHEDULE_MAX_LIVES_PER_USER = 1
    body = point_body()
    first = user_client.post(URL, body, format="json")
    assert first.status_code == HTTPStatus.CREATED
    body["life_uuid"] = first.json()["life_uuid"]
    assert user_client.post(URL, body, format="json").status_code == HTTPStatus.OK


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("resources", [False, True])
def test_racing_bookings_never_pass_the_lives_cap(
    user: User, settings: Any, resources: bool
) -> None:
    settings.SCHEDULE_MAX_LIVES_PER_USER = 3
    start = timezone.now() + dt.timedelta(hours=1)

    def book(i: int) -> str:
        data = {
            "schedule_type": "point",
            "resource_id": f"gpu-{i}" if resources else "",
            "birth_time": (start + dt.timedelta(minutes=i)).isoformat(),
            "birth_action": {"path": "/api/me/", "method": "GET"},
        }
        return life_book(user=user, spec=life_spec_build(data)).life.life_uuid

    outcomes = run_concurrently(book, 10)
    assert sum(outcome.ok for outcome in outcomes) == 3
    assert all(isinstance(o.error, TooManyLives) for o in outcomes if not o.ok)
    assert Life.objects.filter(owner=user).count() == 3


@pytest.mark.django_db
def test_a_timeout_longer_than_the_attempt_limit_is_refused_at_booking(
    user_client: APIClient, settings: Any
) -> None:
    settings.SCHEDULE_ACTION_MAX_SECONDS = 30
    body = point_body()
    body["birth"] = {**body["birth"], "request_timeout": 300}
    response = user_client.post(URL, body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"
    assert "SCHEDULE_ACTION_MAX_SECONDS" in response.json()["fields"]["birth_action"][0]


class _Trickle(socketserver.BaseRequestHandler):
    """Answers 200 one byte every 0.2 s: each read gets data well within any read timeout,
    the whole answer takes about 12 s."""

    def handle(self) -> None:
        self.request.recv(65536)
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
        try:
            for byte in answer:
                self.request.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            return  # the client gave up


@pytest.fixture
def trickle(settings: Any) -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    host = f"127.0.0.1:{server.server_address[1]}"
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [host]
    try:
        yield f"http://{host}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db
def test_a_receiver_that_trickles_its_answer_is_cut_off_at_the_attempt_limit(
    user: User, trickle: str, settings: Any
) -> None:
    settings.SCHEDULE_ACTION_MAX_SECONDS = 1.5
    life = book_point(user, url=f"{trickle}/slow", request_timeout=1, connect_timeout=1)
    plan = life.plans.get(kind=PlanKind.BIRTH)
    started = time.monotonic()
    assert fire(plan) == "failed"
    assert time.monotonic() - started < 4
    attempt = plan.attempts.get()
    assert attempt.status_code == 599
    assert "Timeout" in attempt.error
    assert attempt.duration_ms < 4000


@pytest.mark.django_db(transaction=True)  # the plan threads need committed rows
def test_one_owners_slow_plans_do_not_queue_ahead_of_another_owners(
    user: User, other_user: User, receiver: Receiver
) -> None:
    receiver.on_request = lambda _: time.sleep(0.4)
    due = 120
    greedy = [book_point(user, url=f"{receiver.url}/slow", in_seconds=due) for _ in range(6)]
    polite = book_point(other_user, url=f"{receiver.url}/fast", in_seconds=due)
    armed = {a.plan_id: a.token for a in plan_claim(owner="w", now=polite.birth_time)}
    order = [life.plans.get().pk for life in [*greedy, polite]]
    assert plan_execute_batch(items=[(pk, armed[pk]) for pk in order]) == ["done"] * 7
    arrivals: list[Received] = sorted(receiver.requests, key=lambda r: r.at)
    position = [r.path for r in arrivals].index("/fast")
    assert position < 4, [r.path for r in arrivals]
