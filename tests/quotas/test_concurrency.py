"""Reservation races on the per-user policy lock (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from apps.jobs.admission import reservation_reserve
from apps.quotas.exceptions import QuotaExceeded
from apps.quotas.models import QuotaPolicy, Reservation
from apps.quotas.selectors import reservation_active_q
from apps.quotas.services import quota_policy_adjust
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_fifty_reservations_racing_for_five_slots_get_exactly_five() -> None:
    user = make_user(username="racer")

    results = run_concurrently(lambda i: reservation_reserve(user=user), 50)

    won = [o for o in results if o.ok]
    assert len(won) == 5
    assert all(isinstance(o.error, QuotaExceeded) for o in results if not o.ok)
    assert Reservation.objects.filter(reservation_active_q(timezone.now())).count() == 5


def test_first_reservations_of_a_new_user_create_one_policy_and_never_overshoot() -> None:
    user = make_user(username="fresh")
    assert not QuotaPolicy.objects.exists()

    results = run_concurrently(lambda i: reservation_reserve(user=user), 20)

    assert sum(o.ok for o in results) == 5
    assert QuotaPolicy.objects.filter(user=user).count() == 1


def test_concurrent_boosts_are_never_lost() -> None:
    user = make_user(username="boosted")

    def boost(i: int) -> Any:
        return quota_policy_adjust(user=user, concurrent_delta=1)

    results = run_concurrently(boost, 20)

    assert all(o.ok for o in results), [o.error for o in results if not o.ok]
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 20
