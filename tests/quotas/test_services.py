"""Quota services at the service level: limits, the policy lock, reservation release/extend."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import PermissionDenied
from apps.quotas.exceptions import ReservationNotActive
from apps.quotas.models import QuotaPolicy, ReservationState
from apps.quotas.selectors import quota_limits, quota_policy_get
from apps.quotas.services import (
    quota_policy_adjust,
    quota_policy_lock,
    reservation_extend,
    reservation_release,
)
from tests.factories.quotas import make_policy, make_reservation

pytestmark = pytest.mark.django_db


def test_limits_fall_back_to_the_settings_defaults(user: User, settings: Any) -> None:
    settings.QUOTA_MAX_CONCURRENT_JOBS = 7
    settings.QUOTA_MAX_JOBS_PER_DAY = 30

    limits = quota_limits(policy=quota_policy_get(user=user))

    assert (limits.max_concurrent_jobs, limits.max_jobs_per_day) == (7, 30)
    assert not QuotaPolicy.objects.exists()


def test_a_boost_adds_slots_but_never_lifts_a_zero_limit(user: User) -> None:
    make_policy(user=user, max_concurrent_jobs=2)
    quota_policy_adjust(user=user, concurrent_delta=3)
    assert quota_limits(policy=quota_policy_get(user=user)).max_concurrent_jobs == 5

    make_policy(user=user, max_concurrent_jobs=0)
    assert quota_limits(policy=quota_policy_get(user=user)).max_concurrent_jobs == 0


def test_the_boost_is_clamped_to_the_maximum(user: User, settings: Any) -> None:
    settings.QUOTA_MAX_BOOST = 4

    quota_policy_adjust(user=user, concurrent_delta=10)
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 4
    quota_policy_adjust(user=user, concurrent_delta=-10)
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 0


def test_the_policy_lock_creates_the_missing_row_once(user: User) -> None:
    with transaction.atomic():
        first = quota_policy_lock(user=user)
    with transaction.atomic():
        second = quota_policy_lock(user=user)

    assert first.pk == second.pk
    assert QuotaPolicy.objects.filter(user=user).count() == 1


def test_releasing_is_idempotent_and_frees_the_slot(user: User) -> None:
    reservation = make_reservation(user=user)

    reservation_release(reservation_id=reservation.pk, user=user)
    again = reservation_release(reservation_id=reservation.pk, user=user)

    assert again.state_at(timezone.now()) == ReservationState.RELEASED


def test_a_consumed_reservation_cannot_be_released(user: User) -> None:
    reservation = make_reservation(user=user, consumed_at=timezone.now())

    with pytest.raises(ReservationNotActive) as refused:
        reservation_release(reservation_id=reservation.pk, user=user)

    assert refused.value.extra == {"state": "consumed"}


def test_another_users_reservation_cannot_be_released(user: User, other_user: User) -> None:
    reservation = make_reservation(user=other_user)

    with pytest.raises(PermissionDenied):
        reservation_release(reservation_id=reservation.pk, user=user)


def test_extending_moves_the_expiry_only_while_active(user: User) -> None:
    start = timezone.now()
    reservation = make_reservation(user=user, expires_at=start + dt.timedelta(seconds=30))

    with time_machine.travel(start, tick=False):
        extended = reservation_extend(reservation_id=reservation.pk, user=user, ttl_seconds=600)
    assert extended.expires_at == start + dt.timedelta(seconds=600)

    with (
        time_machine.travel(start + dt.timedelta(seconds=601), tick=False),
        pytest.raises(ReservationNotActive),
    ):
        reservation_extend(reservation_id=reservation.pk, user=user, ttl_seconds=600)
