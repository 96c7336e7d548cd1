"""Who reads a phase's leaderboard: anonymous, a participant, a host and staff, on public,
unlisted and private challenges, with LEADERBOARD_PUBLIC on and off; a hidden split is 403
`not_revealed` before the reveal for all but hosts and staff, and readable after it."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Participant, ParticipantStatus, Phase
from tests.benchmarks.boards import BOARD, acc, make_phase, make_team, phase_changed, scored
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

ClientFor = Callable[[User], APIClient]

# (visibility, LEADERBOARD_PUBLIC) -> who reads the public split: status per caller.
MATRIX = {
    ("public", True): {"anonymous": 200, "stranger": 200, "participant": 200, "host": 200},
    ("public", False): {"anonymous": 401, "stranger": 200, "participant": 200, "host": 200},
    ("unlisted", True): {"anonymous": 401, "stranger": 200, "participant": 200, "host": 200},
    ("unlisted", False): {"anonymous": 401, "stranger": 200, "participant": 200, "host": 200},
    ("private", True): {"anonymous": 401, "stranger": 404, "participant": 200, "host": 200},
    ("private", False): {"anonymous": 401, "stranger": 404, "participant": 200, "host": 200},
}


def _callers(phase: Phase, client_for: ClientFor, host: User) -> dict[str, APIClient]:
    participant = make_user(username="pat")
    Participant.objects.create(
        challenge=phase.challenge,
        user=participant,
        status=ParticipantStatus.APPROVED,
        approved_at=timezone.now(),
    )
    return {
        "anonymous": APIClient(),
        "stranger": client_for(make_user(username="stranger")),
        "participant": client_for(participant),
        "host": client_for(host),
        "staff": client_for(make_user(username="root", is_staff=True)),
    }


@pytest.mark.parametrize(("visibility", "public_board"), list(MATRIX))
def test_visibility_matrix(
    tmp_path: Path,
    client_for: ClientFor,
    settings: Any,
    visibility: str,
    public_board: bool,
) -> None:
    settings.LEADERBOARD_PUBLIC = public_board
    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, phase_changed(visibility=visibility), host=host)
    scored(phase, make_team(phase, "t", make_user(username="u")), public=acc(0.5))
    callers = _callers(phase, client_for, host)

    expected = {**MATRIX[(visibility, public_board)], "staff": 200}
    got = {name: client.get(BOARD).status_code for name, client in callers.items()}

    assert got == expected
    for name, client in callers.items():
        body = client.get(BOARD).json()
        if expected[name] == HTTPStatus.OK:
            assert body["rows"][0]["scores"] == {"accuracy": 0.5, "errors": 0.0}
        else:
            assert body["code"] == {401: "not_authenticated", 404: "not_found"}[expected[name]]
            assert "rows" not in body


def test_anonymous_gets_the_same_answer_for_an_unknown_and_a_private_challenge(
    tmp_path: Path, api_client: APIClient
) -> None:
    make_phase(tmp_path, phase_changed(visibility="private"))

    private = api_client.get(BOARD)
    unknown = api_client.get("/api/challenges/nope/phases/dev/leaderboard/")

    assert private.status_code == unknown.status_code == HTTPStatus.UNAUTHORIZED
    assert private.json() == unknown.json()


def test_hidden_split_is_not_revealed_until_the_reveal_then_everyone_reads_it(
    tmp_path: Path, client_for: ClientFor, api_client: APIClient
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, host=host)
    member = make_user(username="member")
    team = make_team(phase, "t", member)
    scored(phase, team, public=acc(0.5), private=acc(0.75))
    staff = client_for(make_user(username="root", is_staff=True))
    hidden = BOARD + "?split=private"

    for client in (api_client, client_for(member), client_for(make_user(username="x"))):
        response = client.get(hidden)
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert response.json()["code"] == "not_revealed"
        assert "0.75" not in response.content.decode()
        csv_response = client.get(hidden + "&format=csv")
        assert csv_response.status_code == HTTPStatus.FORBIDDEN
    for client in (client_for(host), staff):
        body = client.get(hidden).json()
        assert body["revealed"] is False
        assert body["rows"][0]["scores"] == {"accuracy": 0.75, "errors": 0.0}

    Phase.objects.filter(pk=phase.pk).update(revealed_at=timezone.now())

    for client in (api_client, client_for(member)):
        body = client.get(hidden).json()
        assert body["revealed"] is True
        assert body["split"] == "private"
        assert body["rows"][0]["scores"] == {"accuracy": 0.75, "errors": 0.0}


def test_a_host_reads_a_rescore_in_progress(
    tmp_path: Path, client_for: ClientFor, api_client: APIClient
) -> None:
    from apps.benchmarks.models import ScoringVersion

    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, host=host)
    version = ScoringVersion.objects.get(phase=phase, number=1)
    version.pk, version.number = None, 2
    version.save()

    assert client_for(host).get(BOARD + "?scoring_version=2").status_code == HTTPStatus.OK
    assert api_client.get(BOARD + "?scoring_version=2").status_code == HTTPStatus.BAD_REQUEST
