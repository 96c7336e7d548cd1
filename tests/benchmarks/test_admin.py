"""The admin shows the benchmarks app read-only: a challenge changes only by applying a bundle,
and teams, entries, scores, scoring versions and best rows only through their services."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.benchmarks.models import (
    Challenge,
    Entry,
    Phase,
    Score,
    ScoringVersion,
    Team,
    TeamBest,
    TeamMember,
)
from apps.benchmarks.services.scores import baseline_scores_record, entry_scores_record
from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply
from tests.factories.submissions import make_submission
from tests.factories.users import make_user


def test_staff_read_challenges_and_phases_but_cannot_add_or_change_them(
    host: User, staff_user: User, apply_as: Callable[[User], Apply], client: Client
) -> None:
    apply_as(host)(bundle())
    client.force_login(staff_user)
    challenge = Challenge.objects.get()
    phase = Phase.objects.get(slug="dev")

    pages = [
        "/admin/benchmarks/challenge/",
        f"/admin/benchmarks/challenge/{challenge.pk}/change/",
        "/admin/benchmarks/phase/",
        f"/admin/benchmarks/phase/{phase.pk}/change/",
        "/admin/benchmarks/participant/",
    ]
    for page in pages:
        assert client.get(page).status_code == HTTPStatus.OK, page
    assert client.get("/admin/benchmarks/challenge/add/").status_code == HTTPStatus.FORBIDDEN
    posted = client.post(
        f"/admin/benchmarks/challenge/{challenge.pk}/change/", {"title": "Changed"}
    )
    assert posted.status_code == HTTPStatus.FORBIDDEN
    assert Challenge.objects.get().title == "Handwritten digits (tiny)"


def _team_with_entries(phase: Phase, name: str, entries: int) -> Team:
    """A team of two with `entries` scored entries in `phase` (rows as the services leave
    them: scores and the team's best row written by the scores service)."""
    team = Team.objects.create(challenge=phase.challenge, name=name)
    members = [make_user(username=f"{name}-{i}") for i in range(2)]
    for member in members:
        TeamMember.objects.create(team=team, challenge=phase.challenge, user=member)
    for i in range(entries):
        entry = Entry.objects.create(
            submission=make_submission(owner=members[0]),
            phase=phase,
            team=team,
            user=members[0],
            counted=True,
            scoring_logs="scorer output",
        )
        with transaction.atomic():
            entry_scores_record(
                entry=entry,
                version=phase.scoring_version,
                splits={
                    "public": {"accuracy": 0.5 + i / 10, "errors": 3.0},
                    "private": {"accuracy": 0.4, "errors": 4.0},
                },
            )
    return team


@pytest.fixture
def scored_phase(host: User, apply_as: Callable[[User], Apply]) -> Phase:
    apply_as(host)(bundle())
    phase = Phase.objects.get(slug="dev")
    baseline_scores_record(
        baseline=phase.baselines.get(),
        version=1,
        splits={
            "public": {"accuracy": 0.1, "errors": 9.0},
            "private": {"accuracy": 0.1, "errors": 9.0},
        },
    )
    _team_with_entries(phase, "owls", 1)
    return phase


SERVICE_WRITTEN = {
    "team": Team,
    "entry": Entry,
    "score": Score,
    "scoringversion": ScoringVersion,
    "teambest": TeamBest,
}


def test_staff_read_every_page_of_teams_entries_scores_versions_and_best_rows(
    scored_phase: Phase, staff_user: User, client: Client
) -> None:
    client.force_login(staff_user)
    for name, model in SERVICE_WRITTEN.items():
        rows = list(model._default_manager.all())
        assert rows, name
        listing = client.get(f"/admin/benchmarks/{name}/")
        assert listing.status_code == HTTPStatus.OK, name
        assert listing.context["cl"].result_count == len(rows), name
        for row in rows:
            page = client.get(f"/admin/benchmarks/{name}/{row.pk}/change/")
            assert page.status_code == HTTPStatus.OK, (name, row.pk)
        searched = client.get(f"/admin/benchmarks/{name}/", {"q": "digits"})
        assert searched.status_code == HTTPStatus.OK, name

    team = Team.objects.get()
    team_page = client.get(f"/admin/benchmarks/team/{team.pk}/change/").content.decode()
    assert "owls-0" in team_page
    assert "owls-1" in team_page
    assert team.invite_code not in team_page
    entry = Entry.objects.get()
    entry_page = client.get(f"/admin/benchmarks/entry/{entry.pk}/change/").content.decode()
    assert "scorer output" in entry_page


def test_staff_cannot_add_change_or_delete_rows_only_services_write(
    scored_phase: Phase, staff_user: User, client: Client
) -> None:
    staff_user.is_superuser = True  # every model permission: the admin itself must refuse
    staff_user.save()
    client.force_login(staff_user)
    counts = {name: model._default_manager.count() for name, model in SERVICE_WRITTEN.items()}
    for name, model in SERVICE_WRITTEN.items():
        row = model._default_manager.first()
        assert row is not None
        base = f"/admin/benchmarks/{name}/"
        assert client.get(f"{base}add/").status_code == HTTPStatus.FORBIDDEN, name
        assert client.post(f"{base}add/", {}).status_code == HTTPStatus.FORBIDDEN, name
        changed = client.post(f"{base}{row.pk}/change/", {"name": "renamed"})
        assert changed.status_code == HTTPStatus.FORBIDDEN, name
        deleted = client.post(f"{base}{row.pk}/delete/", {"post": "yes"})
        assert deleted.status_code == HTTPStatus.FORBIDDEN, name
        bulk = client.post(
            base, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
        )
        assert bulk.status_code in (HTTPStatus.OK, HTTPStatus.FOUND), name
    assert {name: m._default_manager.count() for name, m in SERVICE_WRITTEN.items()} == counts
    assert Team.objects.get().name == "owls"


@pytest.mark.parametrize("name", ["team", "entry", "score", "teambest"])
def test_changelists_cost_the_same_queries_for_one_team_or_many(
    scored_phase: Phase, staff_user: User, client: Client, name: str
) -> None:
    from django.db import connection

    client.force_login(staff_user)
    with CaptureQueriesContext(connection) as few:
        assert client.get(f"/admin/benchmarks/{name}/").status_code == HTTPStatus.OK
    for i in range(3):
        _team_with_entries(scored_phase, f"team{i}", 2)
    with CaptureQueriesContext(connection) as many:
        assert client.get(f"/admin/benchmarks/{name}/").status_code == HTTPStatus.OK
    assert len(many.captured_queries) == len(few.captured_queries)
