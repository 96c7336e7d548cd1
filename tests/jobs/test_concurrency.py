"""Races with real threads (transaction=True): run on SQLite and PostgreSQL.

Each thread sends its request through the API (its own test client and database connection);
the invariants are then read from the database.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.models import ACTIVE_JOB_STATUSES, IdempotencyKey, Job
from apps.jobs.services import idempotency_fingerprint
from apps.quotas.models import QuotaPolicy, Reservation
from apps.quotas.selectors import reservation_active_q
from apps.submissions.models import Submission, SubmissionStatus
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_graded_submission, make_submission
from tests.factories.tokens import make_token
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

N = 50


def _client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user)}")
    return client


def _post(client: APIClient, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = client.post(url, body, format="json")
    return response.status_code, response.json()


def _outcomes(results: list[Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in results:
        assert outcome.ok, outcome.error
        status, body = outcome.value
        counts[str(status) if status < HTTPStatus.BAD_REQUEST else body["code"]] += 1
    return counts


def _active_slots(user: User) -> int:
    now = timezone.now()
    return (
        Job.objects.filter(owner=user, status__in=ACTIVE_JOB_STATUSES).count()
        + Reservation.objects.filter(reservation_active_q(now), user=user).count()
    )


def test_fifty_requests_with_one_new_key_make_one_job() -> None:
    user = make_user(username="racer")
    submission = make_submission(owner=user)
    clients = [_client(user) for _ in range(N)]
    body = {"submission_id": submission.pk, "idempotency_key": "one-key"}

    results = run_concurrently(lambda i: _post(clients[i], "/api/jobs/", body), N)

    counts = _outcomes(results)
    assert Job.objects.count() == 1
    assert counts["201"] == 1
    assert set(counts) <= {"201", "200", "idempotency_request_in_progress"}
    job = Job.objects.get()
    assert {o.value[1]["job_id"] for o in results if o.value[0] < HTTPStatus.BAD_REQUEST} == {
        job.pk
    }
    assert IdempotencyKey.objects.get().job_id == job.pk
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.PENDING


def test_limit_five_with_fifty_distinct_keys_makes_exactly_five_jobs() -> None:
    user = make_user(username="racer")
    submissions = [make_submission(owner=user) for _ in range(N)]
    clients = [_client(user) for _ in range(N)]

    results = run_concurrently(
        lambda i: _post(
            clients[i],
            "/api/jobs/",
            {"submission_id": submissions[i].pk, "idempotency_key": f"k{i}"},
        ),
        N,
    )

    assert _outcomes(results) == Counter({"201": 5, "quota_exceeded": 45})
    assert Job.objects.count() == 5
    assert IdempotencyKey.objects.count() == 5, "refused requests released their keys"
    statuses = Counter(
        Submission.objects.filter(pk__in=[s.pk for s in submissions]).values_list(
            "status", flat=True
        )
    )
    assert statuses == Counter({"pending": 5, "draft": 45})


def test_reservations_and_jobs_racing_never_exceed_the_limit() -> None:
    user = make_user(username="racer")
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=5)
    held = [
        Reservation.objects.create(user=user, expires_at=timezone.now() + dt.timedelta(minutes=5))
        for _ in range(2)
    ]
    submissions = [make_submission(owner=user) for _ in range(N)]
    clients = [_client(user) for _ in range(N)]

    def act(i: int) -> tuple[int, dict[str, Any]]:
        if i < 2:  # these two hold a slot already: they must always get their job
            body = {"submission_id": submissions[i].pk, "reservation_id": held[i].pk}
            return _post(clients[i], "/api/jobs/", body)
        if i % 2:
            return _post(clients[i], "/api/quotas/reservations/", {})
        return _post(clients[i], "/api/jobs/", {"submission_id": submissions[i].pk})

    results = run_concurrently(act, N)

    counts = _outcomes(results)
    assert counts["201"] == 5
    assert counts["quota_exceeded"] == N - 5
    assert all(results[i].value[0] == HTTPStatus.CREATED for i in range(2))
    assert _active_slots(user) == 5
    for reservation in held:
        reservation.refresh_from_db()
        assert reservation.consumed_at is not None


def test_one_reservation_is_consumed_by_one_job_only() -> None:
    user = make_user(username="racer")
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    reservation = Reservation.objects.create(
        user=user, expires_at=timezone.now() + dt.timedelta(minutes=5)
    )
    n = 20
    submissions = [make_submission(owner=user) for _ in range(n)]
    clients = [_client(user) for _ in range(n)]

    results = run_concurrently(
        lambda i: _post(
            clients[i],
            "/api/jobs/",
            {"submission_id": submissions[i].pk, "reservation_id": reservation.pk},
        ),
        n,
    )

    assert _outcomes(results) == Counter({"201": 1, "reservation_not_active": n - 1})
    assert Job.objects.count() == 1
    reservation.refresh_from_db()
    assert reservation.job_id == Job.objects.get().pk


def test_release_racing_consume_lets_exactly_one_win() -> None:
    user = make_user(username="racer")
    clients = [_client(user) for _ in range(2)]
    for _ in range(5):
        reservation = Reservation.objects.create(
            user=user, expires_at=timezone.now() + dt.timedelta(minutes=5)
        )
        submission = make_submission(owner=user)

        def act(
            i: int, reservation: Reservation = reservation, submission: Any = submission
        ) -> Any:
            if i == 0:
                return _post(clients[0], f"/api/quotas/reservations/{reservation.pk}/release/", {})
            body = {"submission_id": submission.pk, "reservation_id": reservation.pk}
            return _post(clients[1], "/api/jobs/", body)

        results = run_concurrently(act, 2)
        statuses = sorted(o.value[0] for o in results)
        assert statuses in (
            [HTTPStatus.OK, HTTPStatus.CONFLICT],
            [HTTPStatus.CREATED, HTTPStatus.CONFLICT],
        )
        reservation.refresh_from_db()
        assert (reservation.consumed_at is None) != (reservation.released_at is None)


def test_in_flight_dedup_holds_under_concurrency() -> None:
    user = make_user(username="racer")
    n = 20
    submissions = [make_submission(owner=user, question_id="q", skill="s") for _ in range(n)]
    clients = [_client(user) for _ in range(n)]

    results = run_concurrently(
        lambda i: _post(clients[i], "/api/jobs/", {"submission_id": submissions[i].pk}), n
    )

    assert _outcomes(results) == Counter({"201": 1, "duplicate_in_flight": n - 1})
    assert Job.objects.count() == 1


def test_same_key_from_two_users_at_once_makes_two_jobs() -> None:
    users = [make_user(username=f"u{i}") for i in range(2)]
    n = 20
    submissions = [make_submission(owner=u) for u in users]
    clients = [_client(users[i % 2]) for i in range(n)]

    results = run_concurrently(
        lambda i: _post(
            clients[i],
            "/api/jobs/",
            {"submission_id": submissions[i % 2].pk, "idempotency_key": "same"},
        ),
        n,
    )

    counts = _outcomes(results)
    assert counts["201"] == 2
    assert Job.objects.count() == 2
    for user in users:
        assert Job.objects.filter(owner=user).count() == 1


def test_a_dead_claim_is_taken_over_by_exactly_one_request(settings: Any) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
    user = make_user(username="racer")
    submission = make_submission(owner=user)
    long_ago = timezone.now() - dt.timedelta(seconds=120)
    IdempotencyKey.objects.create(
        user=user,
        key="crashed",
        fingerprint=idempotency_fingerprint(
            submission_id=submission.pk, config={}, reservation_id=None
        ),
        lock_token="d" * 32,
        locked_at=long_ago,
        created_at=long_ago,
        expires_at=long_ago + dt.timedelta(hours=24),
    )
    n = 20
    clients = [_client(user) for _ in range(n)]
    body = {"submission_id": submission.pk, "idempotency_key": "crashed"}

    results = run_concurrently(lambda i: _post(clients[i], "/api/jobs/", body), n)

    counts = _outcomes(results)
    assert counts["201"] == 1
    assert set(counts) <= {"201", "200", "idempotency_request_in_progress"}
    assert Job.objects.count() == 1
    assert IdempotencyKey.objects.get().job_id == Job.objects.get().pk


def test_staff_regrades_racing_the_owners_submissions_never_pass_the_concurrent_limit() -> None:
    # A regrade is admitted under the same policy lock as a submission: mixed, they still
    # take at most the owner's free slots.
    owner = make_user(username="racer")
    staff = make_user(username="sam", is_staff=True)
    QuotaPolicy.objects.update_or_create(user=owner, defaults={"max_concurrent_jobs": 3})
    drafts = [make_submission(owner=owner) for _ in range(10)]
    graded = [make_graded_submission(owner, score=0.5) for _ in range(10)]
    owner_clients = [_client(owner) for _ in range(10)]
    staff_clients = [_client(staff) for _ in range(10)]

    def race(i: int) -> tuple[int, dict[str, Any]]:
        if i % 2:
            return _post(owner_clients[i // 2], "/api/jobs/", {"submission_id": drafts[i // 2].pk})
        url = f"/api/review/submissions/{graded[i // 2].pk}/regrade/"
        return _post(staff_clients[i // 2], url, {})

    results = run_concurrently(race, 20)

    for outcome in results:
        assert outcome.ok, outcome.error
        status, body = outcome.value
        assert status < HTTPStatus.BAD_REQUEST or body["code"] == "quota_exceeded", body
    assert sum(1 for o in results if o.value[0] < HTTPStatus.BAD_REQUEST) == 3
    assert Job.objects.filter(owner=owner, status__in=ACTIVE_JOB_STATUSES).count() == 3
    assert Submission.objects.filter(owner=owner, status=SubmissionStatus.PENDING).count() == 3
