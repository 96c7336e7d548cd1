"""The staff page /ops/: the headline numbers for someone without Prometheus."""

from __future__ import annotations

import datetime as dt
import re
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.core.services import heartbeat_beat
from apps.grading.models import GradingAttempt, GradingOutcome
from apps.schedule.models import Plan, PlanState
from tests.factories.jobs import make_job
from tests.factories.schedule import book_point
from tests.factories.submissions import make_stored_submission

pytestmark = pytest.mark.django_db


def rows(html: str) -> dict[str, str]:
    found = re.findall(r'<th scope="row">(.*?)</th><td data-label="[^"]*">(.*?)</td>', html)
    return {label.replace("&#x27;", "'"): value for label, value in found}


def test_a_visitor_is_sent_to_the_login_and_a_non_staff_user_gets_a_403_page(user: User) -> None:
    response = Client().get("/ops/")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"].startswith("/accounts/login/?next=/ops/")
    client = Client()
    client.force_login(user)
    response = client.get("/ops/")
    assert response.status_code == HTTPStatus.FORBIDDEN
    page = response.content.decode()
    assert "The operations page is for staff only." in page
    assert "alice" in page  # who is signed in, so they know why
    assert "admin/login" not in page


def test_staff_see_queue_gradings_watcher_lateness_and_5xx(
    staff_user: User, user: User, settings: Any
) -> None:
    now = timezone.now()
    for _ in range(3):
        make_job(make_stored_submission(user))
    oldest = make_job(make_stored_submission(user))
    type(oldest).objects.filter(pk=oldest.pk).update(created_at=now - dt.timedelta(minutes=5))
    graded = make_stored_submission(user)
    for number, outcome in enumerate(
        [GradingOutcome.COMPLETED, GradingOutcome.COMPLETED, GradingOutcome.FAILED], start=1
    ):
        GradingAttempt.objects.create(
            submission=graded,
            number=number,
            lease_token=f"t{number}",
            lease_expires_at=now,
            outcome=outcome,
            finished_at=now - dt.timedelta(minutes=number),
        )
    GradingAttempt.objects.create(  # two hours ago: not in the last hour
        submission=graded,
        number=9,
        lease_token="old",
        lease_expires_at=now,
        outcome=GradingOutcome.FAILED,
        finished_at=now - dt.timedelta(hours=2),
    )
    heartbeat_beat(name="watcher")
    heartbeat_beat(name="watcher:host-1:42")
    lates = [0.01, 0.02, 0.03, 2.0]
    for late in lates:
        life = book_point(user, url="/api/me/")
        Plan.objects.filter(life=life).update(
            state=PlanState.DONE,
            due_at=now - dt.timedelta(minutes=10),
            started_at=now - dt.timedelta(minutes=10) + dt.timedelta(seconds=late),
        )
    Client().get("/api/me/")  # a 4xx, counted in the metric files
    client = Client()
    client.force_login(staff_user)
    response = client.get("/ops/")
    assert response.status_code == HTTPStatus.OK
    shown = rows(response.content.decode())
    assert shown["Jobs queued"] == "4"
    assert shown["Oldest queued job"].startswith("5 min ")
    assert shown["Gradings finished in the last hour"] == "3"
    assert shown["Failed or abandoned in the last hour"] == "1"
    assert shown["Submissions waiting for review"] == "0"
    assert shown["Last watcher heartbeat (any watcher)"].endswith(" s ago")
    assert shown["Watcher host-1:42"].endswith(" s ago")
    assert shown["Plans started in the last hour"] == "4"
    assert shown["Plan lateness p50 (last hour)"] == "20 ms"
    assert shown["Plan lateness p99 (last hour)"] == "2000 ms"
    assert shown["Fired plans waiting for a worker"] == "0"
    requests = next(v for k, v in shown.items() if k.startswith("Requests answered"))
    assert float(requests) >= 1
    assert any(k.startswith("5xx answers") for k in shown)
    assert b'class="ops-bad"' in response.content  # the p99 over 1 s is flagged
