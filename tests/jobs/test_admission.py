"""Admission at the service level (`apps.jobs.admission`): the concurrent, daily and cost
limits, reservations, and the race on one user's slots (real threads, SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from apps.jobs.admission import Admitted, job_admit, reservation_reserve
from apps.jobs.models import ACTIVE_JOB_STATUSES, Job, JobStatus
from apps.jobs.selectors import quota_status
from apps.jobs.services import job_transition
from apps.quotas.exceptions import (
    CostLimitExceeded,
    QuotaExceeded,
    RateLimited,
    ReservationNotActive,
)
from apps.quotas.models import Reservation
from apps.quotas.selectors import reservation_active_q
from tests.concurrency import run_concurrently
from tests.factories.jobs import make_job
from tests.factories.quotas import make_policy, make_reservation
from tests.factories.submissions import make_submission
from tests.factories.users import make_user


def _admit(user: User, **kwargs: Any) -> Admitted:
    """One admission in its own transaction, as job submission runs it."""
    submission = make_submission(owner=user)
    options: dict[str, Any] = {"config": {}, "resource_class": "medium", "cost": 2.0}
    options.update(kwargs)
    with transaction.atomic():
        return job_admit(user=user, submission_id=submission.pk, **options)


@pytest.mark.django_db
class TestConcurrentLimit:
    def test_admits_up_to_the_limit_then_refuses_with_the_users_number(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=2)
        _admit(user)
        _admit(user)

        with pytest.raises(QuotaExceeded) as refused:
            _admit(user)

        assert refused.value.code == "quota_exceeded"
        assert refused.value.message == "Quota exceeded: Maximum 2 concurrent jobs allowed"
        assert Job.objects.filter(owner=user).count() == 2

    def test_an_active_reservation_holds_a_slot(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        make_reservation(user=user)

        with pytest.raises(QuotaExceeded):
            _admit(user)

    def test_expired_and_released_reservations_hold_nothing(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        make_reservation(user=user, expires_at=timezone.now() - dt.timedelta(seconds=1))
        make_reservation(user=user, released_at=timezone.now())

        admitted = _admit(user)

        assert admitted.job.status == JobStatus.QUEUED

    def test_a_finished_job_frees_its_slot_at_once(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        first = _admit(user).job
        job_transition(job=first, to=JobStatus.CANCELLED)

        assert _admit(user).job.pk != first.pk

    def test_other_users_jobs_do_not_count(self, user: User, other_user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        theirs = [make_job(owner=other_user, status=status) for status in ACTIVE_JOB_STATUSES]
        make_reservation(user=other_user)

        admitted = _admit(user)

        assert admitted.job.owner_id == user.pk
        assert admitted.job.status == JobStatus.QUEUED
        assert admitted.quota_warnings == ["Concurrent jobs: 1 of 1 slots in use."]
        assert all(job.owner_id == other_user.pk for job in theirs)
        with pytest.raises(QuotaExceeded):
            _admit(user)  # the one slot is now taken: by the user's own job

    def test_a_warning_names_the_concurrent_quota_at_eighty_percent(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=5)
        for _ in range(3):
            assert _admit(user).quota_warnings == []

        assert _admit(user).quota_warnings == ["Concurrent jobs: 4 of 5 slots in use."]


@pytest.mark.django_db
class TestDailyAndCostLimits:
    def test_the_daily_limit_refuses_with_retry_after_until_the_oldest_job_leaves(
        self, user: User
    ) -> None:
        make_policy(user=user, max_jobs_per_day=2, max_concurrent_jobs=10)
        start = timezone.now()
        with time_machine.travel(start, tick=False):
            _admit(user)
        with time_machine.travel(start + dt.timedelta(hours=1), tick=False):
            _admit(user)
            with pytest.raises(RateLimited) as refused:
                _admit(user)
        assert refused.value.headers == {"Retry-After": str(23 * 3600)}
        assert refused.value.extra["max_jobs_per_day"] == 2

        with time_machine.travel(start + dt.timedelta(hours=24, seconds=1), tick=False):
            _admit(user)

    def test_finished_jobs_still_count_against_the_daily_limit(self, user: User) -> None:
        make_policy(user=user, max_jobs_per_day=1)
        job_transition(job=_admit(user).job, to=JobStatus.CANCELLED)

        with pytest.raises(RateLimited):
            _admit(user)

    def test_reaching_the_cost_limit_exactly_is_allowed_passing_it_is_not(self, user: User) -> None:
        make_policy(user=user, monthly_cost_limit=4)
        first = _admit(user, cost=2.0)
        second = _admit(user, cost=2.0)

        with pytest.raises(CostLimitExceeded) as refused:
            _admit(user, cost=1.0)

        assert first.cost_limit_warning is None
        assert second.cost_limit_warning is not None
        assert second.cost_limit_warning.startswith("Cost limit warning: 4 of 4")
        assert refused.value.message.startswith("Cost limit")

    def test_an_exempt_admission_skips_daily_and_cost_but_not_the_concurrent_limit(
        self, user: User
    ) -> None:
        make_policy(user=user, max_jobs_per_day=1, monthly_cost_limit=1, max_concurrent_jobs=2)
        _admit(user, cost=1.0)

        exempt = _admit(user, cost=0.0, exempt_from_daily_and_cost=True)
        assert exempt.job.status == JobStatus.QUEUED
        with pytest.raises(QuotaExceeded):
            _admit(user, cost=0.0, exempt_from_daily_and_cost=True)


@pytest.mark.django_db
class TestReservations:
    def test_a_job_with_a_reservation_takes_its_slot_without_a_second_one(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        reservation = reservation_reserve(user=user)

        admitted = _admit(user, reservation_id=reservation.pk)

        reservation.refresh_from_db()
        assert reservation.job_id == admitted.job.pk
        assert reservation.consumed_at is not None
        status = quota_status(user=user)
        assert (status.active_jobs, status.active_reservations) == (1, 0)

    @pytest.mark.parametrize("state", ["consumed", "released", "expired"])
    def test_a_reservation_that_is_not_active_is_refused(self, user: User, state: str) -> None:
        now = timezone.now()
        fields: dict[str, Any] = {
            "consumed": {"consumed_at": now},
            "released": {"released_at": now},
            "expired": {"expires_at": now - dt.timedelta(seconds=1)},
        }[state]
        reservation = make_reservation(user=user, **fields)

        with pytest.raises(ReservationNotActive) as refused:
            _admit(user, reservation_id=reservation.pk)

        assert refused.value.extra == {"state": state}
        assert not Job.objects.filter(owner=user).exists()

    def test_another_users_reservation_is_refused_without_saying_whose(
        self, user: User, other_user: User
    ) -> None:
        reservation = make_reservation(user=other_user)

        with pytest.raises(ReservationNotActive) as refused:
            _admit(user, reservation_id=reservation.pk)

        assert refused.value.extra == {"state": None}
        reservation.refresh_from_db()
        assert reservation.consumed_at is None

    def test_reserving_counts_queued_and_running_jobs(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=2)
        make_job(owner=user, status=JobStatus.QUEUED)
        make_job(owner=user, status=JobStatus.RUNNING)
        make_job(owner=user, status=JobStatus.COMPLETED)

        with pytest.raises(QuotaExceeded):
            reservation_reserve(user=user)

    def test_a_reservation_expires_after_its_ttl_without_any_background_job(
        self, user: User
    ) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        start = timezone.now()
        with time_machine.travel(start, tick=False):
            reservation_reserve(user=user, ttl_seconds=60)
            with pytest.raises(QuotaExceeded):
                reservation_reserve(user=user)
        with time_machine.travel(start + dt.timedelta(seconds=61), tick=False):
            assert reservation_reserve(user=user).pk


def _slots(user: User) -> int:
    return (
        Job.objects.filter(owner=user, status__in=ACTIVE_JOB_STATUSES).count()
        + Reservation.objects.filter(reservation_active_q(timezone.now()), user=user).count()
    )


@pytest.mark.django_db(transaction=True)
class TestRaces:
    def test_jobs_and_reservations_racing_for_three_slots_take_exactly_three(self) -> None:
        user = make_user(username="racer")
        make_policy(user=user, max_concurrent_jobs=3)
        submissions = [make_submission(owner=user) for _ in range(24)]

        def take(i: int) -> Any:
            if i % 2:
                return reservation_reserve(user=user)
            with transaction.atomic():
                return job_admit(
                    user=user,
                    submission_id=submissions[i].pk,
                    config={},
                    resource_class="small",
                    cost=1.0,
                )

        results = run_concurrently(take, 24)

        assert sum(o.ok for o in results) == 3
        assert all(isinstance(o.error, QuotaExceeded) for o in results if not o.ok)
        assert _slots(user) == 3

    def test_jobs_racing_on_one_reservation_consume_it_once(self) -> None:
        user = make_user(username="holder")
        make_policy(user=user, max_concurrent_jobs=1)
        reservation = reservation_reserve(user=user)
        submissions = [make_submission(owner=user) for _ in range(10)]

        def admit(i: int) -> Any:
            with transaction.atomic():
                return job_admit(
                    user=user,
                    submission_id=submissions[i].pk,
                    config={},
                    resource_class="small",
                    cost=1.0,
                    reservation_id=reservation.pk,
                )

        results = run_concurrently(admit, 10)

        assert sum(o.ok for o in results) == 1
        assert all(isinstance(o.error, ReservationNotActive) for o in results if not o.ok)
        assert Job.objects.filter(owner=user).count() == 1
        assert _slots(user) == 1
