"""Reservations API, GET /api/quotas/me/, cleanup and admin."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.cleanup import cleanup_run
from apps.jobs.models import IdempotencyKey
from apps.quotas.models import QuotaPolicy, Reservation
from apps.quotas.services import quota_policy_adjust
from tests.factories.jobs import make_job
from tests.factories.submissions import make_submission

pytestmark = pytest.mark.django_db

URL = "/api/quotas/reservations/"


def reserve(client: APIClient, **body: Any) -> Any:
    return client.post(URL, body, format="json")


def test_reserve_returns_an_active_reservation_with_default_ttl(user_client: APIClient) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        response = reserve(user_client)
    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    assert body["state"] == "active"
    assert len(body["reservation_id"]) == 32
    expires = dt.datetime.fromisoformat(body["expires_at"])
    assert expires == start + dt.timedelta(seconds=300)


@pytest.mark.parametrize("ttl", [9, 3601, "x", -1])
def test_reserve_ttl_out_of_range_is_invalid(user_client: APIClient, ttl: Any) -> None:
    response = reserve(user_client, ttl_seconds=ttl)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
    assert "ttl_seconds" in response.json()["fields"]
    assert Reservation.objects.count() == 0


def test_reserve_refuses_sixth_slot_when_limit_is_five(user: User, user_client: APIClient) -> None:
    make_job(owner=user)
    make_job(owner=user, status="running")
    make_job(owner=user, status="completed")
    for _ in range(3):
        assert reserve(user_client).status_code == HTTPStatus.CREATED
    response = reserve(user_client)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert response.json()["code"] == "quota_exceeded"
    assert response.json()["error"] == "Quota exceeded: Maximum 5 concurrent jobs allowed"


def test_expired_reservation_frees_its_slot_without_any_background_job(
    user: User, user_client: APIClient
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        reservation_id = reserve(user_client, ttl_seconds=10).json()["reservation_id"]
        assert reserve(user_client).json()["code"] == "quota_exceeded"
    with time_machine.travel(start + dt.timedelta(seconds=10), tick=False):
        listed = user_client.get(URL).json()
        assert [(r["reservation_id"], r["state"]) for r in listed] == [(reservation_id, "expired")]
        assert reserve(user_client).status_code == HTTPStatus.CREATED


def test_release_frees_the_slot_and_is_idempotent(user: User, user_client: APIClient) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    reservation_id = reserve(user_client).json()["reservation_id"]
    for _ in range(2):
        response = user_client.post(f"{URL}{reservation_id}/release/")
        assert response.status_code == HTTPStatus.OK
        assert response.json()["state"] == "released"
    assert reserve(user_client).status_code == HTTPStatus.CREATED


def test_release_or_extend_of_consumed_or_expired_is_not_active(
    user: User, user_client: APIClient
) -> None:
    now = timezone.now()
    consumed = Reservation.objects.create(
        user=user, expires_at=now + dt.timedelta(minutes=5), consumed_at=now
    )
    expired = Reservation.objects.create(user=user, expires_at=now - dt.timedelta(seconds=1))
    released = Reservation.objects.create(
        user=user, expires_at=now + dt.timedelta(minutes=5), released_at=now
    )
    for reservation in (consumed, expired):
        response = user_client.post(f"{URL}{reservation.pk}/release/")
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["code"] == "reservation_not_active"
    for reservation in (consumed, expired, released):
        response = user_client.post(f"{URL}{reservation.pk}/extend/", {}, format="json")
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["code"] == "reservation_not_active"
    expired.refresh_from_db()
    assert expired.released_at is None


def test_extend_moves_the_expiry_of_an_active_reservation(user_client: APIClient) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        reservation_id = reserve(user_client, ttl_seconds=60).json()["reservation_id"]
    with time_machine.travel(start + dt.timedelta(seconds=50), tick=False):
        response = user_client.post(
            f"{URL}{reservation_id}/extend/", {"ttl_seconds": 600}, format="json"
        )
    assert response.status_code == HTTPStatus.OK
    assert dt.datetime.fromisoformat(response.json()["expires_at"]) == start + dt.timedelta(
        seconds=650
    )
    bad = user_client.post(f"{URL}{reservation_id}/extend/", {"ttl_seconds": 5}, format="json")
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json()["code"] == "invalid_request"


@pytest.mark.parametrize("action", ["release", "extend"])
def test_another_users_reservation_is_403_and_unknown_404(
    other_user: User, user_client: APIClient, action: str
) -> None:
    theirs = Reservation.objects.create(
        user=other_user, expires_at=timezone.now() + dt.timedelta(minutes=5)
    )
    response = user_client.post(f"{URL}{theirs.pk}/{action}/", {}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    theirs.refresh_from_db()
    assert theirs.released_at is None
    missing = user_client.post(f"{URL}{'0' * 32}/{action}/", {}, format="json")
    assert missing.status_code == HTTPStatus.NOT_FOUND
    assert missing.json()["code"] == "not_found"


def test_list_shows_only_own_reservations(
    user: User, other_user: User, user_client: APIClient
) -> None:
    mine = reserve(user_client).json()["reservation_id"]
    Reservation.objects.create(user=other_user, expires_at=timezone.now() + dt.timedelta(minutes=5))
    assert [r["reservation_id"] for r in user_client.get(URL).json()] == [mine]


def test_quota_me_reports_limits_usage_and_warnings(user: User, user_client: APIClient) -> None:
    QuotaPolicy.objects.create(user=user, monthly_cost_limit=10)
    make_job(owner=user, cost=4)
    make_job(owner=user, status="running", cost=4)
    make_job(owner=user, status="completed", cost=1)
    reserve(user_client)
    reserve(user_client)
    body = user_client.get("/api/quotas/me/").json()
    assert body == {
        "max_concurrent_jobs": 5,
        "active_jobs": 2,
        "active_reservations": 2,
        "available_slots": 1,
        "max_jobs_per_day": 100,
        "jobs_last_24h": 3,
        "monthly_cost_limit": 10.0,
        "cost_this_month": 9.0,
        "storage_bytes": 0,
        "max_storage_bytes": 10 * 1024**3,
        "warnings": [
            "Concurrent jobs: 4 of 5 slots in use.",
            "Monthly cost: 9 of 10 cost units used this month.",
        ],
        "active_lives": 0,
        "max_lives": 1000,
        "max_upload_file_size": 104857600,
        "max_resumable_upload_size": 5 * 1024**3,
    }


def test_quota_me_uses_settings_defaults_without_a_policy(
    user_client: APIClient, settings: Any
) -> None:
    settings.QUOTA_MAX_CONCURRENT_JOBS = 7
    settings.QUOTA_MONTHLY_COST_LIMIT = 50
    body = user_client.get("/api/quotas/me/").json()
    assert body["max_concurrent_jobs"] == 7
    assert body["monthly_cost_limit"] == 50
    assert body["available_slots"] == 7


def test_boost_raises_and_restore_lowers_the_limit(user: User, user_client: APIClient) -> None:
    quota_policy_adjust(user=user, concurrent_delta=3)
    assert user_client.get("/api/quotas/me/").json()["max_concurrent_jobs"] == 8
    quota_policy_adjust(user=user, concurrent_delta=-5)
    assert user_client.get("/api/quotas/me/").json()["max_concurrent_jobs"] == 5


def test_unauthenticated_quota_endpoints_are_401(api_client: APIClient) -> None:
    for response in (api_client.get("/api/quotas/me/"), api_client.get(URL), api_client.post(URL)):
        assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_cleanup_removes_past_reservations_and_expired_or_dead_keys(
    user: User, settings: Any
) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
    now = timezone.now()
    live = Reservation.objects.create(user=user, expires_at=now + dt.timedelta(minutes=5))
    Reservation.objects.create(user=user, expires_at=now - dt.timedelta(seconds=1))
    Reservation.objects.create(user=user, expires_at=now - dt.timedelta(seconds=1), consumed_at=now)
    job = make_job(owner=user)
    keep = IdempotencyKey.objects.create(
        user=user,
        key="live",
        fingerprint="f",
        job=job,
        created_at=now,
        expires_at=now + dt.timedelta(hours=1),
    )
    fresh_claim = IdempotencyKey.objects.create(
        user=user,
        key="claim",
        fingerprint="f",
        lock_token="t",
        locked_at=now,
        created_at=now,
        expires_at=now + dt.timedelta(hours=1),
    )
    IdempotencyKey.objects.create(
        user=user,
        key="expired",
        fingerprint="f",
        job=job,
        created_at=now,
        expires_at=now - dt.timedelta(seconds=1),
    )
    IdempotencyKey.objects.create(
        user=user,
        key="dead",
        fingerprint="f",
        lock_token="t",
        locked_at=now - dt.timedelta(seconds=61),
        created_at=now,
        expires_at=now + dt.timedelta(hours=1),
    )

    dry = {
        r.kind: r.count for r in cleanup_run(only=["keys", "reservations"], dry_run=True, now=now)
    }
    assert dry == {"keys": 2, "reservations": 2}
    assert Reservation.objects.count() == 3

    reports = cleanup_run(only=["keys", "reservations"], now=now)
    assert {r.kind: r.count for r in reports} == {"keys": 2, "reservations": 2}
    assert list(Reservation.objects.all()) == [live]
    assert set(IdempotencyKey.objects.values_list("pk", flat=True)) == {keep.pk, fresh_claim.pk}


def test_admin_pages_and_actions(user: User, staff_user: User, client: Any) -> None:
    client.force_login(staff_user)
    now = timezone.now()
    reservation = Reservation.objects.create(user=user, expires_at=now + dt.timedelta(minutes=5))
    Reservation.objects.create(user=user, expires_at=now - dt.timedelta(minutes=5))
    job = make_job(owner=user)
    done = make_job(owner=user, status="completed")
    IdempotencyKey.objects.create(
        user=user,
        key="k",
        fingerprint="f",
        job=job,
        created_at=now,
        expires_at=now + dt.timedelta(hours=1),
    )
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=2)
    for url in (
        "/admin/quotas/quotapolicy/",
        "/admin/quotas/reservation/",
        "/admin/quotas/reservation/?state=active",
        "/admin/quotas/reservation/?state=expired",
        f"/admin/quotas/reservation/{reservation.pk}/change/",
        "/admin/jobs/job/?status=queued",
        f"/admin/jobs/job/{job.pk}/change/",
        "/admin/jobs/idempotencykey/?state=bound",
        "/admin/jobs/idempotencykey/?state=claimed",
        "/admin/jobs/idempotencykey/?state=expired",
    ):
        assert client.get(url).status_code == HTTPStatus.OK, url
    active_only = client.get("/admin/quotas/reservation/?state=active").content.decode()
    assert reservation.pk in active_only

    client.post(
        "/admin/quotas/reservation/",
        {"action": "release_reservations", "_selected_action": [reservation.pk]},
    )
    reservation.refresh_from_db()
    assert reservation.released_at is not None

    client.post(
        "/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [job.pk, done.pk]}
    )
    job.refresh_from_db()
    done.refresh_from_db()
    assert (job.status, done.status) == ("cancelled", "completed")


def test_a_reservation_consumed_by_a_job_is_listed_with_it_and_holds_no_second_slot(
    user: User, user_client: APIClient
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    reservation_id = reserve(user_client).json()["reservation_id"]
    body = {"submission_id": make_submission(owner=user).pk, "reservation_id": reservation_id}

    submitted = user_client.post("/api/jobs/", body, format="json")

    assert submitted.status_code == HTTPStatus.CREATED, submitted.content
    listed = user_client.get(URL).json()
    assert [(r["reservation_id"], r["state"], r["job_id"]) for r in listed] == [
        (reservation_id, "consumed", submitted.json()["job_id"])
    ]
    released = user_client.post(f"{URL}{reservation_id}/release/")
    assert released.status_code == HTTPStatus.CONFLICT
    assert released.json()["code"] == "reservation_not_active"
    me = user_client.get("/api/quotas/me/").json()
    assert (me["active_jobs"], me["active_reservations"], me["available_slots"]) == (1, 0, 0)
