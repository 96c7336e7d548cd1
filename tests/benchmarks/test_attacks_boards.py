"""Attacks on a phase's leaderboard and the hosts' list by callers who have read the source: a
hidden split asked for under other spellings, through CSV, through an earlier scoring
version; the public board's order and ranks as an oracle of hidden scores; a reveal asked for
by a participant or with forged self-call headers; the platform account's name taken first."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase
from apps.core.accounts import PLATFORM_USERNAME, PlatformAccountTaken, platform_account
from tests.benchmarks.boards import BOARD, acc, make_phase, make_team, scored
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

ClientFor = Callable[[User], APIClient]
HIDDEN = 0.7531  # a private score no participant may learn before the reveal
REVEAL = "/api/challenges/digits/phases/dev/reveal/"


@pytest.fixture
def phase(tmp_path: Path) -> Phase:
    phase = make_phase(tmp_path, host=grant_add_challenge(make_user(username="alice")))
    member = make_user(username="member")
    scored(phase, make_team(phase, "t", member), public=acc(0.5), private=acc(HIDDEN))
    return phase


SPLITS = [
    "PRIVATE",
    "Private",
    " private",
    "private ",
    "private\n",
    "private%00",
    "private\x00",
    "priv%",
    "priv*",
    "private.",
    "",
    "private,public",
    "public&split=private",
    "private&split=public&split=private",
    "private&scoring_version=1",
    "private&format=csv",
    "private&format=json",
    "private&limit=1&offset=0",
]


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("caller", ["anonymous", "member", "stranger"])
def test_no_spelling_of_a_hidden_split_shows_its_scores_before_the_reveal(
    phase: Phase, client_for: ClientFor, split: str, caller: str
) -> None:
    client = APIClient() if caller == "anonymous" else client_for(make_user(username=caller))
    if caller == "member":
        client = client_for(User.objects.get(username="member"))
    for accept in ("application/json", "text/csv", "*/*"):
        response: Any = client.get(f"{BOARD}?split={split}", HTTP_ACCEPT=accept)
        text = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code in (HTTPStatus.OK, HTTPStatus.BAD_REQUEST, 403), text
        assert str(HIDDEN).encode() not in text
        assert b"0.75" not in text
        if response.status_code != HTTPStatus.OK:
            assert response.json()["code"] in ("invalid_request", "not_revealed")


@pytest.mark.parametrize(
    "query",
    ["scoring_version=0", "scoring_version=-1", "scoring_version=abc", "scoring_version=1e3",
     "scoring_version=99999999999999999999", "scoring_version=2", "limit=0", "offset=-1",
     "format=xml", "format=CSV", "split=private&scoring_version=2"],
)  # fmt: skip
def test_bad_queries_are_400_never_500_nor_hidden_rows(
    phase: Phase, client_for: ClientFor, query: str
) -> None:
    client = client_for(User.objects.get(username="member"))
    response = client.get(f"{BOARD}?{query}")
    assert response.status_code in (HTTPStatus.BAD_REQUEST, HTTPStatus.FORBIDDEN)
    assert b"0.75" not in response.content


@pytest.mark.parametrize("late_is_better_hidden", [True, False])
def test_the_public_order_and_ranks_say_nothing_of_hidden_scores(
    tmp_path: Path, client_for: ClientFor, late_is_better_hidden: bool
) -> None:
    """Two teams tie on every public metric; whichever is better on the hidden split, the
    public board orders them by submission time and gives both rank 1."""
    phase = make_phase(tmp_path, host=grant_add_challenge(make_user(username="alice")))
    early = make_team(phase, "early", make_user(username="e"))
    late = make_team(phase, "late", make_user(username="l"))
    good, bad = acc(0.9), acc(0.1)
    scored(phase, early, minutes=1, public=acc(0.5), private=bad if late_is_better_hidden else good)
    scored(phase, late, minutes=2, public=acc(0.5), private=good if late_is_better_hidden else bad)

    for client in (APIClient(), client_for(User.objects.get(username="e"))):
        body = client.get(BOARD).json()
        assert [(row["team"]["name"], row["rank"]) for row in body["rows"]] == [
            ("early", 1),
            ("late", 1),
        ]
        assert "private" not in str(body)
        exported: Any = client.get(BOARD + "?format=csv")
        text = b"".join(exported.streaming_content).decode()
        assert text.index("early") < text.index("late")
        assert "0.9" not in text
        assert "0.1" not in text


@pytest.mark.parametrize("caller", ["anonymous", "member", "stranger"])
def test_only_hosts_list_a_phases_submissions(
    phase: Phase, client_for: ClientFor, caller: str
) -> None:
    users = {"member": User.objects.get(username="member")}
    client = (
        APIClient()
        if caller == "anonymous"
        else client_for(users.get(caller) or make_user(username=caller))
    )
    response = client.get("/api/challenges/digits/phases/dev/submissions/?scoring_version=1")
    assert response.status_code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)
    assert b"0.75" not in response.content


@pytest.mark.parametrize("caller", ["anonymous", "member", "stranger"])
def test_a_participant_or_stranger_cannot_reveal(
    phase: Phase, client_for: ClientFor, caller: str
) -> None:
    client = APIClient() if caller == "anonymous" else client_for(make_user(username=caller))
    if caller == "member":
        client = client_for(User.objects.get(username="member"))
    response = client.post(REVEAL)
    assert response.status_code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)
    phase.refresh_from_db()
    assert phase.revealed_at is None


FORGED = {
    "HTTP_X_SCHEDULE_LIFE_UUID": "00000000-0000-4000-8000-000000000000",
    "HTTP_X_SCHEDULE_PLAN": "birth",
    "HTTP_X_SCHEDULE_ATTEMPT": "1",
    "HTTP_WEBHOOK_ID": "msg_forged",
    "HTTP_WEBHOOK_TIMESTAMP": "1900000000",
    "HTTP_WEBHOOK_SIGNATURE": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
}


@pytest.mark.parametrize("caller", ["anonymous", "member"])
def test_forged_self_call_headers_do_not_reveal(
    phase: Phase, client_for: ClientFor, caller: str
) -> None:
    platform_account()  # the platform's account exists, as once any reveal was booked
    member = User.objects.get(username="member")
    client = APIClient() if caller == "anonymous" else client_for(member)
    for life in (FORGED["HTTP_X_SCHEDULE_LIFE_UUID"], *_platform_lives()):
        headers: dict[str, Any] = {**FORGED, "HTTP_X_SCHEDULE_LIFE_UUID": life}
        response = client.post(REVEAL, **headers)
        assert response.status_code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)
    phase.refresh_from_db()
    assert phase.revealed_at is None


def _platform_lives() -> list[str]:
    from apps.schedule.models import Life

    return [life.life_uuid for life in Life.objects.filter(owner__username=PLATFORM_USERNAME)]


def test_a_person_created_with_the_platform_name_first_is_not_the_platform_account(
    client_for: ClientFor,
) -> None:
    staff = make_user(username="root", is_staff=True, is_superuser=True)
    client = client_for(staff)
    client.force_login(staff)
    response = client.post(
        "/admin/auth/user/add/",
        {
            "username": PLATFORM_USERNAME,
            "password1": "a-Long-passw0rd-!",
            "password2": "a-Long-passw0rd-!",
            "usable_password": "true",
        },
    )
    person = User.objects.filter(username=PLATFORM_USERNAME).first()
    if person is None:  # the admin refused the name: the platform holds
        assert response.status_code == HTTPStatus.OK
        return
    # A person with the name and a password is never adopted as the platform's account.
    assert person.has_usable_password()
    with pytest.raises(PlatformAccountTaken):
        platform_account()


def test_a_person_with_the_platform_name_does_not_hold_the_reveal_reservations(
    tmp_path: Path, client_for: ClientFor
) -> None:
    person = make_user(username=PLATFORM_USERNAME)  # as the admin's add form makes them
    person.set_password("a-Long-passw0rd-!")
    person.save()
    make_phase(tmp_path, host=grant_add_challenge(make_user(username="alice")))
    listed = client_for(person).get("/api/schedules/")
    assert listed.status_code == HTTPStatus.OK
    assert "/reveal/" not in listed.content.decode()
