"""Attacks on phase submissions through the real API: the last instant of a phase, a draft
made in time and enqueued late, files added after the enqueue or with names that dress up
another type, another user's submission enqueued or chosen as a final, and joining a
private challenge whose slug was guessed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Participant
from apps.jobs.models import Job
from apps.submissions.models import Submission
from tests.benchmarks.phases import (
    apply_challenge,
    enqueue,
    make_host,
    participate,
    phase_times,
    settings_of,
    submit_to_phase,
)
from tests.factories.users import make_user
from tests.submissions.conftest import add_file

pytestmark = pytest.mark.django_db

Clients = Callable[[User], APIClient]
END = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
JUST_BEFORE = END - dt.timedelta(microseconds=1)


@pytest.fixture
def host_client(client_for: Clients) -> APIClient:
    return client_for(make_host())


@pytest.fixture
def pat_client(client_for: Clients) -> APIClient:
    return client_for(make_user(username="pat"))


def _code(response: Any) -> tuple[int, str]:
    return response.status_code, response.json().get("code", "")


def test_the_end_instant_is_closed_for_creation_and_for_enqueue(
    host_client: APIClient, pat_client: APIClient
) -> None:
    apply_challenge(host_client, phase_times("dev", "2026-01-01T00:00:00Z", END.isoformat()))
    participate(pat_client)
    with time_machine.travel(JUST_BEFORE, tick=False):
        in_time = submit_to_phase(pat_client, "dev")
        assert in_time.status_code == HTTPStatus.CREATED
        draft = in_time.json()["submission_id"]
    with time_machine.travel(END, tick=False):
        assert _code(submit_to_phase(pat_client, "dev")) == (HTTPStatus.CONFLICT, "phase_closed")
        assert _code(enqueue(pat_client, draft)) == (HTTPStatus.CONFLICT, "phase_closed")
    assert Job.objects.count() == 0
    assert Submission.objects.count() == 1


def test_files_cannot_be_added_once_enqueued(host_client: APIClient, pat_client: APIClient) -> None:
    apply_challenge(host_client)
    participate(pat_client)
    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    assert enqueue(pat_client, draft).status_code in (HTTPStatus.OK, HTTPStatus.CREATED)
    late = add_file(pat_client, draft, "late.csv", b"id,label\n0,1\n")
    assert late.status_code in (HTTPStatus.CONFLICT, HTTPStatus.BAD_REQUEST), late.json()
    names = [
        f["filename"] for f in pat_client.get(f"/api/submissions/{draft}/files/").json()["files"]
    ]
    assert names == ["predictions.csv"]


DISGUISED = [
    "a.csv.py",
    "a.py",
    "a.csv ",
    "a.csv.",
    "a.csv\n",
    "a.csv/",
    "a.csv\\b.py",
    "a\x00.csv",
    ".csv",
    "a.tar.gz",
    "a.zip",
    "a.csv/../b.py",
]


@pytest.mark.parametrize("name", DISGUISED)
def test_a_name_dressed_as_csv_is_no_csv(
    host_client: APIClient, pat_client: APIClient, name: str
) -> None:
    """The `dev` phase takes `.csv` files only: whatever is stored ends in `.csv`, on create
    and on add, and a bad name is a 400, never a 500."""
    apply_challenge(host_client)
    participate(pat_client)
    created = submit_to_phase(pat_client, "dev", [(name, b"id,label\n")])
    assert created.status_code in (HTTPStatus.CREATED, HTTPStatus.BAD_REQUEST)
    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    added = add_file(pat_client, draft, name, b"id,label\n")
    assert added.status_code in (HTTPStatus.CREATED, HTTPStatus.BAD_REQUEST)
    for submission in Submission.objects.all():
        for stored in submission.files.values_list("filename", flat=True):
            assert stored.lower().endswith(".csv"), stored
            assert stored.strip() == stored
            assert "/" not in stored
            assert "\\" not in stored
            assert "\x00" not in stored


def test_another_users_phase_submission_cannot_be_enqueued_or_chosen(
    host_client: APIClient, pat_client: APIClient, client_for: Clients
) -> None:
    apply_challenge(host_client)
    participate(pat_client)
    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    mallory = client_for(make_user(username="mallory"))
    participate(mallory)
    assert enqueue(mallory, draft).status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND)
    assert Job.objects.count() == 0
    chosen = mallory.post(f"/api/submissions/{draft}/final/")
    assert _code(chosen) == (HTTPStatus.FORBIDDEN, "permission_denied")
    assert add_file(mallory, draft, "x.csv", b"id,label\n").status_code in (
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
    )


@pytest.mark.parametrize("participation", ["open", "approval"])
def test_a_guessed_private_slug_is_404_for_every_door(
    host_client: APIClient, client_for: Clients, participation: str
) -> None:
    apply_challenge(host_client, settings_of(visibility="private", participation=participation))
    stranger = client_for(make_user(username="stranger"))
    host_id = User.objects.get(username="hana").pk
    doors = {
        "participate": stranger.post("/api/challenges/digits/participate/"),
        "approve": stranger.post(f"/api/challenges/digits/participants/{host_id}/approve/"),
        "submit": submit_to_phase(stranger, "dev"),
        "board": stranger.get("/api/challenges/digits/phases/dev/leaderboard/"),
        "hosts-list": stranger.get("/api/challenges/digits/phases/dev/submissions/"),
        "reveal": stranger.post("/api/challenges/digits/phases/dev/reveal/"),
        "public-data": stranger.get("/api/challenges/digits/phases/dev/public-data/"),
        "detail": stranger.get("/api/challenges/digits/"),
    }
    unknown = stranger.get("/api/challenges/nope/")
    for door, response in doors.items():
        assert response.status_code == HTTPStatus.NOT_FOUND, door
        assert response.json()["code"] == "not_found", door
    assert unknown.json()["code"] == "not_found"
    assert not Participant.objects.filter(user__username="stranger").exists()
    assert Submission.objects.count() == 0
