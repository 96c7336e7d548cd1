"""A host's bundle that changes a phase's split names (drops `private`, or renames it) while
its scoring program and reference data stay: the scoring version stays too, and so do the
scores of the old hidden split. Nothing was revealed, so no participant may read them.

Found: the team's `me` view hid only the splits the phase names *now* as hidden, so the old
`private` scores of every submission showed there. Now a split's scores show only when the
phase names it as public (hidden splits after the reveal, or to hosts)."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase
from tests.benchmarks.boards import BOARD, acc, make_phase, make_team, phase_changed, scored
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

MARKER = b"0.123456"
ME = "/api/challenges/digits/phases/dev/me/"


def _content(response: Any) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return bytes(response.content)


@pytest.mark.parametrize("splits", [["public"], ["public", "test"]], ids=["dropped", "renamed"])
def test_a_changed_split_list_never_shows_the_old_hidden_scores(
    tmp_path: Path, client_for: Callable[[User], APIClient], splits: list[str]
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, host=host)
    member = make_user(username="member")
    entry = scored(phase, make_team(phase, "t", member), public=acc(0.5), private=acc(0.123456))
    host_client, client = client_for(host), client_for(member)
    assert MARKER in _content(host_client.get(ME.replace("me/", "submissions/")))

    make_phase(tmp_path, phase_changed(splits=splits), host=host)
    phase = Phase.objects.get(pk=phase.pk)
    assert phase.scoring_version == 1  # same program and reference: the old scores stand
    assert phase.revealed_at is None

    answers = {
        "me": client.get(ME),
        "board": client.get(BOARD),
        "csv": client.get(BOARD + "?format=csv"),
        "private": client.get(BOARD + "?split=private"),
        "private_v1": client.get(BOARD + "?split=private&scoring_version=1"),
        "submission": client.get(f"/api/submissions/{entry.pk}/"),
        "submissions": client.get("/api/submissions/"),
    }
    assert answers["me"].status_code == HTTPStatus.OK
    assert answers["private"].status_code == HTTPStatus.BAD_REQUEST
    for name, response in answers.items():
        assert response.status_code < HTTPStatus.INTERNAL_SERVER_ERROR, name
        assert MARKER not in _content(response), name
    assert answers["me"].json()["submissions"][0]["scores"] == {"public": acc(0.5)}
