"""A participant's own schedule reservation whose action is a phase's reveal path: its call is
signed by the platform (a real self-call over HTTP), but it is the participant's, not the
platform's reservation, so it reveals nothing, before or at the phase's time."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase
from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Plan, PlanState
from tests.benchmarks.boards import make_phase
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user
from tests.schedule.conftest import at

DEV = "/api/challenges/digits/phases/dev/reveal/"


@pytest.mark.django_db(transaction=True)
def test_a_participants_own_reservation_of_the_reveal_path_reveals_nothing(
    tmp_path: Any, live_server: Any, settings: Any, client_for: Any
) -> None:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    phase = make_phase(tmp_path, host=grant_add_challenge(make_user(username="alice")))
    mallory: User = make_user(username="mallory")
    client: APIClient = client_for(mallory)
    body = {
        "schedule_type": "point",
        "term": {"birth_time": at(5)},
        "birth": {"path": DEV, "method": "POST", "body": None},
    }
    booked = client.post("/api/schedules/", body, format="json")
    assert booked.status_code == HTTPStatus.CREATED, booked.json()
    plan = Plan.objects.get(life__owner=mallory, action__path=DEV)
    now = plan.due_at
    [armed] = [a for a in plan_claim(owner="test", now=now) if a.plan_id == plan.pk]
    plan_execute(plan_id=plan.pk, token=armed.token)
    plan.refresh_from_db()
    attempt = plan.attempts.get()
    assert attempt.status_code == HTTPStatus.FORBIDDEN  # the call reached the reveal view
    assert '"code":"permission_denied"' in attempt.response_excerpt
    assert plan.state == PlanState.FAILED
    phase.refresh_from_db()
    assert phase.revealed_at is None
    assert phase.end is not None
    assert timezone.now() < phase.end - dt.timedelta(days=1)  # the phase's time is far off
    assert Phase.objects.filter(revealed_at__isnull=False).count() == 0
