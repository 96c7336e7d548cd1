"""Job-submission and quota metrics, read from a real /metrics scrape after requests through
the API: submissions by outcome, idempotency takeovers, quota denials by kind, reservations by
state, jobs finished by status."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.models import IdempotencyKey
from apps.quotas.models import QuotaPolicy
from tests.factories.submissions import make_submission
from tests.metrics import deltas, scrape

# Reservations and finished jobs are counted once their transaction commits.
pytestmark = pytest.mark.django_db(transaction=True)

SUBMISSIONS = "yoyaku_job_submissions_total"


def post_job(client: APIClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/api/jobs/", body, format="json", headers=headers)


def test_submissions_are_counted_by_outcome(
    user: User, user_client: APIClient, other_client: APIClient, settings: Any
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=2, monthly_cost_limit=5)
    subs = [make_submission(owner=user) for _ in range(4)]
    incomplete = make_submission(owner=user, files=("main.py",))
    before = scrape(settings)
    codes = [
        post_job(user_client, {"submission_id": subs[0].pk}, **{"Idempotency-Key": "k1"}),  # 201
        post_job(user_client, {"submission_id": subs[0].pk}, **{"Idempotency-Key": "k1"}),  # 200
        post_job(user_client, {"submission_id": subs[1].pk}, **{"Idempotency-Key": "k1"}),  # 422
        post_job(user_client, {"submission_id": subs[1].pk, "config": {"resource_class": "small"}}),
        # cost so far 2 + 1; a large job (4) passes the limit of 5
        post_job(user_client, {"submission_id": subs[2].pk, "config": {"resource_class": "large"}}),
        # two jobs running: the concurrent limit (2) refuses a third
        post_job(user_client, {"submission_id": subs[3].pk, "config": {"resource_class": "small"}}),
        post_job(user_client, {"submission_id": incomplete.pk}),  # missing_files
        post_job(other_client, {"submission_id": subs[3].pk}),  # permission_denied
        post_job(user_client, {"submission_id": subs[0].pk}, **{"Idempotency-Key": "a,b"}),
    ]
    assert [c.status_code for c in codes] == [201, 200, 422, 201, 429, 429, 400, 403, 400]
    after = scrape(settings)
    assert deltas(before, after, SUBMISSIONS, "outcome") == {
        "created": 2,
        "replay": 1,
        "idempotency_key_reused": 1,
        "cost_limit_exceeded": 1,
        "quota_exceeded": 1,
        "missing_files": 1,
        "permission_denied": 1,
        "invalid_idempotency_key": 1,
    }
    assert deltas(before, after, "yoyaku_quota_denials_total", "kind") == {
        "cost": 1,
        "concurrent": 1,
    }


def test_an_in_progress_key_and_a_stale_claim_taken_over_are_counted(
    user: User, user_client: APIClient, settings: Any
) -> None:
    submission = make_submission(owner=user)
    body = {"submission_id": submission.pk, "idempotency_key": "held"}
    # Another request holds the key (it claimed it and is still working).
    assert post_job(user_client, body).status_code == HTTPStatus.CREATED
    key = IdempotencyKey.objects.get(key="held")
    IdempotencyKey.objects.filter(pk=key.pk).update(
        job=None, lock_token="x", locked_at=timezone.now()
    )
    before = scrape(settings)
    assert post_job(user_client, body).status_code == HTTPStatus.CONFLICT
    # The holder died: after IDEMPOTENCY_LOCK_TIMEOUT its claim is taken over (and the job it
    # names is refused by the now sealed submission).
    IdempotencyKey.objects.filter(pk=key.pk).update(
        locked_at=timezone.now() - dt.timedelta(seconds=120)
    )
    assert post_job(user_client, body).status_code == HTTPStatus.CONFLICT
    after = scrape(settings)
    assert deltas(before, after, SUBMISSIONS, "outcome") == {
        "idempotency_request_in_progress": 1,
        "invalid_transition": 1,
    }
    taken = "yoyaku_idempotency_takeovers_total"
    assert after.value(taken) - before.value(taken) == 1


def test_rate_and_storage_denials_are_counted_by_kind(
    user: User, user_client: APIClient, settings: Any
) -> None:
    from tests.submissions.conftest import post_multipart

    QuotaPolicy.objects.create(user=user, max_jobs_per_day=1, max_storage_bytes=10)
    first, second = make_submission(owner=user), make_submission(owner=user)
    assert post_job(user_client, {"submission_id": first.pk}).status_code == 201
    before = scrape(settings)
    assert post_job(user_client, {"submission_id": second.pk}).status_code == 429
    upload = post_multipart(
        user_client, "/api/submissions/", files=[("files", "main.py", b"#" * 11)]
    )
    assert upload.json()["code"] == "storage_quota_exceeded"
    after = scrape(settings)
    assert deltas(before, after, "yoyaku_quota_denials_total", "kind") == {"rate": 1, "storage": 1}
    assert deltas(before, after, SUBMISSIONS, "outcome") == {"rate_limited": 1}
    assert deltas(before, after, "yoyaku_uploads_total", "outcome") == {"storage_quota_exceeded": 1}


def test_reservations_are_counted_by_final_state_and_jobs_by_final_status(
    user: User, user_client: APIClient, settings: Any
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=2)
    before = scrape(settings)
    ids = [
        user_client.post("/api/quotas/reservations/", {"ttl_seconds": 60}, format="json").json()[
            "reservation_id"
        ]
        for _ in range(2)
    ]
    full = user_client.post("/api/quotas/reservations/", {}, format="json")
    assert full.status_code == HTTPStatus.TOO_MANY_REQUESTS
    released = user_client.post(f"/api/quotas/reservations/{ids[0]}/release/")
    again = user_client.post(f"/api/quotas/reservations/{ids[0]}/release/")  # no second count
    assert (released.status_code, again.status_code) == (200, 200)
    job = post_job(
        user_client, {"submission_id": make_submission(owner=user).pk, "reservation_id": ids[1]}
    )
    assert job.status_code == HTTPStatus.CREATED
    cancelled = user_client.post(f"/api/jobs/{job.json()['job_id']}/cancel/")
    assert cancelled.status_code == HTTPStatus.OK
    expiring = user_client.post("/api/quotas/reservations/", {"ttl_seconds": 10}, format="json")
    assert expiring.status_code == HTTPStatus.CREATED
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=2)):
        call_command("cleanup", "--only", "reservations", stdout=__import__("io").StringIO())
    after = scrape(settings)
    # Cleanup removes the released and consumed rows too (all past expiry): only the one that
    # ended by expiring is counted as expired.
    assert deltas(before, after, "yoyaku_quota_reservations_total", "state") == {
        "created": 3,
        "released": 1,
        "consumed": 1,
        "expired": 1,
    }
    assert deltas(before, after, "yoyaku_quota_denials_total", "kind") == {"concurrent": 1}
    assert deltas(before, after, "yoyaku_jobs_finished_total", "status") == {"cancelled": 1}
