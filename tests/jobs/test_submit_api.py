"""POST /api/jobs/: bodies, codes and the SPEC's order of checks."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import redis
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from django_q.models import OrmQ
from rest_framework.test import APIClient

from apps.core.queue import GRADE_JOB as GRADE_TASK
from apps.jobs.models import IdempotencyKey, Job, JobStatus
from apps.jobs.services import job_transition
from apps.quotas.models import QuotaPolicy, Reservation
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from tests.brokers import queued_tasks, unreachable_broker
from tests.factories.jobs import make_job
from tests.factories.submissions import make_submission

pytestmark = pytest.mark.django_db

Submit = Callable[..., Any]


def _grade_callbacks(callbacks: list[Callable[[], Any]]) -> list[tuple[Any, ...]]:
    return queued_tasks(callbacks)


def test_new_job_is_queued_and_seals_the_submission(
    submit: Submit, ready_submission: Submission, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = submit({"submission_id": ready_submission.pk, "idempotency_key": "k-1"})

    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    job = Job.objects.get()
    assert body == {
        "success": True,
        "job_id": job.pk,
        "status": "queued",
        "idempotent_hit": False,
        "quota_warnings": [],
        "cost_limit_warning": None,
    }
    assert "Idempotent-Replayed" not in response.headers
    ready_submission.refresh_from_db()
    assert ready_submission.status == SubmissionStatus.PENDING
    assert job.resource_class == "medium"
    assert job.cost == 2
    assert _grade_callbacks(callbacks) == [(GRADE_TASK, job.pk)]


def test_submission_without_key_makes_a_job_each_time(
    submit: Submit, user: User, django_capture_on_commit_callbacks: Any
) -> None:
    first, second = make_submission(owner=user), make_submission(owner=user)
    with django_capture_on_commit_callbacks() as callbacks:
        assert submit({"submission_id": first.pk}).status_code == HTTPStatus.CREATED
        assert submit({"submission_id": second.pk}).status_code == HTTPStatus.CREATED
    assert Job.objects.count() == 2
    assert len(_grade_callbacks(callbacks)) == 2


def test_replay_returns_the_jobs_current_status_and_enqueues_nothing(
    submit: Submit, ready_submission: Submission, django_capture_on_commit_callbacks: Any
) -> None:
    body = {"submission_id": ready_submission.pk, "idempotency_key": "ci-build-abc123"}
    job_id = submit(body).json()["job_id"]
    job_transition(job=Job.objects.get(pk=job_id), to=JobStatus.RUNNING)
    OrmQ.objects.all().delete()  # the first submission's task

    with django_capture_on_commit_callbacks() as callbacks:
        replay = submit(body)

    assert replay.status_code == HTTPStatus.OK
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json() == {
        "success": True,
        "job_id": job_id,
        "status": "running",
        "idempotent_hit": True,
    }
    assert Job.objects.count() == 1
    assert _grade_callbacks(callbacks) == []


def test_key_may_come_from_the_header(submit: Submit, ready_submission: Submission) -> None:
    body = {"submission_id": ready_submission.pk}
    first = submit(body, **{"Idempotency-Key": "hdr-1"})
    again = submit({**body, "idempotency_key": "hdr-1"}, **{"Idempotency-Key": "hdr-1"})
    assert first.status_code == HTTPStatus.CREATED
    assert again.status_code == HTTPStatus.OK
    assert again.json()["job_id"] == first.json()["job_id"]


def test_header_and_body_keys_that_differ_are_refused(
    submit: Submit, ready_submission: Submission
) -> None:
    response = submit(
        {"submission_id": ready_submission.pk, "idempotency_key": "a"}, **{"Idempotency-Key": "b"}
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "idempotency_key_mismatch"
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "key", ["", "has space", "tab\there", "x" * 257, "caf\u00e9", "nul\x00", "line\nbreak"]
)
def test_malformed_keys_are_refused(submit: Submit, ready_submission: Submission, key: str) -> None:
    response = submit({"submission_id": ready_submission.pk, "idempotency_key": key})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_idempotency_key"
    assert IdempotencyKey.objects.count() == 0


@pytest.mark.parametrize("key", ["gh-owner/repo-0123abcd", "x" * 256, "!~:@#"])
def test_recommended_key_formats_are_accepted(
    submit: Submit, ready_submission: Submission, key: str
) -> None:
    response = submit({"submission_id": ready_submission.pk, "idempotency_key": key})
    assert response.status_code == HTTPStatus.CREATED


@pytest.mark.parametrize(
    "change",
    [
        {"config": {"resource_class": "small"}},
        {"submission_id": "other"},
        {"reservation_id": "0" * 32},
    ],
)
def test_same_key_with_another_payload_is_refused(
    submit: Submit, ready_submission: Submission, user: User, change: dict[str, Any]
) -> None:
    body = {"submission_id": ready_submission.pk, "idempotency_key": "same"}
    assert submit(body).status_code == HTTPStatus.CREATED
    if change.get("submission_id") == "other":
        change = {"submission_id": make_submission(owner=user).pk}
    response = submit({**body, **change})
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json()["code"] == "idempotency_key_reused"
    assert Job.objects.count() == 1


def test_ttl_hours_out_of_range_is_invalid(submit: Submit, ready_submission: Submission) -> None:
    for hours in (0, 169, "x"):
        response = submit(
            {
                "submission_id": ready_submission.pk,
                "idempotency_key": "k",
                "idempotency_ttl_hours": hours,
            }
        )
        assert response.status_code == HTTPStatus.BAD_REQUEST
        assert response.json()["code"] == "invalid_request"
        assert "idempotency_ttl_hours" in response.json()["fields"]


def test_replay_is_never_refused_by_quota_rate_cost_or_completeness(
    submit: Submit, ready_submission: Submission, user: User
) -> None:
    QuotaPolicy.objects.create(
        user=user, max_concurrent_jobs=1, max_jobs_per_day=1, monthly_cost_limit=2
    )
    body = {"submission_id": ready_submission.pk, "idempotency_key": "retry-me"}
    assert submit(body).status_code == HTTPStatus.CREATED
    SubmissionFile.objects.filter(submission=ready_submission).delete()

    replay = submit(body)
    assert replay.status_code == HTTPStatus.OK
    assert replay.json()["idempotent_hit"] is True


def test_unauthenticated_is_401(api_client: APIClient, ready_submission: Submission) -> None:
    response = api_client.post("/api/jobs/", {"submission_id": ready_submission.pk}, format="json")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json()["code"] == "not_authenticated"


def test_unknown_submission_is_404(submit: Submit) -> None:
    response = submit({"submission_id": "f" * 32, "idempotency_key": "k"})
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"
    assert IdempotencyKey.objects.count() == 0, "a failed request releases its claim"


def test_someone_elses_submission_is_403(submit: Submit, other_user: User) -> None:
    theirs = make_submission(owner=other_user)
    response = submit({"submission_id": theirs.pk})
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    theirs.refresh_from_db()
    assert theirs.status == SubmissionStatus.DRAFT


@pytest.mark.parametrize(
    ("files", "missing", "message"),
    [
        (("main.py",), ["config.yaml"], "config file not found: config.yaml"),
        (("config.yaml",), ["main.py"], "entrypoint not found: main.py"),
        ((), ["main.py", "config.yaml"], "entrypoint not found: main.py"),
    ],
)
def test_incomplete_submission_is_refused_with_missing_files(
    submit: Submit, user: User, files: tuple[str, ...], missing: list[str], message: str
) -> None:
    submission = make_submission(owner=user, files=files)
    response = submit({"submission_id": submission.pk})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["code"] == "missing_files"
    assert body["missing_files"] == missing
    assert message in body["error"]
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.DRAFT


def test_custom_entrypoint_and_config_names_are_checked(submit: Submit, user: User) -> None:
    submission = make_submission(
        owner=user, entrypoint="run.py", config_file="cfg.yaml", files=("run.py",)
    )
    response = submit({"submission_id": submission.pk})
    assert response.json()["missing_files"] == ["cfg.yaml"]


@pytest.mark.parametrize("status", ["pending", "processing", "completed", "failed"])
def test_only_a_draft_submission_can_be_enqueued(submit: Submit, user: User, status: str) -> None:
    submission = make_submission(owner=user, status=status)
    response = submit({"submission_id": submission.pk})
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"
    assert Job.objects.count() == 0


def test_second_in_flight_submission_for_a_question_is_refused(submit: Submit, user: User) -> None:
    first = make_submission(owner=user, question_id="q1", skill="nlp")
    second = make_submission(owner=user, question_id="q1", skill="nlp")
    other_skill = make_submission(owner=user, question_id="q1", skill="cv")
    assert submit({"submission_id": first.pk}).status_code == HTTPStatus.CREATED

    response = submit({"submission_id": second.pk, "idempotency_key": "dup"})
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "duplicate_in_flight"
    second.refresh_from_db()
    assert second.status == SubmissionStatus.DRAFT
    assert submit({"submission_id": other_skill.pk}).status_code == HTTPStatus.CREATED


def test_submissions_without_a_question_are_not_deduplicated(submit: Submit, user: User) -> None:
    for _ in range(2):
        assert submit({"submission_id": make_submission(owner=user).pk}).status_code == 201


def test_sixth_concurrent_job_is_refused_with_the_users_limit(submit: Submit, user: User) -> None:
    for _ in range(5):
        assert submit({"submission_id": make_submission(owner=user).pk}).status_code == 201
    submission = make_submission(owner=user)
    response = submit({"submission_id": submission.pk, "idempotency_key": "sixth"})
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert response.json()["code"] == "quota_exceeded"
    assert response.json()["error"] == "Quota exceeded: Maximum 5 concurrent jobs allowed"
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.DRAFT, "a refusal loses nothing"


def test_policy_limit_and_boost_set_the_concurrent_limit(submit: Submit, user: User) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1, concurrent_boost=1)
    for _ in range(2):
        assert submit({"submission_id": make_submission(owner=user).pk}).status_code == 201
    response = submit({"submission_id": make_submission(owner=user).pk})
    assert response.json()["error"] == "Quota exceeded: Maximum 2 concurrent jobs allowed"


def test_a_refused_request_releases_its_key_so_the_retry_runs_again(
    submit: Submit, user: User
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    running = make_submission(owner=user)
    first_job = submit({"submission_id": running.pk}).json()["job_id"]
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "after-quota"}
    assert submit(body).json()["code"] == "quota_exceeded"

    job_transition(job=Job.objects.get(pk=first_job), to=JobStatus.CANCELLED)
    retry = submit(body)
    assert retry.status_code == HTTPStatus.CREATED
    assert retry.json()["idempotent_hit"] is False


def test_rate_limit_answers_retry_after_until_the_oldest_job_leaves_the_window(
    submit: Submit, user: User
) -> None:
    QuotaPolicy.objects.create(user=user, max_jobs_per_day=2)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        make_job(owner=user, status="completed")
    with time_machine.travel(start + dt.timedelta(hours=1), tick=False):
        make_job(owner=user, status="completed")
    with time_machine.travel(start + dt.timedelta(hours=10), tick=False):
        response = submit({"submission_id": make_submission(owner=user).pk})
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert response.json()["code"] == "rate_limited"
    assert response.headers["Retry-After"] == str(14 * 3600)
    with time_machine.travel(start + dt.timedelta(hours=24, seconds=1), tick=False):
        response = submit({"submission_id": make_submission(owner=user).pk})
    assert response.status_code == HTTPStatus.CREATED


def test_cost_limit_allows_reaching_it_exactly_and_refuses_passing_it(
    submit: Submit, user: User
) -> None:
    QuotaPolicy.objects.create(user=user, monthly_cost_limit=6)
    small = {"resource_class": "small"}
    large = {"resource_class": "large"}
    first = submit({"submission_id": make_submission(owner=user).pk, "config": large})
    assert first.status_code == HTTPStatus.CREATED
    assert first.json()["cost_limit_warning"] is None
    refused = submit({"submission_id": make_submission(owner=user).pk, "config": large})
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert refused.json()["code"] == "cost_limit_exceeded"
    assert refused.json()["error"].startswith("Cost limit")
    second = submit({"submission_id": make_submission(owner=user).pk, "config": small})
    assert second.status_code == HTTPStatus.CREATED
    assert second.json()["cost_limit_warning"].startswith("Cost limit warning: 5 of 6")
    third = submit({"submission_id": make_submission(owner=user).pk, "config": small})
    assert third.status_code == HTTPStatus.CREATED, "reaching the limit exactly is allowed"


def test_cost_of_last_month_does_not_count(submit: Submit, user: User) -> None:
    QuotaPolicy.objects.create(user=user, monthly_cost_limit=4)
    with time_machine.travel(dt.datetime(2026, 10, 31, 23, 0, tzinfo=dt.UTC), tick=False):
        make_job(owner=user, status="completed", cost=4)
    with time_machine.travel(dt.datetime(2026, 11, 1, 0, 30, tzinfo=dt.UTC), tick=False):
        response = submit({"submission_id": make_submission(owner=user).pk})
    assert response.status_code == HTTPStatus.CREATED


def test_quota_warnings_name_each_quota_at_80_percent(submit: Submit, user: User) -> None:
    QuotaPolicy.objects.create(
        user=user, max_concurrent_jobs=5, max_jobs_per_day=5, monthly_cost_limit=10
    )
    for _ in range(3):
        submit({"submission_id": make_submission(owner=user).pk})
    response = submit({"submission_id": make_submission(owner=user).pk})
    warnings = response.json()["quota_warnings"]
    assert warnings == [
        "Concurrent jobs: 4 of 5 slots in use.",
        "Daily jobs: 4 of 5 in the last 24 hours.",
        "Monthly cost: 8 of 10 cost units used this month.",
    ]
    assert response.json()["cost_limit_warning"] == (
        "Cost limit warning: 8 of 10 cost units used this month (80%)."
    )


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"resource_class": "huge"}, "config"),
        ({"resource_class": 3}, "config"),
        ([1, 2], "config"),
        ({"name": "nul\x00"}, "config"),
        ({"nul\x00": 1}, "config"),
    ],
)
def test_bad_config_is_invalid(
    submit: Submit, ready_submission: Submission, config: Any, field: str
) -> None:
    response = submit({"submission_id": ready_submission.pk, "config": config})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
    assert field in response.json()["fields"]


@pytest.mark.parametrize("body", [{}, {"submission_id": "a\x00b"}, {"submission_id": ""}])
def test_bad_submission_id_is_invalid(submit: Submit, body: dict[str, Any]) -> None:
    response = submit(body)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


def test_same_key_from_two_users_makes_two_jobs(
    submit: Submit, user: User, other_user: User, other_client: APIClient
) -> None:
    mine = submit({"submission_id": make_submission(owner=user).pk, "idempotency_key": "shared"})
    theirs = submit(
        {"submission_id": make_submission(owner=other_user).pk, "idempotency_key": "shared"},
        client=other_client,
    )
    assert mine.status_code == theirs.status_code == HTTPStatus.CREATED
    assert mine.json()["job_id"] != theirs.json()["job_id"]
    # Bob replaying with alice's payload learns nothing about her job.
    bobs_try = submit(
        {
            "submission_id": Job.objects.get(pk=mine.json()["job_id"]).submission_id,
            "idempotency_key": "shared",
        },
        client=other_client,
    )
    assert bobs_try.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert mine.json()["job_id"] not in bobs_try.content.decode()


def test_key_past_its_ttl_makes_a_new_job(submit: Submit, user: User) -> None:
    start = timezone.now()
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "daily"}
    with time_machine.travel(start, tick=False):
        first = submit(body)
    with time_machine.travel(start + dt.timedelta(hours=23, minutes=59), tick=False):
        assert submit(body).status_code == HTTPStatus.OK
    with time_machine.travel(start + dt.timedelta(hours=24, seconds=1), tick=False):
        # The same payload is no replay any more: its submission is not a draft now.
        assert submit(body).json()["code"] == "invalid_transition"
        fresh = submit({**body, "submission_id": make_submission(owner=user).pk})
    assert fresh.status_code == HTTPStatus.CREATED
    assert fresh.json()["job_id"] != first.json()["job_id"]
    assert IdempotencyKey.objects.get(key="daily").job_id == fresh.json()["job_id"]


def test_per_key_ttl_hours(submit: Submit, user: User) -> None:
    start = timezone.now()
    body = {
        "submission_id": make_submission(owner=user).pk,
        "idempotency_key": "short",
        "idempotency_ttl_hours": 1,
    }
    with time_machine.travel(start, tick=False):
        submit(body)
    with time_machine.travel(start + dt.timedelta(minutes=61), tick=False):
        fresh = submit({**body, "submission_id": make_submission(owner=user).pk})
    assert fresh.status_code == HTTPStatus.CREATED


def test_job_with_reservation_consumes_it_without_a_second_slot(
    submit: Submit, user: User, user_client: APIClient
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    reservation_id = user_client.post("/api/quotas/reservations/", {}, format="json").json()[
        "reservation_id"
    ]
    refused = submit({"submission_id": make_submission(owner=user).pk})
    assert refused.json()["code"] == "quota_exceeded", "the reservation holds the only slot"

    response = submit(
        {"submission_id": make_submission(owner=user).pk, "reservation_id": reservation_id}
    )
    assert response.status_code == HTTPStatus.CREATED
    reservation = Reservation.objects.get(pk=reservation_id)
    assert reservation.consumed_at is not None
    assert reservation.job_id == response.json()["job_id"]
    me = user_client.get("/api/quotas/me/").json()
    assert (me["active_jobs"], me["active_reservations"], me["available_slots"]) == (1, 0, 0)


def test_unusable_reservations_are_refused(
    submit: Submit, user: User, other_user: User, user_client: APIClient
) -> None:
    now = timezone.now()
    expired = Reservation.objects.create(user=user, expires_at=now - dt.timedelta(seconds=1))
    released = Reservation.objects.create(
        user=user, expires_at=now + dt.timedelta(minutes=5), released_at=now
    )
    consumed = Reservation.objects.create(
        user=user, expires_at=now + dt.timedelta(minutes=5), consumed_at=now
    )
    foreign = Reservation.objects.create(user=other_user, expires_at=now + dt.timedelta(minutes=5))
    for reservation_id in (expired.pk, released.pk, consumed.pk, foreign.pk, "0" * 32):
        submission = make_submission(owner=user)
        response = submit({"submission_id": submission.pk, "reservation_id": reservation_id})
        assert response.status_code == HTTPStatus.CONFLICT, reservation_id
        assert response.json()["code"] == "reservation_not_active"
        submission.refresh_from_db()
        assert submission.status == SubmissionStatus.DRAFT
    foreign.refresh_from_db()
    assert foreign.consumed_at is None
    assert Job.objects.count() == 0


def test_a_broker_that_refuses_the_task_does_not_fail_the_committed_job(
    submit: Submit,
    ready_submission: Submission,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The broker is down when the job commits: the client still gets its job (a 500 would
    invite a retry of what already happened), the failure is logged, and a retry replays."""
    broker = unreachable_broker()
    monkeypatch.setattr("apps.core.queue.task_broker", lambda: broker)
    body = {"submission_id": ready_submission.pk, "idempotency_key": "k-down"}
    with (
        caplog.at_level(logging.ERROR, logger="apps.core.queue"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = submit(body)

    assert response.status_code == HTTPStatus.CREATED
    job = Job.objects.get()
    assert response.json()["job_id"] == job.pk
    assert job.status == JobStatus.QUEUED
    assert IdempotencyKey.objects.get(key="k-down").job_id == job.pk
    [record] = [r for r in caplog.records if r.name == "apps.core.queue"]
    assert GRADE_TASK in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], redis.ConnectionError)

    replay = submit(body)
    assert replay.status_code == HTTPStatus.OK
    assert replay.json()["job_id"] == job.pk
    assert Job.objects.count() == 1
