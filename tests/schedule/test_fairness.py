"""Squatting a resource: a plain user books `gpu-2` until the year 9990, then everyone else's
409 names the squatter's Life. A Life holding a resource spans at most SCHEDULE_MAX_TERM, and
a `resource_conflict` names no other user's Life (SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.schedule.models import Life
from tests.concurrency import run_concurrently
from tests.factories.users import make_user
from tests.schedule.conftest import at, point_body, term_body

URL = "/api/schedules/"


def _days_from_now(days: float, *, seconds: float = 0) -> str:
    moment = timezone.now() + dt.timedelta(days=days, seconds=seconds)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _assert_invalid_term(response: Any) -> None:
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["code"] == "invalid_schedule"
    assert "SCHEDULE_MAX_TERM" in body["fields"]["death_time"][0]
    assert "30 days" in body["error"]


@pytest.mark.django_db
def test_squatting_a_resource_until_the_year_9990_is_refused(
    user_client: APIClient, other_client: APIClient
) -> None:
    squat = term_body(birth=at(60), death="9990-01-01 00:00:00", resource_id="gpu-2")
    _assert_invalid_term(user_client.post(URL, squat, format="json"))
    assert not Life.objects.filter(resource_id="gpu-2").exists()

    # The resource stays free for everyone else.
    response = other_client.post(URL, term_body(resource_id="gpu-2"), format="json")
    assert response.status_code == HTTPStatus.CREATED


@pytest.mark.django_db
def test_a_term_of_exactly_schedule_max_term_is_accepted_and_a_second_more_is_not(
    user_client: APIClient,
) -> None:
    birth = timezone.now() + dt.timedelta(hours=1)
    fmt = "%Y-%m-%d %H:%M:%S"
    exact = birth + dt.timedelta(days=30)
    ok = user_client.post(
        URL,
        term_body(birth=birth.strftime(fmt), death=exact.strftime(fmt), resource_id="gpu-3"),
        format="json",
    )
    assert ok.status_code == HTTPStatus.CREATED, ok.json()
    longer = exact + dt.timedelta(seconds=1)
    refused = user_client.post(
        URL,
        term_body(
            birth=(birth + dt.timedelta(days=40)).strftime(fmt),
            death=(longer + dt.timedelta(days=40)).strftime(fmt),
            resource_id="gpu-4",
        ),
        format="json",
    )
    _assert_invalid_term(refused)


@pytest.mark.django_db
def test_patch_cannot_stretch_a_booking_past_the_limit(user_client: APIClient) -> None:
    created = user_client.post(URL, term_body(resource_id="gpu-2"), format="json")
    uuid = created.json()["life_uuid"]
    response = user_client.patch(
        f"{URL}{uuid}/", {"death_time": "9990-01-01 00:00:00"}, format="json"
    )
    _assert_invalid_term(response)
    life = Life.objects.get(life_uuid=uuid)
    assert life.death_time is not None
    assert life.death_time - life.birth_time < dt.timedelta(hours=2)


@pytest.mark.django_db
def test_the_limit_follows_the_setting_and_binds_only_lives_holding_a_resource(
    user_client: APIClient, settings: Any
) -> None:
    settings.SCHEDULE_MAX_TERM = 0.5  # days
    long_term = term_body(birth=at(60), death=_days_from_now(1))
    refused = user_client.post(URL, {**long_term, "resource_id": "gpu-2"}, format="json")
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    assert refused.json()["code"] == "invalid_schedule"
    assert "0.5 days" in refused.json()["fields"]["death_time"][0]
    # Holding no resource, a long term keeps nobody else out.
    assert user_client.post(URL, long_term, format="json").status_code == HTTPStatus.CREATED


@pytest.mark.django_db
def test_a_conflict_with_another_users_life_names_nothing_of_it(
    user: User, user_client: APIClient, other_client: APIClient
) -> None:
    mine = user_client.post(URL, term_body(resource_id="gpu-2"), format="json").json()
    uuid = mine["life_uuid"]

    clash = other_client.post(URL, point_body(when=at(90), resource_id="gpu-2"), format="json")
    assert clash.status_code == HTTPStatus.CONFLICT
    body = clash.json()
    assert body["code"] == "resource_conflict"
    assert "conflicting_life_uuid" not in body
    assert uuid not in clash.content.decode()
    assert user.username not in clash.content.decode()

    # Nor by moving one's own Life onto it.
    theirs = other_client.post(URL, point_body(when=at(400), resource_id="gpu-2"), format="json")
    moved = other_client.patch(
        f"{URL}{theirs.json()['life_uuid']}/", {"birth_time": at(90)}, format="json"
    )
    assert moved.status_code == HTTPStatus.CONFLICT
    assert moved.json()["code"] == "resource_conflict"
    assert uuid not in moved.content.decode()


@pytest.mark.django_db
def test_a_conflict_with_ones_own_life_still_names_it(
    user_client: APIClient, other_client: APIClient
) -> None:
    theirs = other_client.post(URL, point_body(when=at(30), resource_id="gpu-2"), format="json")
    mine = user_client.post(URL, point_body(when=at(300), resource_id="gpu-2"), format="json")
    assert mine.status_code == HTTPStatus.CREATED

    # Overlapping both the other user's Life (at 30 min) and mine (at 300 min): only mine is
    # named.
    clash = user_client.post(
        URL, term_body(birth=at(20), death=at(310), resource_id="gpu-2"), format="json"
    )
    assert clash.status_code == HTTPStatus.CONFLICT
    assert clash.json()["conflicting_life_uuid"] == mine.json()["life_uuid"]
    assert theirs.json()["life_uuid"] not in clash.content.decode()


@pytest.mark.django_db(transaction=True)
def test_racing_users_losing_a_resource_learn_nothing_of_the_winner(
    client_for: Callable[[User], APIClient],
) -> None:
    users = [make_user(username=f"racer{i}") for i in range(8)]
    clients = [client_for(u) for u in users]

    def book(i: int) -> tuple[int, str]:
        body = term_body(birth=at(60 + i), death=at(70 + i), resource_id="gpu-9")
        response = clients[i].post(URL, body, format="json")
        return response.status_code, response.content.decode()

    outcomes = run_concurrently(book, 8)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert Counter(o.value[0] for o in outcomes) == {HTTPStatus.CREATED: 1, HTTPStatus.CONFLICT: 7}
    winner = Life.objects.get(resource_id="gpu-9")
    for status, content in (o.value for o in outcomes):
        if status == HTTPStatus.CONFLICT:
            assert winner.life_uuid not in content
            assert winner.owner.username not in content
            assert "conflicting_life_uuid" not in content
