"""Finals through the real API, and what a hidden split's row is: the best hidden score among
a team's finals; without a selection, among its `final_selection` best by the public split;
with `final_selection: 0`, among every counted, completed submission."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Phase
from apps.submissions.models import SubmissionStatus
from tests.benchmarks.boards import (
    BOARD,
    acc,
    make_entry,
    make_phase,
    make_team,
    phase_changed,
    scored,
)
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

ClientFor = Callable[[User], APIClient]
HIDDEN = BOARD + "?split=private"


def _final(client: APIClient, entry: Entry, *, method: str = "post") -> Any:
    return getattr(client, method)(f"/api/submissions/{entry.pk}/final/")


def _reveal(phase: Phase) -> None:
    Phase.objects.filter(pk=phase.pk).update(revealed_at=timezone.now())


def _hidden_row(client: APIClient) -> dict[str, Any]:
    response = client.get(HIDDEN)
    assert response.status_code == HTTPStatus.OK, response.content
    rows: list[dict[str, Any]] = response.json()["rows"]
    assert len(rows) == 1
    return rows[0]


@pytest.fixture
def member() -> User:
    return make_user(username="member")


def test_without_a_selection_the_best_by_public_decide_the_hidden_row(
    tmp_path: Path, api_client: APIClient, member: User
) -> None:
    phase = make_phase(tmp_path)  # final_selection: 2
    team = make_team(phase, "t", member)
    scored(phase, team, minutes=0, public=acc(0.9), private=acc(0.5))
    second = scored(phase, team, minutes=1, public=acc(0.8), private=acc(0.6))
    scored(phase, team, minutes=2, public=acc(0.1), private=acc(0.99))  # not among the 2 best
    _reveal(phase)

    row = _hidden_row(api_client)

    assert row["submission_id"] == second.pk
    assert row["scores"]["accuracy"] == 0.6


def test_selected_finals_decide_the_hidden_row(
    tmp_path: Path, api_client: APIClient, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", member)
    client = client_for(member)
    scored(phase, team, minutes=0, public=acc(0.9), private=acc(0.5))
    scored(phase, team, minutes=1, public=acc(0.8), private=acc(0.6))
    low = scored(phase, team, minutes=2, public=acc(0.1), private=acc(0.99))
    pick = scored(phase, team, minutes=3, public=acc(0.2), private=acc(0.3))

    response = _final(client, pick)
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {
        "submission_id": pick.pk,
        "final": True,
        "finals": [pick.pk],
        "final_selection": 2,
    }
    assert _final(client, pick).json()["finals"] == [pick.pk]  # again: unchanged
    _reveal(phase)
    assert _hidden_row(api_client)["submission_id"] == pick.pk
    Phase.objects.filter(pk=phase.pk).update(revealed_at=None)

    assert _final(client, low).json()["finals"] == [low.pk, pick.pk]
    _reveal(phase)
    assert _hidden_row(api_client)["submission_id"] == low.pk
    # The public split is every counted submission's best, finals or not.
    public = api_client.get(BOARD).json()["rows"][0]
    assert public["scores"]["accuracy"] == 0.9


def test_unselecting_every_final_returns_to_the_best_by_public(
    tmp_path: Path, api_client: APIClient, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", member)
    client = client_for(member)
    best = scored(phase, team, minutes=0, public=acc(0.9), private=acc(0.5))
    pick = scored(phase, team, minutes=1, public=acc(0.2), private=acc(0.3))
    _final(client, pick)

    response = _final(client, pick, method="delete")

    assert response.status_code == HTTPStatus.OK
    assert response.json()["final"] is False
    assert response.json()["finals"] == []
    _reveal(phase)
    assert _hidden_row(api_client)["submission_id"] == best.pk


def test_final_selection_zero_considers_every_counted_submission(
    tmp_path: Path, api_client: APIClient, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path, phase_changed(final_selection=0))
    team = make_team(phase, "t", member)
    scored(phase, team, minutes=0, public=acc(0.9), private=acc(0.5))
    best_hidden = scored(phase, team, minutes=1, public=acc(0.1), private=acc(0.99))

    response = _final(client_for(member), best_hidden)

    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "too_many_finals"
    assert response.json()["allowed"] == 0
    _reveal(phase)
    assert _hidden_row(api_client)["submission_id"] == best_hidden.pk


def test_more_than_final_selection_is_too_many_finals(
    tmp_path: Path, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)  # final_selection: 2
    team = make_team(phase, "t", member)
    client = client_for(member)
    entries = [scored(phase, team, minutes=i, public=acc(0.5)) for i in range(3)]

    assert _final(client, entries[0]).status_code == HTTPStatus.OK
    assert _final(client, entries[1]).status_code == HTTPStatus.OK
    response = _final(client, entries[2])

    assert response.status_code == HTTPStatus.CONFLICT
    body = response.json()
    assert (body["code"], body["allowed"], body["selected"]) == ("too_many_finals", 2, 2)
    assert Entry.objects.filter(phase=phase, final=True).count() == 2
    # Unselecting one frees a place.
    assert _final(client, entries[0], method="delete").status_code == HTTPStatus.OK
    assert _final(client, entries[2]).json()["finals"] == [entries[1].pk, entries[2].pk]


def test_only_a_counted_completed_submission_of_ones_team_can_be_a_final(
    tmp_path: Path, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", member)
    outsider = make_user(username="outsider")
    other_team = make_team(phase, "other", outsider)
    mine = scored(phase, team, public=acc(0.5))
    theirs = scored(phase, other_team, public=acc(0.5))
    failed = make_entry(phase, team, status=SubmissionStatus.FAILED)
    running = make_entry(phase, team, status=SubmissionStatus.PROCESSING)
    refunded = scored(phase, team, minutes=5, public=acc(0.4))
    Entry.objects.filter(pk=refunded.pk).update(counted=False, refund_reason="scoring_failed")
    client = client_for(member)

    for entry in (theirs, failed, running, refunded):
        for method in ("post", "delete"):
            response = _final(client, entry, method=method)
            assert response.status_code == HTTPStatus.FORBIDDEN, (entry, method)
            assert response.json()["code"] == "permission_denied"
    response = _final(client_for(outsider), mine)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert not Entry.objects.filter(final=True).exists()
    missing = client.post(f"/api/submissions/{'a' * 32}/final/")
    assert missing.status_code == HTTPStatus.NOT_FOUND
    assert APIClient().post(f"/api/submissions/{mine.pk}/final/").status_code == 401


def test_after_the_reveal_finals_are_frozen(
    tmp_path: Path, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", member)
    client = client_for(member)
    chosen = scored(phase, team, minutes=0, public=acc(0.5))
    other = scored(phase, team, minutes=1, public=acc(0.6))
    _final(client, chosen)
    _reveal(phase)

    for entry, method in ((other, "post"), (chosen, "delete")):
        response = _final(client, entry, method=method)
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["code"] == "finals_frozen"
    assert list(Entry.objects.filter(final=True).values_list("pk", flat=True)) == [chosen.pk]


def test_a_new_result_after_the_selection_keeps_the_hidden_row_on_the_finals(
    tmp_path: Path, api_client: APIClient, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path, phase_changed(final_selection=1))
    team = make_team(phase, "t", member)
    pick = scored(phase, team, minutes=0, public=acc(0.2), private=acc(0.3))
    _final(client_for(member), pick)
    scored(phase, team, minutes=1, public=acc(0.9), private=acc(0.9))
    _reveal(phase)

    assert _hidden_row(api_client)["submission_id"] == pick.pk


def test_a_participant_never_reads_hidden_scores_before_the_reveal(
    tmp_path: Path, client_for: ClientFor, member: User
) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", member)
    entry = scored(phase, team, public=acc(0.5), private=acc(0.123456))
    client = client_for(member)

    answers = [
        client.get(BOARD),
        client.get(BOARD + "?format=csv"),
        client.get(HIDDEN),
        _final(client, entry),
        _final(client, entry, method="delete"),
    ]

    for response in answers:
        content = b"".join(response.streaming_content) if response.streaming else response.content
        assert b"0.123456" not in content
