"""Team names are read by every participant on a public leaderboard (JSON, CSV, pages, the
`yoyaku` command), so an attacker aims at what they show.

Found: a team could be named with a right-to-left override (`Owls` + U+202E + `...` shown
reversed), a zero-width space (`Owls` + U+200B: a second team that reads exactly as the
leader, since the case-insensitive fold keeps it distinct), an escape sequence or a line
break. Now such a name is 400 `invalid_request` naming the character, as file names are;
names in any script still work."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Team
from tests.benchmarks.phases import apply_challenge, make_host, participate
from tests.benchmarks.teams import team_create, team_made
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

HOSTILE = [
    "Owls\u200b",  # zero-width space: reads as the existing "Owls"
    "\u202eslwO",  # right-to-left override
    "Ow\u2066ls\u2069",  # isolates
    "Owls\x1b]0;pwned\x07",  # a terminal title escape
    "Owls\nrank 1",  # a forged second line
    "Owls\u2028x",  # line separator
    "\ufeffOwls",  # byte order mark
    "Ow\u00adls",  # soft hyphen
]


@pytest.fixture
def participant(client_for: Callable[[User], APIClient]) -> Callable[[str], APIClient]:
    apply_challenge(client_for(make_host()))

    def make(username: str) -> APIClient:
        client = client_for(make_user(username=username))
        participate(client)
        return client

    return make


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_that_does_not_show_as_it_is_is_refused(
    participant: Callable[[str], APIClient], name: str
) -> None:
    team_made(participant("ann"), "Owls")
    response = team_create(participant("mallory"), name)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["code"] == "invalid_request"
    assert "U+" in body["error"]
    assert list(Team.objects.values_list("name", flat=True)) == ["Owls"]


def test_names_in_any_script_are_teams(participant: Callable[[str], APIClient]) -> None:
    for username, name in [("ann", "Équipe Straße"), ("bob", "データ班"), ("cy", "A/B · 🦉")]:
        assert team_made(participant(username), name)["name"] == name
