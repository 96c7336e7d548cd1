"""Quota policies and reservations made directly (admission is what a test exercises)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import factory
from django.utils import timezone
from factory.declarations import LazyFunction, SubFactory

from apps.quotas.models import QuotaPolicy, Reservation
from tests.factories.users import UserFactory


class ReservationFactory(factory.django.DjangoModelFactory[Reservation]):
    """An active reservation (pass `consumed_at`, `released_at` or a past `expires_at`)."""

    class Meta:
        model = Reservation

    user = SubFactory(UserFactory)
    expires_at = LazyFunction(lambda: timezone.now() + dt.timedelta(minutes=5))


def make_policy(**fields: Any) -> QuotaPolicy:
    """The user's policy with the given limits (None = the settings default)."""
    user = fields.pop("user")
    policy, _ = QuotaPolicy.objects.update_or_create(user=user, defaults=fields)
    return policy


def make_reservation(**fields: Any) -> Reservation:
    return cast(Reservation, ReservationFactory(**fields))
