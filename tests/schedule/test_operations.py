"""Operations: admin pages and actions, the `schedule` cleanup kind, the django-q2 fallback pass
and its schedule."""

from __future__ import annotations

import datetime as dt
import io
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django_q.models import Schedule

from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.services.lives import life_cancel
from apps.schedule.tasks import watcher_pass_periodic
from tests.factories.schedule import book_point, book_term
from tests.schedule.conftest import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(staff_user: User) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def test_admin_pages_show_lives_plans_and_attempts(
    admin_client: Client, user: User, receiver: Receiver
) -> None:
    life = book_term(user, birth_url=f"{receiver.url}/b", death_url=f"{receiver.url}/d")
    plan = life.plans.get(kind="birth")
    for url in [
        "/admin/schedule/life/",
        "/admin/schedule/life/?state__exact=Inexistent&schedule_type__exact=term",
        f"/admin/schedule/life/{life.pk}/change/",
        "/admin/schedule/plan/",
        f"/admin/schedule/plan/{plan.pk}/change/",
        "/admin/schedule/planattempt/",
        "/admin/schedule/taskrun/",
        "/admin/schedule/scheduleresource/",
        "/admin/schedule/life/?q=" + life.life_uuid,
    ]:
        assert admin_client.get(url).status_code == HTTPStatus.OK, url


def test_admin_cancel_action_cancels_a_life(admin_client: Client, user: User) -> None:
    life = book_point(user, url="/api/me/")
    response = admin_client.post(
        "/admin/schedule/life/", {"action": "cancel_lives", "_selected_action": [life.pk]}
    )
    assert response.status_code == HTTPStatus.FOUND
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH


def test_admin_retry_action_rearms_a_failed_death(admin_client: Client, user: User) -> None:
    life = book_term(user, birth_url="/api/me/", death_url="/api/me/")
    Life.objects.filter(pk=life.pk).update(state=LifeState.ALIVE)
    death = life.plans.get(kind="death")
    Plan.objects.filter(pk=death.pk).update(state=PlanState.FAILED, attempts_count=3)
    admin_client.post(
        "/admin/schedule/plan/", {"action": "retry_failed", "_selected_action": [death.pk]}
    )
    death.refresh_from_db()
    assert death.state == PlanState.STANDBY
    assert death.attempts_count == 0


def test_cleanup_purges_old_history_only(user: User, settings: Any) -> None:
    old = book_point(user, url="/api/me/")
    life_cancel(life_uuid=old.life_uuid, user=user)
    recent = book_point(user, url="/api/me/", in_seconds=7200)
    life_cancel(life_uuid=recent.life_uuid, user=user)
    living = book_point(user, url="/api/me/")
    with time_machine.travel(old.birth_time + dt.timedelta(days=1, minutes=1), tick=False):
        out = io.StringIO()
        call_command("cleanup", "--only", "schedule", "--dry-run", stdout=out)
        assert Life.objects.count() == 3
        call_command("cleanup", "--only", "schedule", stdout=out)
    assert set(Life.objects.values_list("pk", flat=True)) == {recent.pk, living.pk}


@pytest.mark.usefixtures("q_sync")
def test_the_fallback_pass_fires_due_plans_without_a_watcher(
    user: User, receiver: Receiver
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook", in_seconds=60)
    assert watcher_pass_periodic() == 0
    with time_machine.travel(life.birth_time + dt.timedelta(seconds=40)):
        assert watcher_pass_periodic() == 1
    assert len(receiver.requests) == 1
    life.refresh_from_db()
    assert life.state == LifeState.DEAD


def test_bootstrap_creates_the_every_minute_watcher_pass(db: None) -> None:
    call_command("bootstrap", "--no-accounts", stdout=io.StringIO())
    schedule = Schedule.objects.get(name="yoyaku.schedule.watcher_pass")
    assert schedule.func == "apps.schedule.tasks.watcher_pass_periodic"
    assert schedule.minutes == 1
