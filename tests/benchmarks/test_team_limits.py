"""Team limits of a phase at enqueue (SPEC §11.4) through the real API: the refusal's body
and header, grants, a team's view of the phase, idempotent replays and user quotas."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Phase, Score, TeamMember
from apps.quotas.models import QuotaPolicy
from tests.benchmarks.phases import (
    apply_challenge,
    make_host,
    participate,
    phase_limits,
    submit_to_phase,
)
from tests.benchmarks.teams import enqueued, team_join, team_made
from tests.factories.users import make_user
from tests.metrics import scrape

pytestmark = pytest.mark.django_db
Clients = Callable[[User], APIClient]
NOON = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
ME = "/api/challenges/digits/phases/dev/me/"
REFUSALS = "yoyaku_phase_limit_refusals_total"


def _participant(client_for: Clients, name: str) -> APIClient:
    client = client_for(make_user(username=name))
    participate(client)
    return client


def _submit(client: APIClient, **body: object) -> object:
    return enqueued(client, submit_to_phase(client, "dev").json()["submission_id"], **body)


def _grants_url(team_id: str) -> str:
    return f"/api/challenges/digits/teams/{team_id}/grants/"


@time_machine.travel(NOON, tick=False)
def test_per_day_refusal_tells_the_limit_and_when_it_resets(
    client_for: Clients, settings: Any
) -> None:
    before = scrape(settings).value(REFUSALS, limit="per_day")
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=1))
    ann = _participant(client_for, "ann")
    assert _submit(ann).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]
    response = _submit(ann)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["code"] == "phase_limit_exceeded"
    assert (body["limit"], body["used"], body["allowed"]) == ("per_day", 1, 1)
    assert body["resets_at"] == "2026-11-29T00:00:00+00:00"
    assert response["Retry-After"] == str(12 * 3600)  # type: ignore[index]
    # The submission stays a draft: nothing was counted.
    assert Entry.objects.filter(counted=True).count() == 1
    assert scrape(settings).value(REFUSALS, limit="per_day") - before == 1


def test_the_day_is_the_utc_calendar_day(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=1))
    ann = _participant(client_for, "ann")
    with time_machine.travel(dt.datetime(2026, 11, 28, 23, 59, tzinfo=dt.UTC), tick=False):
        assert _submit(ann).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]
    with time_machine.travel(dt.datetime(2026, 11, 29, 0, 1, tzinfo=dt.UTC), tick=False):
        assert _submit(ann).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]


def test_total_is_checked_and_reported(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", total=1))
    ann = _participant(client_for, "ann")
    assert _submit(ann).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]
    body = _submit(ann).json()  # type: ignore[attr-defined]
    assert (body["code"], body["limit"], body["allowed"]) == ("phase_limit_exceeded", "total", 1)
    assert "resets_at" not in body


def test_an_idempotent_replay_never_meets_the_limit(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=1))
    ann = _participant(client_for, "ann")
    draft = submit_to_phase(ann, "dev").json()["submission_id"]
    first = enqueued(ann, draft, idempotency_key="once")
    assert first.status_code == HTTPStatus.CREATED
    replay = enqueued(ann, draft, idempotency_key="once")
    assert replay.status_code == HTTPStatus.OK
    assert replay.json()["idempotent_hit"] is True
    assert Entry.objects.get(pk=draft).counted


def test_user_quotas_still_bite_under_a_generous_phase(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=50, concurrent=50))
    ann_user = make_user(username="ann")
    QuotaPolicy.objects.create(user=ann_user, max_concurrent_jobs=1)
    ann = client_for(ann_user)
    participate(ann)
    assert _submit(ann).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]
    response = _submit(ann)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS  # type: ignore[attr-defined]
    assert response.json()["code"] == "quota_exceeded"  # type: ignore[attr-defined]
    # The refused enqueue rolled back with the quota: it does not count for the team.
    assert Entry.objects.filter(counted=True).count() == 1


def test_grants_are_for_hosts_and_listed_with_who_and_when(client_for: Clients) -> None:
    host = make_host()
    apply_challenge(client_for(host), phase_limits("dev", per_day=1))
    ann = _participant(client_for, "ann")
    team = team_made(ann, "Owls")
    body = {"phase": "dev", "limit": "per_day", "extra": 2, "reason": "outage"}
    refused = ann.post(_grants_url(team["id"]), body, format="json")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert refused.json()["code"] == "permission_denied"
    assert ann.get(_grants_url(team["id"])).status_code == HTTPStatus.FORBIDDEN

    host_client = client_for(host)
    made = host_client.post(_grants_url(team["id"]), body, format="json")
    assert made.status_code == HTTPStatus.CREATED, made.json()
    listed = host_client.get(_grants_url(team["id"])).json()
    assert [(g["limit"], g["extra"], g["reason"]) for g in listed] == [("per_day", 2, "outage")]
    assert listed[0]["granted_by"]["username"] == host.username
    assert listed[0]["created_at"]
    for bad in ({**body, "limit": "concurrent"}, {**body, "extra": 0}, {**body, "phase": "nope"}):
        response = host_client.post(_grants_url(team["id"]), bad, format="json")
        assert response.status_code == HTTPStatus.BAD_REQUEST, bad
        assert response.json()["code"] == "invalid_request"


def test_a_per_day_grant_holds_for_the_current_utc_day_only(client_for: Clients) -> None:
    host = make_host()
    apply_challenge(client_for(host), phase_limits("dev", per_day=1))
    ann = _participant(client_for, "ann")
    team = team_made(ann, "Owls")
    with time_machine.travel(NOON, tick=False):
        client_for(host).post(
            _grants_url(team["id"]),
            {"phase": "dev", "limit": "per_day", "extra": 1, "reason": "today"},
            format="json",
        )
        assert ann.get(ME).json()["limits"]["per_day"]["allowed"] == 2
    with time_machine.travel(NOON + dt.timedelta(days=1), tick=False):
        assert ann.get(ME).json()["limits"]["per_day"]["allowed"] == 1


def test_me_shows_the_limits_and_the_teams_submissions_without_hidden_scores(
    client_for: Clients,
) -> None:
    apply_challenge(client_for(make_host()), phase_limits("dev", per_day=5, concurrent=2))
    ann, bob = _participant(client_for, "ann"), _participant(client_for, "bob")
    team = team_made(ann, "Owls")
    team_join(bob, team["invite_code"])
    assert _submit(bob).status_code == HTTPStatus.CREATED  # type: ignore[attr-defined]
    draft = submit_to_phase(ann, "dev").json()["submission_id"]
    entry = Entry.objects.exclude(pk=draft).get()
    phase = Phase.objects.get(slug="dev")
    for split in ("public", "private"):
        Score.objects.create(
            phase=phase,
            version=phase.scoring_version,
            split=split,
            entry=entry,
            team_id=team["id"],
            values={"accuracy": 0.5, "errors": 1},
            metric_key="k",
            order_key="k",
            submitted_at=entry.created_at,
        )

    body = ann.get(ME).json()

    assert body["team"] == {"id": team["id"], "name": "Owls"}
    assert body["limits"]["per_day"]["allowed"] == 5
    assert (body["limits"]["per_day"]["used"], body["limits"]["per_day"]["remaining"]) == (1, 4)
    assert body["limits"]["per_day"]["resets_at"]
    assert body["limits"]["total"]["allowed"] is None
    assert body["limits"]["concurrent"]["used"] == 1
    rows = {row["submission_id"]: row for row in body["submissions"]}
    assert set(rows) == {entry.pk, draft}
    assert rows[entry.pk]["counted"] is True
    assert rows[draft]["counted"] is False
    assert rows[entry.pk]["scores"] == {"public": {"accuracy": 0.5, "errors": 1}}
    assert "scoring_logs" not in rows[entry.pk]


def test_me_without_a_team_is_not_found(client_for: Clients) -> None:
    apply_challenge(client_for(make_host()))
    response = _participant(client_for, "ann").get(ME)
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert TeamMember.objects.count() == 0
