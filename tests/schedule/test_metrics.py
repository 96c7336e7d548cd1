"""Schedule metrics, read from a real /metrics scrape: plans booked through the API and fired
by a real `run_plan_watcher` and `qcluster` (other processes), then retries and missed plans
through the services."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.queue import task_broker
from apps.schedule.execution.claims import plan_claim, plan_invalidate_late
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, Plan, PlanKind, PlanState
from apps.schedule.selectors import watcher_heartbeats
from tests.factories.schedule import book_point, book_term
from tests.metrics import deltas, scrape
from tests.processes import Start, child_env, stop, wait_for
from tests.schedule.conftest import Receiver

ATTEMPTS = "yoyaku_schedule_action_attempts_total"
LATENESS = "yoyaku_schedule_plan_lateness_seconds"


def _at(seconds: float) -> str:
    return (timezone.now() + dt.timedelta(seconds=seconds)).isoformat()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_plans_fired_by_a_real_watcher_and_worker_are_counted(
    user: User, user_client: APIClient, receiver: Receiver, settings: Any, start_process: Start
) -> None:
    settings.EXECUTION_GUARD_TIME = 0.5
    settings.BOOKING_PLAN_WATCH_INTERVAL = 200  # as in the watcher's environment
    task_broker().purge_queue()
    receiver.script = [(200, {}), (404, {})]
    before = scrape(settings)
    env = child_env(
        BOOKING_PLAN_WATCH_INTERVAL="200",
        SCHEDULE_WEBHOOK_ALLOWED_HOSTS=receiver.host,
        Q_WORKERS="2",
    )
    start_process("qcluster", ["manage.py", "qcluster"], env)
    watcher = start_process("watcher", ["manage.py", "run_plan_watcher", "--owner", "obs-A"], env)
    # The plans are booked once the watcher runs, so their lateness is the watcher's timer's,
    # not how long the processes took to start on a busy machine.
    wait_for(
        lambda: "obs-A" in {name for name, _ in watcher_heartbeats()}, 60, "the watcher to start"
    )
    uuids = []
    for seconds in (3, 4):
        response = user_client.post(
            "/api/schedules/",
            {
                "schedule_type": "point",
                "term": {"birth_time": _at(seconds)},
                "birth": {"path": f"{receiver.url}/hook", "method": "POST"},
            },
            format="json",
        )
        assert response.status_code == HTTPStatus.CREATED, response.content
        uuids.append(response.json()["life_uuid"])

    def finished() -> bool:
        states = Plan.objects.filter(life__life_uuid__in=uuids).values_list("state", flat=True)
        return sorted(states) == [PlanState.DONE, PlanState.FAILED]

    wait_for(finished, 40, "both plans to run")
    running = scrape(settings)
    assert "obs-A" in running.labels_of("yoyaku_schedule_watcher_heartbeat_age_seconds", "watcher")
    assert running.value("yoyaku_schedule_watcher_heartbeat_age_seconds", watcher="obs-A") < 5
    assert running.value("yoyaku_schedule_watcher_last_heartbeat_age_seconds") < 5
    assert running.value("yoyaku_schedule_watch_interval_seconds") == 0.2
    assert running.value("yoyaku_schedule_plans_waiting") == 0
    stop(watcher)
    after = scrape(settings)
    assert deltas(before, after, "yoyaku_schedule_plans_fired_total", "kind") == {"birth": 2}
    assert after.value(f"{LATENESS}_count") - before.value(f"{LATENESS}_count") == 2
    # Fired by an in-process timer: both well within 2.5 s of their time.
    assert (
        after.value(f"{LATENESS}_bucket", le="2.5") - before.value(f"{LATENESS}_bucket", le="2.5")
        == 2
    )
    moved = {
        cls: after.value(ATTEMPTS, kind="birth", attempt="first", status_class=cls)
        - before.value(ATTEMPTS, kind="birth", attempt="first", status_class=cls)
        for cls in ("2xx", "4xx", "5xx")
    }
    assert moved == {"2xx": 1, "4xx": 1, "5xx": 0}
    assert deltas(before, after, "yoyaku_schedule_plans_finished_total", "outcome") == {
        "done": 1,
        "failed": 1,
    }
    # A watcher that stopped cleanly is no longer reported.
    assert "obs-A" not in after.labels_of(
        "yoyaku_schedule_watcher_heartbeat_age_seconds", "watcher"
    )
    assert Life.objects.filter(life_uuid__in=uuids).count() == 2


def _fire(plan: Plan) -> str:
    plan.refresh_from_db()
    armed = [a for a in plan_claim(owner="test", now=plan.due_at) if a.plan_id == plan.pk]
    return plan_execute(plan_id=plan.pk, token=armed[0].token)


@pytest.mark.django_db
def test_retries_and_missed_plans_are_counted(
    user: User, receiver: Receiver, settings: Any
) -> None:
    receiver.script = [(503, {}), (200, {})]
    retried = book_point(user, url=f"{receiver.url}/hook", retry_count=1, retry_interval=0)
    # Later than the first plan's arming horizon, so only the invalidation touches it.
    missed = book_term(user, birth_url="/api/me/", death_url="/api/me/", in_seconds=7200)
    before = scrape(settings)
    plan = retried.plans.get()
    assert [_fire(plan), _fire(plan)] == ["retry", "done"]
    birth = missed.plans.get(kind=PlanKind.BIRTH)
    with time_machine.travel(birth.due_at + dt.timedelta(minutes=4), tick=False):
        assert plan_invalidate_late() == 1
    after = scrape(settings)
    assert (
        after.value(ATTEMPTS, attempt="first", status_class="5xx")
        - before.value(ATTEMPTS, attempt="first", status_class="5xx")
        == 1
    )
    assert (
        after.value(ATTEMPTS, attempt="retry", status_class="2xx")
        - before.value(ATTEMPTS, attempt="retry", status_class="2xx")
        == 1
    )
    assert deltas(before, after, "yoyaku_schedule_action_retries_total", "kind") == {"birth": 1}
    assert deltas(before, after, "yoyaku_schedule_plans_invalidated_total", "kind") == {"birth": 1}
    assert deltas(before, after, "yoyaku_schedule_plans_fired_total", "kind") == {"birth": 2}
    assert deltas(before, after, "yoyaku_schedule_plans_finished_total", "outcome") == {"done": 1}
