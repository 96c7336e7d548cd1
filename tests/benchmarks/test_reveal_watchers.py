"""The reveal fires on time and once with the processes production runs: two real
`run_plan_watcher` processes (one SIGKILLed while it holds the reveal's claim), a real
django-q2 cluster, and the platform's web server answering the reservation's signed call."""

from __future__ import annotations

import datetime as dt
import signal
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.benchmarks.models import Phase
from apps.core.queue import PLANS_FIRE_DUE, enqueue, task_broker
from apps.schedule.models import Life, LifeState, Plan, PlanAttempt, PlanState
from apps.schedule.selectors import watcher_heartbeats
from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply
from tests.processes import Start, child_env, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PATHS = {
    "dev": "/api/challenges/digits/phases/dev/reveal/",
    "code": "/api/challenges/digits/phases/code/reveal/",
}


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ends(ends: dict[str, dt.datetime]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        for phase in doc["phases"]:
            phase["end"] = _iso(ends[phase["slug"]])

    return change


def _done(plan_id: int) -> bool:
    return Plan.objects.get(pk=plan_id).state == PlanState.DONE


def _start(start_process: Start, base_url: str) -> dict[str, Any]:
    """A cluster and two watchers (A, B), returned once all three are at work."""
    env = child_env(
        BOOKING_PLAN_WATCH_INTERVAL="200",
        SCHEDULE_WEBHOOK_BASE_URL=base_url,
        Q_WORKERS="2",
    )
    start_process("qcluster", ["manage.py", "qcluster"], env)
    watchers = {
        name: start_process(name, ["manage.py", "run_plan_watcher", "--owner", name], env)
        for name in ("A", "B")
    }
    # The cluster takes tasks: a harmless one (a fallback watcher pass) leaves the queue.
    enqueue(PLANS_FIRE_DUE)
    wait_for(lambda: task_broker().queue_size() == 0, 60, "the cluster to take a task")
    wait_for(
        lambda: {name for name, _ in watcher_heartbeats()} >= set(watchers),
        60,
        "both watchers to tick",
    )
    return watchers


def test_the_reveal_fires_once_on_time_though_a_watcher_is_killed_holding_it(
    host: User,
    apply_as: Callable[[User], Apply],
    live_server: Any,
    settings: Any,
    start_process: Start,
) -> None:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    task_broker().purge_queue()
    watchers = _start(start_process, live_server.url)
    now = timezone.now()
    ends = {"dev": now + dt.timedelta(seconds=5), "code": now + dt.timedelta(seconds=7)}
    response = apply_as(host)(bundle(_ends(ends)))
    assert response.status_code == HTTPStatus.CREATED, response.json()

    def claimed() -> bool:
        return Plan.objects.filter(
            action__path=PATHS["dev"], state=PlanState.PRESET, lease_owner__in=watchers
        ).exists()

    wait_for(claimed, 4, "a watcher to arm the reveal")
    victim = Plan.objects.get(action__path=PATHS["dev"]).lease_owner
    watchers[victim].send_signal(signal.SIGKILL)
    watchers[victim].wait(5)
    assert timezone.now() < ends["dev"], "the watcher was killed before the reveal's time"

    def revealed() -> bool:
        return not Phase.objects.filter(revealed_at__isnull=True).exists()

    wait_for(revealed, 30, "both phases to be revealed")
    survivor = next(p for name, p in watchers.items() if name != victim)
    assert survivor.poll() is None
    for slug, path in PATHS.items():
        revealed_at = Phase.objects.get(slug=slug).revealed_at
        assert revealed_at is not None
        # On time: not before the end, and within the taken-over claim's lease and a poll.
        assert ends[slug] <= revealed_at < ends[slug] + dt.timedelta(seconds=3), (
            slug,
            revealed_at - ends[slug],
        )
        plan = Plan.objects.get(action__path=path)
        wait_for(partial(_done, plan.pk), 10, "the plan to finish")
        assert Life.objects.get(pk=plan.life_id).state == LifeState.DEAD
        # Exactly once: one attempt, one request under the plan's one webhook-id.
        [attempt] = PlanAttempt.objects.filter(plan=plan)
        assert attempt.status_code == HTTPStatus.OK
        assert '"revealed":true' in attempt.response_excerpt.replace(" ", "")


def test_a_bundle_that_moves_an_armed_reveal_later_reveals_at_the_new_time_only(
    host: User,
    apply_as: Callable[[User], Apply],
    live_server: Any,
    settings: Any,
    start_process: Start,
) -> None:
    settings.SCHEDULE_WEBHOOK_BASE_URL = live_server.url
    task_broker().purge_queue()
    _start(start_process, live_server.url)
    now = timezone.now()
    first = {"dev": now + dt.timedelta(seconds=5), "code": now + dt.timedelta(days=30)}
    apply = apply_as(host)
    assert apply(bundle(_ends(first))).status_code == HTTPStatus.CREATED
    wait_for(
        lambda: Plan.objects.filter(action__path=PATHS["dev"], state=PlanState.PRESET).exists(),
        4,
        "a watcher to arm the reveal",
    )

    moved = {**first, "dev": first["dev"] + dt.timedelta(seconds=5)}
    assert apply(bundle(_ends(moved))).status_code == HTTPStatus.OK
    assert timezone.now() < first["dev"], "the bundle was applied after the first time"

    wait_for(lambda: Phase.objects.get(slug="dev").revealed_at is not None, 30, "the reveal")
    revealed_at = Phase.objects.get(slug="dev").revealed_at
    assert revealed_at is not None
    assert moved["dev"] <= revealed_at < moved["dev"] + dt.timedelta(seconds=3)
    plan = Plan.objects.get(action__path=PATHS["dev"])
    wait_for(lambda: Plan.objects.get(pk=plan.pk).state == PlanState.DONE, 10, "the plan")
    assert PlanAttempt.objects.filter(plan=plan).count() == 1
    assert Phase.objects.get(slug="code").revealed_at is None
