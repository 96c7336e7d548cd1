"""The hosts' list of a phase's submissions: every submission with both stages' logs, every
split's scores, `counted`, `refund_reason` and `failure`, paginated; 403 for anyone else."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry
from apps.jobs.models import Job
from apps.submissions.models import SubmissionStatus
from tests.benchmarks.boards import (
    T0,
    acc,
    make_entry,
    make_phase,
    make_team,
    phase_changed,
    scored,
)
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

ClientFor = Callable[[User], APIClient]
LIST = "/api/challenges/digits/phases/dev/submissions/"


def test_hosts_and_staff_read_every_submission_with_both_logs_and_every_split(
    tmp_path: Path, client_for: ClientFor
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, host=host)
    member = make_user(username="member")
    team = make_team(phase, "t", member)
    good = scored(phase, team, minutes=0, public=acc(0.5, 1), private=acc(0.75, 2))
    old = Job.objects.create(owner=member, submission=good.submission, logs="old run")
    Job.objects.filter(pk=old.pk).update(created_at=T0)
    Job.objects.create(owner=member, submission=good.submission, logs="run log")
    bad = make_entry(phase, team, status=SubmissionStatus.FAILED, counted=False)
    Entry.objects.filter(pk=bad.pk).update(
        failure="scoring_failed", refund_reason="scoring_failed", scoring_logs="Traceback..."
    )

    for client in (client_for(host), client_for(make_user(username="root", is_staff=True))):
        response = client.get(LIST)
        assert response.status_code == HTTPStatus.OK, response.content
        body = response.json()
        assert (body["count"], body["scoring_version"]) == (2, 1)
        by_id = {item["submission_id"]: item for item in body["results"]}
        assert by_id[good.pk]["logs"] == "run log"
        assert by_id[good.pk]["scores"] == {
            "public": {"accuracy": 0.5, "errors": 1.0},
            "private": {"accuracy": 0.75, "errors": 2.0},
        }
        assert by_id[good.pk]["counted"] is True
        assert by_id[good.pk]["team"] == {"id": team.pk, "name": "t"}
        assert by_id[good.pk]["user"] == {"id": member.pk, "username": "member"}
        failed = by_id[bad.pk]
        assert (failed["status"], failed["counted"], failed["refund_reason"]) == (
            "failed",
            False,
            "scoring_failed",
        )
        assert (failed["failure"], failed["scoring_logs"]) == ("scoring_failed", "Traceback...")
        assert failed["scores"] == {}


def test_pages_of_the_hosts_list(tmp_path: Path, client_for: ClientFor) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    phase = make_phase(tmp_path, host=host)
    team = make_team(phase, "t", make_user(username="m"))
    entries = [scored(phase, team, minutes=i, public=acc(0.1 * i)) for i in range(5)]
    client = client_for(host)

    first = client.get(LIST + "?limit=2").json()
    rest = client.get(first["next"]).json()

    assert first["count"] == 5
    assert len(first["results"]) == 2
    seen = [i["submission_id"] for i in first["results"] + rest["results"]]
    assert set(seen) <= {e.pk for e in entries}
    assert len(set(seen)) == 4
    assert client.get(LIST + "?limit=0").json()["code"] == "invalid_request"


def test_anyone_else_is_refused(
    tmp_path: Path, client_for: ClientFor, api_client: APIClient
) -> None:
    phase = make_phase(tmp_path)
    member = make_user(username="member")
    team = make_team(phase, "t", member)
    scored(phase, team, public=acc(0.5), private=acc(0.123456))

    for client in (client_for(member), client_for(make_user(username="x"))):
        response = client.get(LIST)
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert response.json()["code"] == "permission_denied"
        assert b"0.123456" not in response.content
    assert api_client.get(LIST).status_code == HTTPStatus.UNAUTHORIZED


def test_a_private_challenge_is_not_found_for_a_stranger(
    tmp_path: Path, client_for: ClientFor
) -> None:
    make_phase(tmp_path, phase_changed(visibility="private"))

    response = client_for(make_user(username="x")).get(LIST)

    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"
