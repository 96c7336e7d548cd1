"""The executor against a real HTTP receiver on loopback: retries, webhook signature, SSRF
refusals, death retries, exactly-once delivery."""

from __future__ import annotations

import datetime as dt
import socket
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from apps.schedule.batch import plan_execute_batch
from apps.schedule.execution.claims import plan_claim, plan_invalidate_late
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import Life, LifeState, Plan, PlanKind, PlanState
from apps.schedule.services.lives import life_cancel, life_change
from apps.schedule.services.plans import plan_retry
from tests.factories.schedule import book_point, book_term
from tests.schedule.conftest import Receiver

pytestmark = pytest.mark.django_db


def fire(plan: Plan) -> str:
    """Arm `plan` as a watcher would at its due time and deliver it once."""
    plan.refresh_from_db()
    armed = [a for a in plan_claim(owner="test", now=plan.due_at) if a.plan_id == plan.pk]
    assert armed, f"plan {plan.pk} ({plan.state}) was not claimable"
    return plan_execute(plan_id=plan.pk, token=armed[0].token)


def birth_of(life: Life) -> Plan:
    return life.plans.get(kind=PlanKind.BIRTH)


def death_of(life: Life) -> Plan:
    return life.plans.get(kind=PlanKind.DEATH)


def test_success_sends_a_signed_webhook_and_kills_a_point_life(
    user: User, receiver: Receiver
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    assert fire(birth_of(life)) == "done"
    [request] = receiver.requests
    assert request.path == "/hook"
    assert request.headers["X-Schedule-Life-UUID"] == life.life_uuid
    assert request.headers["X-Schedule-Plan"] == "birth"
    Webhook(django_settings.SCHEDULE_WEBHOOK_SECRET).verify(request.body, request.headers)
    life.refresh_from_db()
    assert life.state == LifeState.DEAD
    plan = birth_of(life)
    assert plan.state == PlanState.DONE
    assert [a.status_code for a in plan.attempts.all()] == [200]


def test_503_is_retried_then_succeeds_with_the_same_webhook_id(
    user: User, receiver: Receiver
) -> None:
    receiver.script = [(503, {})]
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=2, retry_interval=30)
    plan = birth_of(life)
    assert fire(plan) == "retry"
    plan.refresh_from_db()
    assert plan.state == PlanState.STANDBY
    assert 25 < (plan.due_at - timezone.now()).total_seconds() <= 30
    assert fire(plan) == "done"
    ids = {r.headers["webhook-id"] for r in receiver.requests}
    assert len(receiver.requests) == 2
    assert ids == {plan.webhook_id}
    assert [a.status_code for a in plan.attempts.order_by("number")] == [503, 200]


def test_retries_stop_after_retry_count(user: User, receiver: Receiver) -> None:
    receiver.script = [(500, {}), (502, {}), (504, {})]
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=2, retry_interval=0)
    plan = birth_of(life)
    assert [fire(plan), fire(plan), fire(plan)] == ["retry", "retry", "failed"]
    assert len(receiver.requests) == 3
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH


def test_404_fails_at_once_without_retry(user: User, receiver: Receiver) -> None:
    receiver.script = [(404, {})]
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=3)
    assert fire(birth_of(life)) == "failed"
    assert len(receiver.requests) == 1
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH
    assert birth_of(life).state == PlanState.FAILED


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_599_and_retried(user: User, settings: Any) -> None:
    port = _closed_port()
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{port}"]
    life = book_point(user, url=f"http://127.0.0.1:{port}/x", retry_count=1, retry_interval=0)
    plan = birth_of(life)
    assert fire(plan) == "retry"
    assert fire(plan) == "failed"
    attempts = list(plan.attempts.order_by("number"))
    assert [a.status_code for a in attempts] == [599, 599]
    assert "ConnectError" in attempts[0].error


def test_host_removed_from_the_allow_list_is_refused_at_execution(
    user: User, receiver: Receiver, settings: Any
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=3)
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = []
    assert fire(birth_of(life)) == "failed"
    assert receiver.requests == []
    [attempt] = birth_of(life).attempts.all()
    assert attempt.status_code is None
    assert attempt.error.startswith("refused")


def test_an_allowed_name_resolving_to_loopback_is_refused(
    user: User, receiver: Receiver, settings: Any
) -> None:
    port = receiver.server.server_address[1]
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"localhost:{port}"]
    life = book_point(user, url=f"http://localhost:{port}/hook")
    assert fire(birth_of(life)) == "failed"
    assert receiver.requests == []
    assert "internal address" in birth_of(life).attempts.get().error


@pytest.mark.parametrize("host", ["10.1.2.3", "169.254.169.254"])
def test_private_and_link_local_hosts_are_refused_at_booking(
    user_client: APIClient, host: str
) -> None:
    body = {
        "schedule_type": "point",
        "birth_time": (timezone.now() + dt.timedelta(hours=1)).isoformat(),
        "birth_action": {"path": f"http://{host}/latest/meta-data", "method": "GET"},
    }
    response = user_client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_schedule"


def test_a_redirect_to_another_host_is_not_followed(user: User, receiver: Receiver) -> None:
    receiver.script = [(302, {"Location": "http://169.254.169.254/latest/meta-data"})]
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=2)
    assert fire(birth_of(life)) == "failed"
    assert len(receiver.requests) == 1
    assert birth_of(life).attempts.get().status_code == 302


def test_a_failing_death_is_retried_every_death_retry_interval(
    user: User, receiver: Receiver
) -> None:
    receiver.script = [(200, {}), (500, {}), (404, {})]
    life = book_term(user, birth_url=f"{receiver.url}/b", death_url=f"{receiver.url}/d")
    assert fire(birth_of(life)) == "done"
    life.refresh_from_db()
    assert life.state == LifeState.ALIVE
    death = death_of(life)
    assert fire(death) == "retry"
    death.refresh_from_db()
    assert 55 < (death.due_at - timezone.now()).total_seconds() <= 60
    assert fire(death) == "retry"
    assert fire(death) == "done"
    life.refresh_from_db()
    assert life.state == LifeState.DEAD
    assert [a.status_code for a in death.attempts.order_by("number")] == [500, 404, 200]


def test_an_operator_cancel_stops_a_failing_death(user: User, receiver: Receiver) -> None:
    receiver.script = [(200, {}), (500, {})]
    life = book_term(user, birth_url=f"{receiver.url}/b", death_url=f"{receiver.url}/d")
    fire(birth_of(life))
    assert fire(death_of(life)) == "retry"
    life_cancel(life_uuid=life.life_uuid, user=None, operator=True)
    life.refresh_from_db()
    assert life.state == LifeState.DEAD
    assert death_of(life).state == PlanState.CANCELLED


@pytest.mark.usefixtures("q_sync")
def test_delete_during_a_term_runs_the_death_now(
    user: User, user_client: APIClient, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    life = book_term(user, birth_url=f"{receiver.url}/b", death_url=f"{receiver.url}/d")
    fire(birth_of(life))
    with django_capture_on_commit_callbacks(execute=True):
        response = user_client.delete(f"/api/schedules/{life.life_uuid}/")
    assert response.status_code == HTTPStatus.OK
    assert [r.path for r in receiver.requests] == ["/b", "/d"]
    life.refresh_from_db()
    assert life.state == LifeState.DEAD
    assert user_client.get(f"/api/schedules/{life.life_uuid}/").json()["state"] == "Dead"


def test_delete_before_birth_never_fires(user: User, receiver: Receiver) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = birth_of(life)
    armed = plan_claim(owner="w", now=plan.due_at)
    life_cancel(life_uuid=life.life_uuid, user=user)
    assert plan_execute(plan_id=plan.pk, token=armed[0].token) == "skipped"
    assert receiver.requests == []


def test_a_duplicate_delivery_runs_the_action_once(user: User, receiver: Receiver) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = birth_of(life)
    [armed] = plan_claim(owner="w", now=plan.due_at)
    assert plan_execute(plan_id=plan.pk, token=armed.token) == "done"
    assert plan_execute(plan_id=plan.pk, token=armed.token) == "skipped"
    assert len(receiver.requests) == 1


def test_a_delivery_costs_a_fixed_handful_of_statements(user: User, receiver: Receiver) -> None:
    """The hot path of a burst: claim (1 UPDATE), load plan + Life (1 SELECT), then one
    transaction that records the outcome (Life CAS, plan CAS, attempt INSERT)."""
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = birth_of(life)
    [armed] = plan_claim(owner="w", now=plan.due_at)
    with CaptureQueriesContext(connection) as captured:
        assert plan_execute(plan_id=plan.pk, token=armed.token) == "done"
    statements = [
        q["sql"].split()[0]
        for q in captured.captured_queries
        if q["sql"].split()[0] not in {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"}
    ]
    assert statements == ["UPDATE", "SELECT", "UPDATE", "UPDATE", "INSERT"]
    plan.refresh_from_db()
    assert (plan.state, plan.attempts_count, plan.attempts.get().number) == (PlanState.DONE, 1, 1)
    life.refresh_from_db()
    assert life.state == LifeState.DEAD


@pytest.mark.django_db(transaction=True)  # the plan threads need committed rows
def test_a_batch_starts_all_its_plans_with_one_update_and_one_select(
    user: User, receiver: Receiver
) -> None:
    lives = [book_point(user, url=f"{receiver.url}/hook", in_seconds=60) for _ in range(6)]
    armed = plan_claim(owner="w", now=max(life.birth_time for life in lives))
    items = [(a.plan_id, a.token) for a in armed]
    unarmed = birth_of(book_point(user, url=f"{receiver.url}/hook", in_seconds=3600))
    stale = (unarmed.pk, "not-the-token")
    with CaptureQueriesContext(connection) as captured:
        results = plan_execute_batch(items=[*items, stale])
    assert results == ["done"] * 6 + ["skipped"]
    assert [q["sql"].split()[0] for q in captured.captured_queries] == [
        "UPDATE",
        "SELECT",
        "SELECT",  # the stale item: is it a redelivery of a plan whose worker died? no
    ]
    assert set(
        Plan.objects.exclude(pk=unarmed.pk).values_list("state", "lease_owner", "attempts_count")
    ) == {(PlanState.DONE, "", 1)}
    unarmed.refresh_from_db()
    assert unarmed.state == PlanState.STANDBY
    assert len(receiver.requests) == 6


def test_an_empty_batch_starts_nothing(user: User, receiver: Receiver) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    plan_claim(owner="w", now=birth_of(life).due_at)
    assert plan_execute_batch(items=[]) == []
    assert birth_of(life).state == PlanState.PRESET


def test_a_stale_timer_after_patch_does_not_fire(user: User, receiver: Receiver) -> None:
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = birth_of(life)
    [old] = plan_claim(owner="w1", now=plan.due_at - dt.timedelta(minutes=4))
    later = (plan.due_at + dt.timedelta(minutes=30)).isoformat()
    life_change(user=user, life_uuid=life.life_uuid, data={"birth_time": later})
    plan.refresh_from_db()
    assert plan.state == PlanState.STANDBY
    [new] = plan_claim(owner="w2", now=plan.due_at)
    assert plan_execute(plan_id=plan.pk, token=old.token) == "skipped"
    assert plan_execute(plan_id=plan.pk, token=new.token) == "done"
    assert len(receiver.requests) == 1


def test_late_births_are_invalidated_and_their_death_never_runs(user: User) -> None:
    life = book_term(user, birth_url="/api/me/", death_url="/api/me/")
    plan = birth_of(life)
    with time_machine.travel(plan.due_at + dt.timedelta(minutes=4), tick=False):
        assert plan_claim(owner="w") == []
        assert plan_invalidate_late() == 1
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH
    assert birth_of(life).state == PlanState.INVALIDATED
    assert death_of(life).state == PlanState.CANCELLED


def test_a_dead_watchers_claim_is_taken_over_after_its_lease(user: User) -> None:
    life = book_point(user, url="/api/me/")
    plan = birth_of(life)
    [first] = plan_claim(owner="w1", now=plan.due_at - dt.timedelta(minutes=1))
    assert plan_claim(owner="w2", now=plan.due_at - dt.timedelta(seconds=30)) == []
    [taken] = plan_claim(owner="w2", now=plan.due_at)
    assert taken.token != first.token
    plan.refresh_from_db()
    assert plan.lease_owner == "w2"


def test_an_operator_retries_a_failed_birth(user: User, receiver: Receiver) -> None:
    receiver.script = [(400, {})]
    life = book_point(user, url=f"{receiver.url}/hook")
    plan = birth_of(life)
    fire(plan)
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH
    with pytest.raises(Exception, match="not been born"):
        plan_retry(plan_id=plan.pk)


def test_a_response_body_with_nul_is_recorded_without_it(user: User, receiver: Receiver) -> None:
    receiver.script = [(200, {"__body__": "a\x00b"})]
    life = book_point(user, url=f"{receiver.url}/hook")
    assert fire(birth_of(life)) == "done"
    assert birth_of(life).attempts.get().response_excerpt == "ab"


def test_a_redelivery_resumes_a_plan_whose_worker_died_only_after_its_timeouts(
    user: User, receiver: Receiver
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook", connect_timeout=1, request_timeout=2)
    plan = birth_of(life)
    [armed] = plan_claim(owner="w", now=plan.due_at)
    # The first delivery moved it to Running, then its worker died before any request.
    Plan.objects.filter(pk=plan.pk).update(state=PlanState.RUNNING, started_at=timezone.now())
    assert plan_execute(plan_id=plan.pk, token=armed.token) == "skipped"
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=64)):
        assert plan_execute(plan_id=plan.pk, token=armed.token) == "done"
    assert len(receiver.requests) == 1


@pytest.mark.usefixtures("q_sync")
def test_a_plan_abandoned_mid_attempt_is_delivered_again_by_the_fallback_pass(
    user: User, receiver: Receiver
) -> None:
    """A worker started a plan (Running) and was killed before recording its attempt; the Redis
    broker never redelivers. Once the attempt is certainly over, the every-minute pass hands
    the plan to a worker again, which finishes it; before that it leaves it alone."""
    from apps.schedule.execution.executor import plans_fire_due, plans_start

    life = book_point(user, url=f"{receiver.url}/hook", request_timeout=5)
    plan = birth_of(life)
    [armed] = plan_claim(owner="w", now=plan.due_at)
    with time_machine.travel(plan.due_at, tick=False):
        assert plan.pk in plans_start(items=[(plan.pk, armed.token)])  # then the worker dies
    with time_machine.travel(plan.due_at + dt.timedelta(seconds=60), tick=False):
        plans_fire_due(owner="fallback")
    assert receiver.requests == []
    assert Plan.objects.get(pk=plan.pk).state == PlanState.RUNNING
    with time_machine.travel(plan.due_at + dt.timedelta(seconds=71), tick=False):
        plans_fire_due(owner="fallback")
    plan.refresh_from_db()
    assert plan.state == PlanState.DONE
    assert [r.headers["webhook-id"] for r in receiver.requests] == [plan.webhook_id]


BAD_HEADERS = [
    {"X-Note": "caf\u00e9"},
    {"caf\u00e9": "1"},
    {"X-A": "1\r\nX-B: 2"},
    {"X A": "1"},
    {"": "1"},
    {"X-A": "\x7f"},
]


@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_an_action_header_that_cannot_be_sent_is_refused_at_booking(
    user_client: APIClient, receiver: Receiver, headers: dict[str, str]
) -> None:
    # A non-ASCII one made the HTTP client raise mid-delivery: the plan stayed Running.
    body = {
        "schedule_type": "point",
        "birth_time": (timezone.now() + dt.timedelta(hours=1)).isoformat(),
        "birth_action": {"path": f"{receiver.url}/hook", "method": "POST", "headers": headers},
    }
    response = user_client.post("/api/schedules/", body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_schedule"
    assert not Life.objects.exists()


@pytest.mark.parametrize("headers", BAD_HEADERS[:2])
def test_a_stored_action_header_that_cannot_be_sent_fails_the_plan_never_hangs_it(
    user: User, receiver: Receiver, headers: dict[str, str]
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=3)
    plan = birth_of(life)
    Plan.objects.filter(pk=plan.pk).update(action={**plan.action, "headers": headers})
    assert fire(plan) == "failed"
    assert receiver.requests == []
    [attempt] = birth_of(life).attempts.all()
    assert attempt.error.startswith("refused: Header")
    assert birth_of(life).state == PlanState.FAILED


def test_ordinary_action_headers_are_sent(user: User, receiver: Receiver) -> None:
    headers = {"X-Trace": "a b\tc !~", "Accept": "application/json"}
    life = book_point(user, url=f"{receiver.url}/hook", headers=headers)
    assert fire(birth_of(life)) == "done"
    [request] = receiver.requests
    assert request.headers["X-Trace"] == "a b\tc !~"
