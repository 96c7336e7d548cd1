"""Booking helpers that go through the services (no API)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from apps.schedule.booking import life_spec_build
from apps.schedule.models import Life
from apps.schedule.services.booking import life_book


def book(user: User, data: dict[str, Any], *, life_uuid: str | None = None) -> Life:
    return life_book(user=user, spec=life_spec_build(data), life_uuid=life_uuid).life


def book_point(user: User, *, url: str, in_seconds: float = 3600, **action: Any) -> Life:
    when = (timezone.now() + dt.timedelta(seconds=in_seconds)).isoformat()
    return book(
        user,
        {
            "schedule_type": "point",
            "birth_time": when,
            "birth_action": {"path": url, "method": "POST", "body": {"n": 1}, **action},
        },
    )


def book_term(
    user: User,
    *,
    birth_url: str,
    death_url: str,
    in_seconds: float = 3600,
    length_seconds: float = 600,
    **action: Any,
) -> Life:
    start = timezone.now() + dt.timedelta(seconds=in_seconds)
    return book(
        user,
        {
            "schedule_type": "term",
            "birth_time": start.isoformat(),
            "death_time": (start + dt.timedelta(seconds=length_seconds)).isoformat(),
            "birth_action": {"path": birth_url, "method": "POST", **action},
            "death_action": {"path": death_url, "method": "POST", **action},
        },
    )
