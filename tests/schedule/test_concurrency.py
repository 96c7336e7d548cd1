"""Races with real threads (SQLite and PostgreSQL): bookings of one resource, claims of one
plan set, deliveries of one plan and of one batch, one life_uuid."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.schedule.batch import plan_execute_batch
from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, LifeState, Plan, PlanAttempt, PlanState
from tests.concurrency import run_concurrently
from tests.factories.schedule import book_point
from tests.schedule.conftest import Receiver, at, point_body, term_body

pytestmark = pytest.mark.django_db(transaction=True)


def test_ten_overlapping_bookings_of_one_resource_yield_exactly_one(
    user: User, client_for: Callable[[User], APIClient]
) -> None:
    clients = [client_for(user) for _ in range(10)]

    def book(i: int) -> int:
        body = term_body(birth=at(60 + i), death=at(70 + i), resource_id="gpu-0")
        return clients[i].post("/api/schedules/", body, format="json").status_code

    outcomes = run_concurrently(book, 10)
    statuses = Counter(o.value for o in outcomes)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert statuses == {HTTPStatus.CREATED: 1, HTTPStatus.CONFLICT: 9}
    assert Life.objects.filter(resource_id="gpu-0").count() == 1


def test_racing_posts_of_one_life_uuid_create_it_once(
    user: User, client_for: Callable[[User], APIClient]
) -> None:
    clients = [client_for(user) for _ in range(8)]
    body = point_body(life_uuid="ee" * 16, resource_id="r")
    outcomes = run_concurrently(
        lambda i: clients[i].post("/api/schedules/", body, format="json").status_code, 8
    )
    assert Counter(o.value for o in outcomes) == {HTTPStatus.CREATED: 1, HTTPStatus.OK: 7}
    assert Life.objects.count() == 1


def test_racing_watchers_never_claim_one_plan_twice(user: User) -> None:
    for i in range(40):
        book_point(user, url="/api/me/", in_seconds=60 + i)
    horizon = timezone.now() + dt.timedelta(hours=1)

    outcomes = run_concurrently(lambda i: plan_claim(owner=f"w{i}", horizon=horizon, limit=15), 4)
    claimed = [a.plan_id for o in outcomes for a in o.value]
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert len(claimed) == len(set(claimed))
    assert len(claimed) == 40
    owners = Counter(Plan.objects.values_list("lease_owner", flat=True))
    assert sum(owners.values()) == 40


def test_racing_deliveries_of_one_plan_run_its_action_once(user: User, receiver: Receiver) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = life.plans.get()
    [armed] = plan_claim(owner="w", now=plan.due_at)
    outcomes = run_concurrently(lambda i: plan_execute(plan_id=plan.pk, token=armed.token), 6)
    assert Counter(o.value for o in outcomes) == {"done": 1, "skipped": 5}
    assert len(receiver.requests) == 1
    plan.refresh_from_db()
    assert plan.state == PlanState.DONE
    assert plan.attempts.count() == 1


def test_duplicate_deliveries_of_one_batch_on_the_shared_threads_run_each_plan_once(
    user: User, receiver: Receiver
) -> None:
    """A broker redelivering a batch while the first copy still runs: both copies share the
    worker's persistent plan threads, and every plan is still delivered and recorded once."""
    lives = [book_point(user, url=f"{receiver.url}/hook", in_seconds=60) for _ in range(12)]
    due = max(life.birth_time for life in lives)
    armed = plan_claim(owner="w", now=due)
    items = [(a.plan_id, a.token) for a in armed]
    assert len(items) == 12

    outcomes = run_concurrently(lambda i: plan_execute_batch(items=items), 3)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    results = Counter(r for o in outcomes for r in o.value)
    assert results == {"done": 12, "skipped": 24}
    assert Counter(r.headers["webhook-id"] for r in receiver.requests) == Counter(
        dict.fromkeys(Plan.objects.values_list("webhook_id", flat=True), 1)
    )
    assert set(Plan.objects.values_list("state", "attempts_count")) == {(PlanState.DONE, 1)}
    assert PlanAttempt.objects.count() == 12
    assert set(Life.objects.values_list("state", flat=True)) == {LifeState.DEAD}


@pytest.mark.postgres
def test_the_exclusion_constraint_refuses_overlaps_without_the_lock(user: User) -> None:
    """PostgreSQL's last line of defence, exercised by writing past the service's lock."""
    from django.conf import settings
    from django.db import IntegrityError, transaction

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the exclusion constraint exists only on PostgreSQL")
    first = book_point(user, url="/api/me/", in_seconds=3600)
    first.resource_id = "shared"
    first.save(update_fields=["resource_id"])
    clone = Life.objects.get(pk=first.pk)
    clone.pk = None
    clone.life_uuid = "f" * 32
    with pytest.raises(IntegrityError), transaction.atomic():
        clone.save()
    clone.state = "Stillbirth"
    clone.save()  # a finished Life no longer holds the resource
