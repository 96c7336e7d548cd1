"""Teams (SPEC §11.4) through the real API: create, join by invite code, leave, one's own;
the codes `already_in_team`, `team_full`, `team_name_taken`, `team_locked`."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Team, TeamMember
from tests.benchmarks.phases import apply_challenge, make_host, participate, submit_to_phase
from tests.benchmarks.teams import (
    BASE,
    enqueued,
    team_create,
    team_join,
    team_leave,
    team_made,
)
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db
Clients = Callable[[User], APIClient]
Participants = Callable[[str], APIClient]


@pytest.fixture
def clients(client_for: Clients) -> Participants:
    """A participant's client by username (the challenge `digits` applied once)."""
    apply_challenge(client_for(make_host()))

    def make(username: str) -> APIClient:
        client = client_for(make_user(username=username))
        participate(client)
        return client

    return make


def test_create_answers_the_team_with_its_member_and_invite_code(clients: Participants) -> None:
    ann = clients("ann")
    body = team_made(ann, "Owls")
    assert set(body) == {"id", "name", "members", "invite_code"}
    assert body["name"] == "Owls"
    assert [m["username"] for m in body["members"]] == ["ann"]
    mine = ann.get(f"{BASE}mine/")
    assert mine.status_code == HTTPStatus.OK
    assert mine.json() == body


def test_names_are_unique_per_challenge_compared_case_insensitively(clients: Participants) -> None:
    team_made(clients("ann"), "Owls")
    response = team_create(clients("bob"), "OWLS")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "team_name_taken"


def test_a_member_cannot_create_a_second_team(clients: Participants) -> None:
    ann = clients("ann")
    team_made(ann, "Owls")
    response = team_create(ann, "Larks")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "already_in_team"
    assert Team.objects.count() == 1


def test_only_approved_participants_take_part_in_teams(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()))
    outsider = client_for(make_user(username="zed"))
    response = team_create(outsider, "Owls")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "not_participant"


def test_bad_bodies_are_invalid_requests(clients: Participants) -> None:
    ann = clients("ann")
    for body in ({}, {"name": ""}, {"name": "x" * 101}, {"name": "a\x00b"}):
        response = ann.post(BASE, body, format="json")
        assert response.status_code == HTTPStatus.BAD_REQUEST, body
        assert response.json()["code"] == "invalid_request"
    response = ann.post(f"{BASE}join/", {"invite_code": 5}, format="json")
    assert response.status_code in (HTTPStatus.BAD_REQUEST, HTTPStatus.NOT_FOUND)


def test_join_by_invite_code_and_the_code_is_for_members_only(clients: Participants) -> None:
    ann, bob = clients("ann"), clients("bob")
    team = team_made(ann, "Owls")
    assert bob.get(f"{BASE}mine/").status_code == HTTPStatus.NOT_FOUND
    response = team_join(bob, team["invite_code"])
    assert response.status_code == HTTPStatus.OK, response.json()
    assert [m["username"] for m in response.json()["members"]] == ["ann", "bob"]
    wrong = team_join(clients("cy"), "not-a-code")
    assert wrong.status_code == HTTPStatus.NOT_FOUND
    again = team_join(bob, team["invite_code"])
    assert again.status_code == HTTPStatus.CONFLICT
    assert again.json()["code"] == "already_in_team"


def test_a_full_team_refuses_the_next_member(clients: Participants) -> None:
    team = team_made(clients("ann"), "Owls")
    for name in ("bob", "cy"):
        assert team_join(clients(name), team["invite_code"]).status_code == HTTPStatus.OK
    response = team_join(clients("dee"), team["invite_code"])
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "team_full"
    assert TeamMember.objects.filter(team_id=team["id"]).count() == 3


def test_leaving_an_empty_team_without_entries_deletes_it(clients: Participants) -> None:
    ann = clients("ann")
    team = team_made(ann, "Owls")
    response = team_leave(ann, team["id"])
    assert response.status_code == HTTPStatus.NO_CONTENT
    assert not Team.objects.filter(pk=team["id"]).exists()
    assert team_leave(ann, team["id"]).status_code == HTTPStatus.NOT_FOUND


def test_a_team_with_a_draft_entry_stays_when_left_empty(clients: Participants) -> None:
    ann = clients("ann")
    team = team_made(ann, "Owls")
    assert submit_to_phase(ann, "dev").status_code == HTTPStatus.CREATED
    assert team_leave(ann, team["id"]).status_code == HTTPStatus.NO_CONTENT
    assert Team.objects.filter(pk=team["id"]).exists()
    assert not TeamMember.objects.filter(team_id=team["id"]).exists()


def test_a_counted_submission_locks_the_team_and_a_refund_unlocks_it(clients: Participants) -> None:
    ann, bob = clients("ann"), clients("bob")
    owls = team_made(ann, "Owls")
    assert team_join(bob, owls["invite_code"]).status_code == HTTPStatus.OK
    larks = team_made(clients("cy"), "Larks")
    draft = submit_to_phase(bob, "dev").json()["submission_id"]
    job = enqueued(bob, draft).json()["job_id"]
    assert Entry.objects.get(pk=draft).counted

    for response in (team_leave(ann, owls["id"]), team_join(bob, larks["invite_code"])):
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["code"] == "team_locked"

    # A queued job cancelled: refunded, so the team is free again.
    assert bob.post(f"/api/jobs/{job}/cancel/").status_code == HTTPStatus.OK
    assert team_leave(ann, owls["id"]).status_code == HTTPStatus.NO_CONTENT


def test_joining_a_team_that_has_counted_submissions_is_fine(clients: Participants) -> None:
    ann = clients("ann")
    owls = team_made(ann, "Owls")
    enqueued(ann, submit_to_phase(ann, "dev").json()["submission_id"])
    response = team_join(clients("bob"), owls["invite_code"])
    assert response.status_code == HTTPStatus.OK


def test_a_team_of_one_from_a_first_submission_can_be_joined(clients: Participants) -> None:
    ann = clients("ann")
    submit_to_phase(ann, "dev")
    mine = ann.get(f"{BASE}mine/").json()
    assert mine["name"] == "ann"
    assert team_join(clients("bob"), mine["invite_code"]).status_code == HTTPStatus.OK


def test_a_draft_counts_for_the_team_its_author_is_in_at_enqueue(clients: Participants) -> None:
    """A draft made in a team its author then left never spends that team's limits."""
    ann, bob = clients("ann"), clients("bob")
    owls = team_made(bob, "Owls")
    draft = submit_to_phase(ann, "dev").json()["submission_id"]
    first_team = Entry.objects.get(pk=draft).team_id
    assert team_leave(ann, first_team).status_code == HTTPStatus.NO_CONTENT
    assert team_join(ann, owls["invite_code"]).status_code == HTTPStatus.OK
    assert enqueued(ann, draft).status_code == HTTPStatus.CREATED
    entry = Entry.objects.get(pk=draft)
    assert (entry.team_id, entry.counted) == (owls["id"], True)
