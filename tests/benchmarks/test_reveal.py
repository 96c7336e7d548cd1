"""The reveal of a phase's hidden splits (SPEC §11.3): the reservation a bundle books, moves and
cancels; a host's early reveal; one reveal however many race; who is refused. The reservation's
own call runs through the real claim and execution path over real HTTP (live_server)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase
from apps.benchmarks.services.reveal import (
    RevealResult,
    overdue_after,
    phase_reveal,
    phases_reveal_overdue,
)
from apps.core.accounts import PLATFORM_USERNAME
from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.services.reservations import platform_reservations
from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply
from tests.factories.users import make_user
from tests.metrics import scrape

Clients = Callable[[User], APIClient]
DEV = "/api/challenges/digits/phases/dev/reveal/"
CODE = "/api/challenges/digits/phases/code/reveal/"
REVEALS = "yoyaku_benchmarks_reveals_total"


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _dev(**values: Any) -> Callable[[dict[str, Any]], None]:
    """Set fields of the `dev` phase (None removes one)."""

    def change(doc: dict[str, Any]) -> None:
        for name, value in values.items():
            if value is None:
                doc["phases"][0].pop(name, None)
            else:
                doc["phases"][0][name] = value

    return change


def _pending() -> dict[str, dt.datetime]:
    return platform_reservations(prefix="/api/challenges/digits/")


def _apply(apply: Apply, change: Callable[[dict[str, Any]], None] | None = None) -> None:
    response = apply(bundle(change))
    assert response.status_code in (HTTPStatus.CREATED, HTTPStatus.OK), response.json()


def _reveal_at(phase: str = "dev") -> dt.datetime | None:
    return Phase.objects.get(slug=phase).revealed_at


# --- the reservation a bundle keeps ----------------------------------------------------------


def test_applying_a_bundle_books_one_reservation_per_phase_at_its_end(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    _apply(apply_as(host))

    end = dt.datetime(2027, 1, 31, 23, 59, 59, tzinfo=dt.UTC)
    assert _pending() == {DEV: end, CODE: end}
    lives = Life.objects.select_related("owner")
    assert {life.owner.get_username() for life in lives} == {PLATFORM_USERNAME}
    assert {life.booking_token_id for life in lives} == {None}
    assert not lives.filter(owner=host).exists()
    plan = Plan.objects.get(action__path=DEV)
    assert (plan.state, plan.time, plan.action["method"]) == (PlanState.STANDBY, end, "POST")
    assert _reveal_at() is None


def test_a_bundle_that_moves_the_time_moves_the_reservation_even_once_armed(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply = apply_as(host)
    first = timezone.now() + dt.timedelta(minutes=2)
    _apply(apply, _dev(end=_iso(first)))
    plan = Plan.objects.get(action__path=DEV)
    # A watcher arms it (it is due within PRESET_EXECUTION_TIME).
    [armed] = [a for a in plan_claim(owner="w1") if a.plan_id == plan.pk]

    later = timezone.now() + dt.timedelta(hours=5)
    _apply(apply, _dev(end=_iso(later), reveal=_iso(later - dt.timedelta(hours=1))))

    assert _pending()[DEV] == (later - dt.timedelta(hours=1)).replace(microsecond=later.microsecond)
    plan.refresh_from_db()
    assert (plan.state, plan.arm_token, plan.time) == (
        PlanState.STANDBY,
        "",
        _pending()[DEV],
    )
    # The old arming can never start it: the plan stays pending, nothing is revealed.
    assert plan_execute(plan_id=plan.pk, token=armed.token) == "skipped"
    assert Life.objects.filter(owner__username=PLATFORM_USERNAME).count() == 2
    assert _reveal_at() is None


def test_reveal_never_cancels_the_reservation_and_end_books_it_again(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply = apply_as(host)
    _apply(apply)
    booked = Life.objects.get(birth_action__path=DEV)

    _apply(apply, _dev(reveal="never", final_selection=1))

    assert set(_pending()) == {CODE}
    booked.refresh_from_db()
    assert booked.state == LifeState.STILLBIRTH
    assert booked.plans.get().state == PlanState.CANCELLED

    _apply(apply)
    assert set(_pending()) == {DEV, CODE}
    assert Life.objects.filter(birth_action__path=DEV).count() == 2


def test_a_removed_phase_cancels_its_reservation(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply = apply_as(host)
    _apply(apply)

    def drop_code(doc: dict[str, Any]) -> None:
        doc["phases"] = doc["phases"][:1]

    _apply(apply, drop_code)

    assert set(_pending()) == {DEV}
    assert Life.objects.get(birth_action__path=CODE).state == LifeState.STILLBIRTH


def test_a_time_already_past_reveals_at_once_and_books_nothing(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    before = scrape(settings).value(REVEALS, via="overdue")
    _apply(apply_as(host), _dev(end="2026-06-30T00:00:00Z"))

    assert _reveal_at() is not None
    assert set(_pending()) == {CODE}
    assert scrape(settings).value(REVEALS, via="overdue") - before == 1


def test_an_already_revealed_phase_books_nothing_when_its_time_moves(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply = apply_as(host)
    _apply(apply)
    assert client_for(host).post(DEV).status_code == HTTPStatus.OK

    _apply(apply, _dev(end="2027-03-01T00:00:00Z"))

    assert set(_pending()) == {CODE}


# --- a host reveals early ----------------------------------------------------------------------


def test_a_host_reveals_early_and_asking_again_answers_the_same_time(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients, settings: Any
) -> None:
    _apply(apply_as(host))
    client = client_for(host)
    before = scrape(settings).value(REVEALS, via="host")

    first = client.post(DEV)
    again = client.post(DEV)

    assert first.status_code == HTTPStatus.OK, first.json()
    body = first.json()
    assert body["revealed"] is True
    assert (body["challenge"], body["phase"]) == ("digits", "dev")
    assert again.status_code == HTTPStatus.OK
    assert again.json()["revealed_at"] == body["revealed_at"]
    assert scrape(settings).value(REVEALS, via="host") - before == 1
    # Its reservation is cancelled; the other phase's stays.
    assert set(_pending()) == {CODE}
    detail = {p["slug"]: p for p in client.get("/api/challenges/digits/").json()["phases"]}
    assert detail["dev"]["revealed"] is True
    assert detail["dev"]["revealed_at"] == body["revealed_at"]
    assert (detail["code"]["revealed"], detail["code"]["revealed_at"]) == (False, None)


def test_a_host_reveals_a_phase_whose_reveal_is_never(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    _apply(apply_as(host), _dev(reveal="never", final_selection=1))
    assert DEV not in _pending()

    response = client_for(host).post(DEV)

    assert response.status_code == HTTPStatus.OK, response.json()
    assert _reveal_at() is not None


def test_staff_reveal_too(
    host: User, staff_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    _apply(apply_as(host))
    assert client_for(staff_user).post(DEV).status_code == HTTPStatus.OK
    assert _reveal_at() is not None


def test_anyone_else_is_refused_and_a_private_challenge_is_a_404(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply = apply_as(host)
    _apply(apply)
    stranger = client_for(other_user)
    assert stranger.post("/api/challenges/digits/participate/").status_code == HTTPStatus.OK

    refused = stranger.post(DEV)
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert refused.json()["code"] == "permission_denied"

    def private(doc: dict[str, Any]) -> None:
        doc["visibility"] = "private"

    _apply(apply, private)
    hidden = client_for(make_user(username="mallory")).post(DEV)
    assert hidden.status_code == HTTPStatus.NOT_FOUND
    assert hidden.json()["code"] == "not_found"
    unknown = client_for(host).post("/api/challenges/digits/phases/nope/reveal/")
    assert unknown.status_code == HTTPStatus.NOT_FOUND
    assert _reveal_at() is None
    assert set(_pending()) == {DEV, CODE}


def test_the_platform_account_itself_cannot_reveal_without_its_reservation(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    _apply(apply_as(host))
    platform = User.objects.get(username=PLATFORM_USERNAME)
    assert not platform.has_usable_password()
    response = client_for(platform).post(DEV)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert _reveal_at() is None


# --- one reveal however many race ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_reveals_make_one_reveal(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    _apply(apply_as(host))
    phase_id = Phase.objects.get(slug="dev").pk
    before = scrape(settings).value(REVEALS)
    barrier = threading.Barrier(8)
    results: list[RevealResult] = []
    errors: list[BaseException] = []

    def reveal() -> None:
        try:
            barrier.wait()
            results.append(phase_reveal(phase_id=phase_id, via="host"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reveal) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert len(results) == 8
    assert sum(r.revealed_now for r in results) == 1
    assert {r.revealed_at for r in results} == {_reveal_at()}
    assert scrape(settings).value(REVEALS) - before == 1


# --- the reservation's own call ----------------------------------------------------------------


def _fire(path: str, *, at: dt.datetime | None = None) -> Plan:
    """Claim and run the reservation's plan as a watcher and a worker do, at its due time."""
    plan = Plan.objects.get(action__path=path, state=PlanState.STANDBY)
    now = at or plan.due_at
    [armed] = [a for a in plan_claim(owner="test", now=now) if a.plan_id == plan.pk]
    plan_execute(plan_id=plan.pk, token=armed.token)
    plan.refresh_from_db()
    return plan


@pytest.mark.django_db(transaction=True)
def test_the_reservation_reveals_over_real_http_once_its_time_has_come(
    host: User, apply_as: Callable[[User], Apply], live_server: Any, settings: Any
) -> None:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    settings.EXECUTION_GUARD_TIME = 2
    _apply(apply_as(host), _dev(end=_iso(timezone.now() + dt.timedelta(seconds=1))))
    before = scrape(settings).value(REVEALS, via="schedule")

    plan = _fire(DEV)

    assert plan.state == PlanState.DONE, list(plan.attempts.values("status_code", "error"))
    assert plan.attempts.get().status_code == HTTPStatus.OK
    assert _reveal_at() is not None
    assert Life.objects.get(pk=plan.life_id).state == LifeState.DEAD
    assert scrape(settings).value(REVEALS, via="schedule") - before == 1


@pytest.mark.django_db(transaction=True)
def test_a_call_before_the_time_reveals_nothing(
    host: User, apply_as: Callable[[User], Apply], live_server: Any, settings: Any
) -> None:
    """A call left running when a bundle moved the time later: refused, the phase stays hidden."""
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    _apply(apply_as(host), _dev(end=_iso(timezone.now() + dt.timedelta(minutes=3))))
    plan = Plan.objects.get(action__path=DEV)
    Plan.objects.filter(pk=plan.pk).update(due_at=timezone.now())  # fired early

    plan = _fire(DEV, at=timezone.now())

    assert plan.state == PlanState.FAILED
    assert plan.attempts.get().status_code == HTTPStatus.CONFLICT
    assert "reveal_not_due" in plan.attempts.get().response_excerpt
    assert _reveal_at() is None


def test_the_overdue_check_reveals_what_no_reservation_did(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    _apply(apply_as(host), _dev(end=_iso(timezone.now() + dt.timedelta(minutes=1))))
    end = Phase.objects.get(slug="dev").end
    assert end is not None
    # Every watcher was down: the plan was never armed.
    assert phases_reveal_overdue(now=end + overdue_after() - dt.timedelta(seconds=1)) == 0
    assert _reveal_at() is None

    assert phases_reveal_overdue(now=end + overdue_after()) == 1
    assert phases_reveal_overdue(now=end + overdue_after()) == 0
    assert _reveal_at() is not None


@pytest.mark.django_db(transaction=True)
def test_a_deactivated_platform_account_delays_the_reveal_but_never_loses_it(
    host: User, apply_as: Callable[[User], Apply], live_server: Any, settings: Any
) -> None:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    # Far enough ahead that the apply returns before the end on a busy machine (the plan is
    # fired as of its due time, the overdue sweep as of end + its grace).
    _apply(apply_as(host), _dev(end=_iso(timezone.now() + dt.timedelta(seconds=60))))
    User.objects.filter(username=PLATFORM_USERNAME).update(is_active=False)

    plan = _fire(DEV)

    assert plan.state == PlanState.FAILED
    assert plan.attempts.get().status_code == HTTPStatus.UNAUTHORIZED
    assert _reveal_at() is None
    end = Phase.objects.get(slug="dev").end
    assert end is not None
    assert phases_reveal_overdue(now=end + overdue_after()) == 1
    assert _reveal_at() is not None
