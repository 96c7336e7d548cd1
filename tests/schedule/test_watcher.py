"""The plan watcher: in-process timers fire on time; real `run_plan_watcher` processes (with a
real django-q2 cluster) fire every plan exactly once, survive a SIGKILLed peer after its lease,
and give their claims back on SIGTERM."""

from __future__ import annotations

import datetime as dt
import io
import signal
import subprocess
import threading
import time
from collections import Counter
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.core.selectors import heartbeat_get
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.schedule.selectors import WATCHER_HEARTBEAT
from apps.schedule.watcher import PlanWatcher
from tests.factories.schedule import book, book_point
from tests.schedule.conftest import Receiver, child_env, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fast(settings: Any) -> None:
    settings.EXECUTION_GUARD_TIME = 0.5
    settings.BOOKING_PLAN_WATCH_INTERVAL = 200


@pytest.mark.usefixtures("fast", "q_sync")
def test_armed_plans_fire_at_their_time_not_at_the_next_poll(
    user: User, receiver: Receiver, settings: Any
) -> None:
    settings.BOOKING_PLAN_WATCH_INTERVAL = 5000  # polls are rare; timers must do the work
    lives = [book_point(user, url=f"{receiver.url}/hook", in_seconds=1 + i / 2) for i in range(3)]
    due = {life.plans.get().webhook_id: life.birth_time.timestamp() for life in lives}
    watcher = PlanWatcher(owner="inproc")
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: len(receiver.requests) >= 3, 10)
    finally:
        watcher.stop()
        thread.join(10)
    lateness = [r.at - due[r.headers["webhook-id"]] for r in receiver.requests]
    assert all(-0.05 < late < 1.0 for late in lateness), lateness
    assert set(Life.objects.values_list("state", flat=True)) == {LifeState.DEAD}


@pytest.mark.usefixtures("fast", "q_sync")
def test_a_burst_due_at_one_instant_is_delivered_in_batches_exactly_once(
    user: User, receiver: Receiver
) -> None:
    moment = timezone.now() + dt.timedelta(seconds=3)  # 24 bookings may take a loaded second
    lives = [
        book(
            user,
            {
                "schedule_type": "point",
                "birth_time": moment.isoformat(),
                "birth_action": {"path": f"{receiver.url}/hook", "method": "POST"},
            },
        )
        for _ in range(24)
    ]
    watcher = PlanWatcher(owner="burst")
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: len(receiver.requests) >= 24, 15)
    finally:
        watcher.stop()
        thread.join(10)
    counts = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(counts) == {life.plans.get().webhook_id for life in lives}
    assert set(counts.values()) == {1}


@pytest.mark.usefixtures("fast")
def test_healthz_reports_the_watchers_last_tick(user: User) -> None:
    body = Client().get("/healthz").json()
    assert body["watcher"] == {"last_tick": None, "alive": False}
    assert body["status"] == "degraded"
    call_command("run_plan_watcher", "--once", stdout=io.StringIO())
    watcher = Client().get("/healthz").json()["watcher"]
    assert watcher["alive"] is True
    assert watcher["last_tick"]


# --- real processes ---------------------------------------------------------------------------


def book_many(user: User, receiver: Receiver, n: int, start: float, spread: float) -> list[Life]:
    return [
        book_point(user, url=f"{receiver.url}/hook", in_seconds=start + spread * i / n)
        for i in range(n)
    ]


def assert_each_fired_once(receiver: Receiver, lives: list[Life]) -> None:
    expected = {life.plans.get().webhook_id for life in lives}
    assert wait_until(lambda: len(receiver.requests) >= len(lives), 30)
    time.sleep(1.0)  # a duplicate would arrive now
    counts = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    assert wait_until(lambda: Life.objects.filter(state=LifeState.DEAD).count() == len(lives), 10)


@pytest.mark.slow
@pytest.mark.usefixtures("fast")
def test_two_watcher_processes_fire_every_plan_exactly_once(
    user: User, receiver: Receiver, processes: list[subprocess.Popen[bytes]]
) -> None:
    lives = book_many(user, receiver, 30, start=4, spread=3)
    env = child_env(receiver)
    spawn(processes, env, "qcluster")
    spawn(processes, env, "run_plan_watcher", "--owner", "A")
    spawn(processes, env, "run_plan_watcher", "--owner", "B")
    assert_each_fired_once(receiver, lives)
    owners = set(Plan.objects.values_list("state", flat=True))
    assert owners == {PlanState.DONE}


@pytest.mark.slow
@pytest.mark.usefixtures("fast")
def test_a_sigkilled_watchers_plans_are_taken_over_after_its_lease(
    user: User, receiver: Receiver, processes: list[subprocess.Popen[bytes]]
) -> None:
    env = child_env(receiver)
    victim = spawn(processes, env, "run_plan_watcher", "--owner", "victim")
    # Booked once it runs: it claims them at its next poll, long before the first is due.
    assert wait_until(lambda: heartbeat_get(name=WATCHER_HEARTBEAT) is not None, 30)
    lives = book_many(user, receiver, 20, start=4, spread=2)
    assert wait_until(
        lambda: Plan.objects.filter(state=PlanState.PRESET, lease_owner="victim").count() == 20,
        15,
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait(5)
    spawn(processes, env, "qcluster")
    spawn(processes, env, "run_plan_watcher", "--owner", "heir")
    assert_each_fired_once(receiver, lives)


@pytest.mark.slow
@pytest.mark.usefixtures("fast")
def test_sigterm_gives_back_unfired_claims(
    user: User, receiver: Receiver, processes: list[subprocess.Popen[bytes]]
) -> None:
    book_many(user, receiver, 5, start=120, spread=5)
    env = child_env(receiver)
    proc = spawn(processes, env, "run_plan_watcher", "--owner", "polite")
    assert wait_until(lambda: Plan.objects.filter(lease_owner="polite").count() == 5, 15)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    states = Counter(Plan.objects.values_list("state", "lease_owner"))
    assert states == {(PlanState.STANDBY, ""): 5}
    assert receiver.requests == []
    assert all(
        life.birth_time > life.created_at + dt.timedelta(seconds=100) for life in Life.objects.all()
    )


@pytest.mark.usefixtures("fast")
def test_a_plan_whose_task_the_broker_lost_is_armed_again_by_its_living_watcher(
    user: User, receiver: Receiver, settings: Any
) -> None:
    """With PLAN_DELIVERY=queue the watcher hands a fired plan to the broker, and no worker
    ever runs it (a Redis restart, or a killed cluster that had pulled it). The watcher stays
    alive: it must not keep renewing that plan's lease, so the plan is armed again after the
    lease, and only the new arming can start it."""
    from django_q.brokers import get_broker

    from apps.schedule.execution.executor import plan_execute

    settings.PLAN_DELIVERY = "queue"
    life = book_point(user, url=f"{receiver.url}/hook", in_seconds=1)
    plan = life.plans.get()
    watcher = PlanWatcher(owner="alive")
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: watcher.stats.dispatched >= 1, 10)
        first = Plan.objects.get(pk=plan.pk).arm_token
        # No cluster runs: the task is lost. The same watcher arms the plan again.
        assert wait_until(lambda: watcher.stats.dispatched >= 2, 10)
    finally:
        watcher.stop()
        thread.join(10)
        get_broker().purge_queue()
    rearmed = Plan.objects.get(pk=plan.pk)
    assert rearmed.state == PlanState.PRESET
    assert rearmed.arm_token != first
    # The lost task, delivered late, starts nothing; the new arming fires the plan once.
    assert plan_execute(plan_id=plan.pk, token=first) == "skipped"
    assert plan_execute(plan_id=plan.pk, token=rearmed.arm_token) == "done"
    assert [r.headers["webhook-id"] for r in receiver.requests] == [plan.webhook_id]
    assert Plan.objects.get(pk=plan.pk).state == PlanState.DONE
