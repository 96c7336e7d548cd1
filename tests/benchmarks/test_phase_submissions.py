"""Phase submissions (SPEC §11.2): made with `challenge` and `phase` on POST /api/submissions/,
refused with the contract's codes, their files held to the phase's rules, enqueued as in §3
with the phase's check before the user's quotas; question/skill submissions unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from apps.benchmarks.models import Challenge, Entry, Team, TeamMember
from apps.jobs.models import Job
from apps.quotas.models import QuotaPolicy
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.phases import (
    PREDICTIONS,
    PROGRAM,
    apply_challenge,
    enqueue,
    make_host,
    participate,
    phase_times,
    settings_of,
    submit_to_phase,
)
from tests.factories.users import make_user
from tests.submissions.conftest import add_file, create_submission

pytestmark = pytest.mark.django_db

Clients = Callable[[User], APIClient]
AFTER_THE_END = dt.datetime(2027, 2, 1, tzinfo=dt.UTC)  # the example phases end 2027-01-31


@pytest.fixture
def host_client(client_for: Clients) -> APIClient:
    return client_for(make_host())


@pytest.fixture
def pat(db: None) -> User:
    return make_user(username="pat")


@pytest.fixture
def pat_client(pat: User, client_for: Clients) -> APIClient:
    return client_for(pat)


@pytest.fixture
def digits(host_client: APIClient, pat_client: APIClient) -> None:
    """The example challenge (open, public), with pat an approved participant."""
    apply_challenge(host_client)
    assert participate(pat_client) == "approved"


def _error(response: Any, status: HTTPStatus, code: str) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    assert body["success"] is False
    return body


def test_a_predictions_submission_needs_no_entrypoint_or_config_and_gets_a_team_of_one(
    digits: None, pat: User, pat_client: APIClient
) -> None:
    created = submit_to_phase(pat_client, "dev")

    assert created.status_code == HTTPStatus.CREATED, created.json()
    body = created.json()
    assert (body["kind"], body["status"], body["score"]) == ("predictions", "draft", None)
    assert (body["entrypoint"], body["config_file"]) == ("", "")
    assert [f["filename"] for f in body["files"]] == ["predictions.csv"]
    entry = Entry.objects.select_related("team", "phase").get(submission_id=body["submission_id"])
    assert (entry.phase.slug, entry.user_id, entry.counted) == ("dev", pat.pk, False)
    assert entry.team.name == "pat"
    assert list(TeamMember.objects.values_list("team_id", "user_id")) == [(entry.team.pk, pat.pk)]

    queued = enqueue(pat_client, body["submission_id"])

    assert queued.status_code == HTTPStatus.CREATED, queued.json()
    entry.refresh_from_db()
    assert entry.counted is True
    assert Submission.objects.get(pk=body["submission_id"]).status == SubmissionStatus.PENDING


def test_a_second_submission_keeps_the_team_and_a_taken_name_gets_a_free_variant(
    digits: None, pat: User, pat_client: APIClient
) -> None:
    challenge = Challenge.objects.get(slug="digits")
    Team.objects.create(challenge=challenge, name="PAT")
    Team.objects.create(challenge=challenge, name="pat-2")

    first = submit_to_phase(pat_client, "dev").json()["submission_id"]
    second = submit_to_phase(pat_client, "code", PROGRAM).json()["submission_id"]

    team = Entry.objects.get(submission_id=first).team
    assert team.name == "pat-3"
    assert Entry.objects.get(submission_id=second).team == team
    assert TeamMember.objects.filter(user=pat).count() == 1
    assert Team.objects.count() == 3


def test_a_member_of_a_team_submits_for_it(digits: None, pat: User, pat_client: APIClient) -> None:
    challenge = Challenge.objects.get(slug="digits")
    team = Team.objects.create(challenge=challenge, name="Vision Lab")
    TeamMember.objects.create(team=team, challenge=challenge, user=pat)

    created = submit_to_phase(pat_client, "dev").json()

    assert Entry.objects.get(submission_id=created["submission_id"]).team == team
    assert Team.objects.count() == 1


def test_a_code_submission_keeps_the_program_rules(digits: None, pat_client: APIClient) -> None:
    refused = submit_to_phase(pat_client, "code", [("predictions.csv", PREDICTIONS)])
    _error(refused, HTTPStatus.BAD_REQUEST, "invalid_extension")
    assert Submission.objects.count() == 0

    created = submit_to_phase(pat_client, "code", [PROGRAM[0]])
    assert created.status_code == HTTPStatus.CREATED, created.json()
    body = created.json()
    assert (body["kind"], body["entrypoint"], body["config_file"]) == (
        "code",
        "main.py",
        "config.yaml",
    )
    missing = _error(
        enqueue(pat_client, body["submission_id"]), HTTPStatus.BAD_REQUEST, "missing_files"
    )
    assert missing["missing_files"] == ["config.yaml"]
    added = add_file(pat_client, body["submission_id"], *PROGRAM[1])
    assert added.status_code == HTTPStatus.CREATED
    assert enqueue(pat_client, body["submission_id"]).status_code == HTTPStatus.CREATED


def test_a_predictions_phase_takes_its_file_types_on_create_and_on_add(
    digits: None, pat_client: APIClient
) -> None:
    for name in ("predictions.json", "main.py", "notes.txt"):
        refused = submit_to_phase(pat_client, "dev", [(name, b"{}")])
        assert _error(refused, HTTPStatus.BAD_REQUEST, "invalid_extension")["filename"] == name
    _error(
        submit_to_phase(pat_client, "dev", [("../up.csv", PREDICTIONS)]),
        HTTPStatus.BAD_REQUEST,
        "invalid_filename",
    )
    assert Submission.objects.count() == 0

    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    _error(
        add_file(pat_client, draft, "extra.py", b"print(1)\n"),
        HTTPStatus.BAD_REQUEST,
        "invalid_extension",
    )
    assert add_file(pat_client, draft, "PART2.CSV", PREDICTIONS).status_code == HTTPStatus.CREATED
    listed = pat_client.get(f"/api/submissions/{draft}/files/").json()["files"]
    names = [f["filename"] for f in listed]
    assert names == ["predictions.csv", "PART2.CSV"]


def test_an_unknown_or_hidden_challenge_and_an_unknown_phase_are_404(
    host_client: APIClient, pat_client: APIClient
) -> None:
    apply_challenge(host_client, settings_of(visibility="private"))

    _error(submit_to_phase(pat_client, "dev", challenge="nope"), HTTPStatus.NOT_FOUND, "not_found")
    _error(submit_to_phase(pat_client, "dev"), HTTPStatus.NOT_FOUND, "not_found")
    # The host sees the challenge: an unknown phase is its own 404.
    unknown = _error(submit_to_phase(host_client, "nope"), HTTPStatus.NOT_FOUND, "not_found")
    assert "nope" in unknown["error"]
    assert Submission.objects.count() == 0


def test_only_approved_participants_submit_and_hosts_take_part_like_anyone(
    host_client: APIClient, pat_client: APIClient
) -> None:
    apply_challenge(host_client, settings_of(participation="approval"))

    _error(submit_to_phase(pat_client, "dev"), HTTPStatus.FORBIDDEN, "not_participant")
    assert participate(pat_client) == "pending"
    pending = _error(submit_to_phase(pat_client, "dev"), HTTPStatus.FORBIDDEN, "not_participant")
    assert pending["status"] == "pending"
    _error(submit_to_phase(host_client, "dev"), HTTPStatus.FORBIDDEN, "not_participant")
    assert Submission.objects.count() == 0

    assert participate(host_client) == "approved"
    assert submit_to_phase(host_client, "dev").status_code == HTTPStatus.CREATED
    pat_id = User.objects.get(username="pat").pk
    approved = host_client.post(f"/api/challenges/digits/participants/{pat_id}/approve/")
    assert approved.status_code == HTTPStatus.OK
    assert submit_to_phase(pat_client, "dev").status_code == HTTPStatus.CREATED


def test_before_the_start_and_after_the_end_creation_is_phase_closed(
    host_client: APIClient, pat_client: APIClient
) -> None:
    apply_challenge(
        host_client,
        phase_times("dev", "2030-01-01T00:00:00Z", None),
        phase_times("code", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"),
    )
    participate(pat_client)

    early = _error(submit_to_phase(pat_client, "dev"), HTTPStatus.CONFLICT, "phase_closed")
    assert (early["phase"], early["end"]) == ("dev", None)
    assert early["start"].startswith("2030-01-01T00:00:00")
    late = _error(submit_to_phase(pat_client, "code", PROGRAM), HTTPStatus.CONFLICT, "phase_closed")
    assert late["end"].startswith("2026-02-01T00:00:00")
    assert Submission.objects.count() == Entry.objects.count() == Team.objects.count() == 0

    with time_machine.travel(dt.datetime(2030, 1, 1, tzinfo=dt.UTC), tick=True):
        # The start is included.
        assert submit_to_phase(pat_client, "dev").status_code == HTTPStatus.CREATED


def test_the_place_fields_come_together_and_without_a_question(
    digits: None, pat_client: APIClient
) -> None:
    alone = _error(
        create_submission(pat_client, [("p.csv", PREDICTIONS)], fields=[("phase", "dev")]),
        HTTPStatus.BAD_REQUEST,
        "invalid_request",
    )
    assert set(alone["fields"]) == {"challenge"}
    mixed = _error(
        submit_to_phase(pat_client, "dev", fields=[("question_id", "q1"), ("skill", "s")]),
        HTTPStatus.BAD_REQUEST,
        "invalid_request",
    )
    assert set(mixed["fields"]) == {"question_id", "skill"}
    _error(
        submit_to_phase(pat_client, "dev", challenge="di\x00gits"),
        HTTPStatus.BAD_REQUEST,
        "invalid_request",
    )
    assert Submission.objects.count() == 0


def test_enqueue_after_the_end_is_phase_closed_before_the_users_quotas(
    digits: None, pat: User, pat_client: APIClient
) -> None:
    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    incomplete = submit_to_phase(pat_client, "code", [PROGRAM[0]]).json()["submission_id"]
    # A user quota that would refuse anything: the phase's check comes first.
    QuotaPolicy.objects.update_or_create(
        user=pat, defaults={"max_concurrent_jobs": 0, "max_jobs_per_day": 0}
    )

    with time_machine.travel(AFTER_THE_END, tick=True):
        closed = _error(enqueue(pat_client, draft), HTTPStatus.CONFLICT, "phase_closed")
        # Completeness comes before the phase's check.
        _error(enqueue(pat_client, incomplete), HTTPStatus.BAD_REQUEST, "missing_files")

    assert closed["phase"] == "dev"
    assert Submission.objects.get(pk=draft).status == SubmissionStatus.DRAFT
    assert Entry.objects.get(submission_id=draft).counted is False
    assert Job.objects.count() == 0
    # In the window, the user's quotas decide as in §3.
    _error(enqueue(pat_client, draft), HTTPStatus.TOO_MANY_REQUESTS, "rate_limited")


def test_a_replay_of_an_enqueue_answers_its_job_after_the_end(
    digits: None, pat_client: APIClient
) -> None:
    draft = submit_to_phase(pat_client, "dev").json()["submission_id"]
    with time_machine.travel(AFTER_THE_END - dt.timedelta(hours=1), tick=True):
        first = enqueue(pat_client, draft, idempotency_key="phase-key")
    assert first.status_code == HTTPStatus.CREATED

    # Within the key's TTL, after the end.
    with time_machine.travel(AFTER_THE_END + dt.timedelta(hours=1), tick=True):
        replay = enqueue(pat_client, draft, idempotency_key="phase-key")

    assert replay.status_code == HTTPStatus.OK, replay.json()
    assert replay.json()["job_id"] == first.json()["job_id"]
    assert replay.json()["idempotent_hit"] is True
    assert Job.objects.count() == 1


def test_an_entry_whose_phase_a_bundle_removed_is_not_enqueued(
    digits: None, host_client: APIClient, pat_client: APIClient
) -> None:
    draft = submit_to_phase(pat_client, "code", PROGRAM).json()["submission_id"]

    def drop_code(document: dict[str, Any]) -> None:
        document["phases"] = [p for p in document["phases"] if p["slug"] != "code"]

    apply_challenge(host_client, drop_code, expect=HTTPStatus.OK)

    _error(enqueue(pat_client, draft), HTTPStatus.CONFLICT, "phase_closed")
    assert Job.objects.count() == 0


def test_a_question_submission_is_unchanged_and_phase_submissions_stay_off_its_leaderboard(
    digits: None, pat: User, pat_client: APIClient, api_client: APIClient
) -> None:
    program = create_submission(pat_client, PROGRAM, fields=[("question_id", "q1")])
    assert program.status_code == HTTPStatus.CREATED
    assert program.json()["kind"] == "program"
    assert enqueue(pat_client, program.json()["submission_id"]).status_code == HTTPStatus.CREATED
    # §4's extensions still hold for it.
    _error(
        create_submission(pat_client, [("p.csv", PREDICTIONS)]),
        HTTPStatus.BAD_REQUEST,
        "invalid_extension",
    )

    phase = submit_to_phase(pat_client, "dev").json()["submission_id"]
    Submission.objects.filter(pk=program.json()["submission_id"]).update(
        status=SubmissionStatus.COMPLETED, score=0.5
    )
    Submission.objects.filter(pk=phase).update(status=SubmissionStatus.COMPLETED)
    with pytest.raises(IntegrityError), transaction.atomic():
        Submission.objects.filter(pk=phase).update(score=0.99)

    rows = api_client.get("/api/leaderboard/?question_id=q1").json()
    assert [r["submission_id"] for r in rows] == [program.json()["submission_id"]]
    everything = api_client.get("/api/leaderboard/").json()
    assert [r["submission_id"] for r in everything] == [program.json()["submission_id"]]
    questions = api_client.get("/api/leaderboard/questions/").json()
    assert [q["question_id"] for q in questions] == ["q1"]
