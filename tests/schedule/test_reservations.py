"""The platform's own reservations: one pending Life per path, owned by the platform's account,
however many changes race; moved, cancelled and booked again."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection
from django.utils import timezone

from apps.core.accounts import PLATFORM_USERNAME, platform_account
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.services.reservations import platform_reservation_set, platform_reservations

PATH = "/api/me/"


@pytest.mark.django_db
def test_set_books_moves_and_cancels_one_pending_life() -> None:
    at = timezone.now() + dt.timedelta(hours=1)
    booked = platform_reservation_set(path=PATH, at=at)
    assert booked is not None
    assert platform_reservation_set(path=PATH, at=at) == booked  # idempotent
    assert platform_reservations(prefix="/api/") == {PATH: at}
    assert booked.owner.get_username() == PLATFORM_USERNAME
    assert booked.booking_token_id is None

    later = at + dt.timedelta(hours=1)
    moved = platform_reservation_set(path=PATH, at=later)
    assert moved is not None
    assert moved.pk == booked.pk
    assert Plan.objects.get(life=moved).time == later

    assert platform_reservation_set(path=PATH, at=None) is None
    assert platform_reservations(prefix="/api/") == {}
    assert Life.objects.get(pk=booked.pk).state == LifeState.STILLBIRTH
    assert Plan.objects.get(life=booked).state == PlanState.CANCELLED


@pytest.mark.django_db
def test_the_platform_account_has_no_password_and_no_rights() -> None:
    account = platform_account()
    assert account.is_active
    assert not account.has_usable_password()
    assert not getattr(account, "is_staff", True)
    assert platform_account().pk == account.pk


@pytest.mark.django_db(transaction=True)
def test_racing_changes_of_one_path_leave_one_pending_life() -> None:
    base = timezone.now() + dt.timedelta(hours=1)
    times = [base + dt.timedelta(minutes=i) for i in range(8)]
    barrier = threading.Barrier(len(times))
    errors: list[BaseException] = []

    def change(at: dt.datetime) -> None:
        try:
            barrier.wait()
            platform_reservation_set(path=PATH, at=at)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=change, args=(at,)) for at in times]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    pending = platform_reservations(prefix=PATH)
    assert list(pending) == [PATH]
    assert pending[PATH] in times
    assert Life.objects.filter(state=LifeState.INEXISTENT).count() == 1
    assert Plan.objects.filter(state=PlanState.STANDBY).count() == 1
