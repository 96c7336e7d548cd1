"""Races of teams and phase limits (real threads through the real API; SQLite and
PostgreSQL): a team never passes `max_team_size`, and a team's concurrent enqueues admit
exactly its limit, grants included."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, TeamMember
from apps.jobs.models import Job
from tests.benchmarks.phases import (
    apply_challenge,
    make_host,
    participate,
    phase_limits,
    submit_to_phase,
)
from tests.benchmarks.teams import enqueued, team_join, team_made
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)
Clients = Callable[[User], APIClient]


def _participant(client_for: Clients, name: str) -> APIClient:
    client = client_for(make_user(username=name))
    participate(client)
    return client


def test_eight_concurrent_joins_of_a_team_of_three_admit_exactly_two(
    client_for: Clients,
) -> None:
    apply_challenge(client_for(make_host()))
    team = team_made(_participant(client_for, "ann"), "Owls")
    joiners = [_participant(client_for, f"user{i}") for i in range(8)]

    results = run_concurrently(lambda i: team_join(joiners[i], team["invite_code"]), 8)

    codes = []
    for outcome in results:
        assert outcome.ok, outcome.error
        codes.append(outcome.value.status_code)
    assert codes.count(HTTPStatus.OK) == 2
    refused = [o.value.json()["code"] for o in results if o.value.status_code != HTTPStatus.OK]
    assert refused == ["team_full"] * 6
    assert TeamMember.objects.filter(team_id=team["id"]).count() == 3


def _team_of_three(client_for: Clients) -> list[APIClient]:
    ann = _participant(client_for, "ann")
    team = team_made(ann, "Owls")
    members = [ann]
    for name in ("bob", "cy"):
        member = _participant(client_for, name)
        assert team_join(member, team["invite_code"]).status_code == HTTPStatus.OK
        members.append(member)
    return members


def _race_enqueues(members: list[APIClient], count: int) -> list[tuple[int, dict[str, object]]]:
    drafts = [
        (members[i % 3], submit_to_phase(members[i % 3], "dev").json()["submission_id"])
        for i in range(count)
    ]
    results = run_concurrently(lambda i: enqueued(drafts[i][0], drafts[i][1]), count)
    answers = []
    for outcome in results:
        assert outcome.ok, outcome.error
        answers.append((outcome.value.status_code, outcome.value.json()))
    return answers


def test_twelve_concurrent_enqueues_of_three_members_admit_exactly_per_day(
    client_for: Clients,
) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=4))
    members = _team_of_three(client_for)

    answers = _race_enqueues(members, 12)

    created = [body for status, body in answers if status == HTTPStatus.CREATED]
    refused = [body for status, body in answers if status != HTTPStatus.CREATED]
    assert len(created) == 4
    assert {body["code"] for body in refused} == {"phase_limit_exceeded"}
    assert all((b["limit"], b["used"], b["allowed"]) == ("per_day", 4, 4) for b in refused)
    assert Job.objects.count() == 4
    assert Entry.objects.filter(counted=True).count() == 4


def test_concurrent_enqueues_admit_exactly_the_concurrent_limit(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", concurrent=1))
    members = _team_of_three(client_for)

    answers = _race_enqueues(members, 6)

    assert [status for status, _ in answers].count(HTTPStatus.CREATED) == 1
    refused = [body for status, body in answers if status != HTTPStatus.CREATED]
    assert {(b["limit"], b["used"], b["allowed"]) for b in refused} == {("concurrent", 1, 1)}


def test_a_grant_admits_exactly_its_extra_under_concurrency(client_for: Clients) -> None:
    host = make_host()
    host_client = client_for(host)
    apply_challenge(host_client, phase_limits("dev", total=2))
    members = _team_of_three(client_for)
    assert [s for s, _ in _race_enqueues(members, 4)].count(HTTPStatus.CREATED) == 2
    team_id = TeamMember.objects.get(user__username="ann").team_id
    grant = host_client.post(
        f"/api/challenges/digits/teams/{team_id}/grants/",
        {"phase": "dev", "limit": "total", "extra": 3, "reason": "a broken scorer"},
        format="json",
    )
    assert grant.status_code == HTTPStatus.CREATED, grant.json()

    answers = _race_enqueues(members, 8)

    assert [s for s, _ in answers].count(HTTPStatus.CREATED) == 3
    refused = [body for status, body in answers if status != HTTPStatus.CREATED]
    assert {(b["limit"], b["used"], b["allowed"]) for b in refused} == {("total", 5, 5)}
    assert Entry.objects.filter(counted=True).count() == 5
