"""Races of phase submissions (real threads, real transactions; SQLite and PostgreSQL): a
user's concurrent first submissions make one team of one, and users whose names fold alike
each get a team of their own under distinct names."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.test import APIClient

from apps.benchmarks.models import Challenge, Entry, Team, TeamMember
from apps.benchmarks.services.phase_submissions import team_for_submitter
from tests.benchmarks.phases import (
    apply_challenge,
    make_host,
    participate,
    phase_limits,
    submit_to_phase,
)
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8
Clients = Callable[[User], APIClient]


def test_concurrent_first_submissions_of_one_user_make_one_team(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()))
    pat = make_user(username="pat")
    clients = [client_for(pat) for _ in range(THREADS)]
    participate(clients[0])

    results = run_concurrently(lambda i: submit_to_phase(clients[i], "dev"), THREADS)

    for outcome in results:
        assert outcome.ok, outcome.error
        assert outcome.value.status_code == HTTPStatus.CREATED, outcome.value.json()
    [team] = Team.objects.all()
    assert team.name == "pat"
    assert list(TeamMember.objects.values_list("team_id", "user_id")) == [(team.pk, pat.pk)]
    assert Entry.objects.filter(team=team, user=pat).count() == THREADS


def test_the_membership_constraint_decides_between_racing_first_teams(
    client_for: Clients,
) -> None:
    """Without the request path's other locks: only (challenge, user) uniqueness decides."""
    apply_challenge(client_for(make_host()))
    challenge = Challenge.objects.get(slug="digits")
    users = [make_user(username="pat"), make_user(username="PAT")]

    def first_team(index: int) -> str:
        with transaction.atomic():
            return team_for_submitter(challenge=challenge, user=users[index % 2]).pk

    results = run_concurrently(first_team, THREADS)

    for outcome in results:
        assert outcome.ok, outcome.error
    teams = {outcome.value for outcome in results[0::2]}, {o.value for o in results[1::2]}
    assert all(len(ids) == 1 for ids in teams)
    assert Team.objects.count() == 2
    assert sorted(Team.objects.values_list("name_folded", flat=True)) == ["pat", "pat-2"]
    for user, ids in zip(users, teams, strict=True):
        member = TeamMember.objects.get(user=user)
        assert {member.team_id} == ids


def test_concurrent_enqueues_count_every_phase_submission_once(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev"))
    pat = make_user(username="pat")
    client = client_for(pat)
    participate(client)
    drafts = [submit_to_phase(client, "dev").json()["submission_id"] for _ in range(4)]
    clients = [client_for(pat) for _ in range(THREADS)]

    results = run_concurrently(
        lambda i: clients[i].post(
            "/api/jobs/",
            {"submission_id": drafts[i % 4], "idempotency_key": f"k-{i % 4}"},
            format="json",
        ),
        THREADS,
    )

    codes = []
    for outcome in results:
        assert outcome.ok, outcome.error
        response = outcome.value
        codes.append(response.status_code)
        if response.status_code == HTTPStatus.CONFLICT:
            assert response.json()["code"] == "idempotency_request_in_progress"
    assert codes.count(HTTPStatus.CREATED) == 4
    assert Entry.objects.filter(counted=True).count() == 4
