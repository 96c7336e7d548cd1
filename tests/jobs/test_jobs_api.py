"""Job list, detail, cancel, logs; dead-claim takeover."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.exceptions import IdempotencyRequestInProgress
from apps.jobs.models import IdempotencyKey, Job, JobStatus
from apps.jobs.services import (
    IdempotencyClaim,
    idempotency_bind,
    idempotency_fingerprint,
    job_transition,
)
from apps.submissions.models import SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_submission

pytestmark = pytest.mark.django_db

Submit = Callable[..., Any]


def test_list_shows_only_own_jobs_newest_first_and_filters_by_status(
    user: User, other_user: User, user_client: APIClient
) -> None:
    old = make_job(owner=user, status="completed")
    new = make_job(owner=user)
    make_job(owner=other_user)
    response = user_client.get("/api/jobs/")
    assert response.status_code == HTTPStatus.OK
    assert [row["job_id"] for row in response.json()] == [new.pk, old.pk]
    row = response.json()[0]
    assert row["submission_id"] == new.submission_id
    assert set(row) == {
        "job_id",
        "submission_id",
        "status",
        "submission_status",
        "score",
        "resource_class",
        "cost",
        "config",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    }
    completed = user_client.get("/api/jobs/", {"status": "completed"}).json()
    assert [row["job_id"] for row in completed] == [old.pk]


def test_list_with_an_unknown_status_is_invalid(user_client: APIClient) -> None:
    response = user_client.get("/api/jobs/", {"status": "bogus"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("suffix", ["", "logs/"])
def test_detail_and_logs_of_own_job(user: User, user_client: APIClient, suffix: str) -> None:
    job = make_job(owner=user, logs="epoch 1\nscore 0.9\n")
    response = user_client.get(f"/api/jobs/{job.pk}/{suffix}")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["job_id"] == job.pk
    if suffix:
        assert response.json() == {
            "job_id": job.pk,
            "status": "queued",
            "logs": "epoch 1\nscore 0.9\n",
            "error": "",
        }


@pytest.mark.parametrize(("method", "suffix"), [("get", ""), ("get", "logs/"), ("post", "cancel/")])
def test_another_users_job_is_403_and_unknown_is_404(
    other_user: User, user_client: APIClient, method: str, suffix: str
) -> None:
    theirs = make_job(owner=other_user, logs="secret")
    call = getattr(user_client, method)
    forbidden = call(f"/api/jobs/{theirs.pk}/{suffix}")
    assert forbidden.status_code == HTTPStatus.FORBIDDEN
    assert forbidden.json()["code"] == "permission_denied"
    assert "secret" not in forbidden.content.decode()
    missing = call(f"/api/jobs/{'f' * 32}/{suffix}")
    assert missing.status_code == HTTPStatus.NOT_FOUND
    assert missing.json()["code"] == "not_found"
    theirs.refresh_from_db()
    assert theirs.status == JobStatus.QUEUED


def test_cancel_fails_the_submission_clears_its_lease_and_is_repeatable(
    submit: Submit, user: User, user_client: APIClient
) -> None:
    submission = make_submission(owner=user)
    job_id = submit({"submission_id": submission.pk}).json()["job_id"]
    # A grading worker holds the submission.
    from apps.submissions.services.leases import submission_lease_take

    submission.refresh_from_db()
    assert submission_lease_take(
        submission=submission,
        token="a" * 32,
        expires_at=timezone.now() + dt.timedelta(minutes=5),
    )
    job_transition(job=Job.objects.get(pk=job_id), to=JobStatus.RUNNING)

    response = user_client.post(f"/api/jobs/{job_id}/cancel/")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["status"] == "cancelled"
    assert response.json()["finished_at"] is not None
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert submission.status_reason == "job cancelled"
    assert submission.lease_token == ""
    assert submission.lease_expires_at is None

    again = user_client.post(f"/api/jobs/{job_id}/cancel/")
    assert again.status_code == HTTPStatus.OK
    assert again.json()["status"] == "cancelled"


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_a_finished_job_cannot_be_cancelled(
    user: User, user_client: APIClient, status: str
) -> None:
    job = make_job(owner=user, status=status)
    response = user_client.post(f"/api/jobs/{job.pk}/cancel/")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"
    job.refresh_from_db()
    assert job.status == status


def test_cancel_frees_a_slot_at_once(submit: Submit, user: User, user_client: APIClient) -> None:
    job_ids = [
        submit({"submission_id": make_submission(owner=user).pk}).json()["job_id"] for _ in range(5)
    ]
    assert (
        submit({"submission_id": make_submission(owner=user).pk}).json()["code"] == "quota_exceeded"
    )
    assert user_client.post(f"/api/jobs/{job_ids[0]}/cancel/").status_code == HTTPStatus.OK
    assert (
        submit({"submission_id": make_submission(owner=user).pk}).status_code == HTTPStatus.CREATED
    )


def _claim_left_by_a_dead_request(
    user: User, body: dict[str, Any], at: dt.datetime
) -> IdempotencyKey:
    return IdempotencyKey.objects.create(
        user=user,
        key=body["idempotency_key"],
        fingerprint=idempotency_fingerprint(
            submission_id=body["submission_id"], config={}, reservation_id=None
        ),
        lock_token="d" * 32,
        locked_at=at,
        created_at=at,
        expires_at=at + dt.timedelta(hours=24),
    )


def test_claim_of_a_dead_request_is_taken_over_after_the_lock_timeout(
    submit: Submit, user: User, settings: Any
) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
    start = timezone.now()
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "crashed"}
    dead = _claim_left_by_a_dead_request(user, body, start)

    with time_machine.travel(start + dt.timedelta(seconds=59), tick=False):
        busy = submit(body)
    assert busy.status_code == HTTPStatus.CONFLICT
    assert busy.json()["code"] == "idempotency_request_in_progress"
    assert IdempotencyKey.objects.filter(pk=dead.pk, lock_token=dead.lock_token).exists(), (
        "a refused request never releases someone else's claim"
    )

    with time_machine.travel(start + dt.timedelta(seconds=61), tick=False):
        taken = submit(body)
    assert taken.status_code == HTTPStatus.CREATED
    assert IdempotencyKey.objects.get(pk=dead.pk).job_id == taken.json()["job_id"]

    # The dead request wakes up: it no longer holds the key and cannot bind another job.
    with pytest.raises(IdempotencyRequestInProgress):
        idempotency_bind(
            claim=IdempotencyClaim(key_id=dead.pk, token=dead.lock_token),
            job=make_job(owner=user),
            ttl_hours=24,
        )
    assert IdempotencyKey.objects.get(pk=dead.pk).job_id == taken.json()["job_id"]


def test_in_progress_key_with_another_payload_is_reused(submit: Submit, user: User) -> None:
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "busy"}
    _claim_left_by_a_dead_request(user, body, timezone.now())
    response = submit({**body, "config": {"resource_class": "small"}})
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json()["code"] == "idempotency_key_reused"


def test_jobs_show_their_submissions_state_and_score(user_client: Any, user: Any) -> None:
    from tests.factories.submissions import make_graded_submission

    job = make_job(make_graded_submission(user, score=0.625), status="completed")

    row = user_client.get("/api/jobs/").json()[0]
    detail = user_client.get(f"/api/jobs/{job.pk}/").json()

    assert (row["submission_status"], row["score"]) == ("completed", 0.625)
    assert (detail["submission_status"], detail["score"]) == ("completed", 0.625)
