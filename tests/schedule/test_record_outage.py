"""An attempt whose outcome meets an unreachable database: the delivery waits the outage out
and records the attempt, rather than leaving the plan Running for the redelivery of abandoned
attempts (which would send the request again). The outage is real: the receiver terminates
the delivering thread's PostgreSQL backend while it answers, as a database restart does."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection

from apps.schedule.delivery import plan_deliver
from apps.schedule.execution.claims import plan_claim
from apps.schedule.models import Life, LifeState, PlanAttempt, PlanKind, PlanState
from tests.factories.schedule import book_point
from tests.schedule.conftest import Receiver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="an embedded SQLite database has no server to restart",
    ),
]


def _terminate(pid: int) -> None:
    params = connection.get_connection_params()
    with psycopg.connect(
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        dbname=params.get("dbname"),
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.parametrize("status", [200, 500])
def test_an_outcome_is_recorded_across_a_database_outage_and_sent_once(
    user: User, receiver: Receiver, status: int
) -> None:
    life = book_point(user, url=f"{receiver.url}/hook", retry_count=2, retry_interval=60)
    plan = Life.objects.get(pk=life.pk).plans.get(kind=PlanKind.BIRTH)
    [armed] = [a for a in plan_claim(owner="pool", now=plan.due_at) if a.plan_id == plan.pk]
    backend: list[int] = []
    receiver.script.append((status, {}))
    receiver.on_request = lambda _r: _terminate(backend[0])
    results: list[str] = []

    def deliver() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend.append(int(cursor.fetchone()[0]))
        try:
            results.append(plan_deliver(plan_id=plan.pk, token=armed.token))
        finally:
            connection.close()

    thread = threading.Thread(target=deliver)
    thread.start()
    thread.join(60)
    assert results == (["done"] if status == 200 else ["retry"])
    assert [r.headers["webhook-id"] for r in receiver.requests] == [plan.webhook_id]
    plan.refresh_from_db()
    assert plan.state == (PlanState.DONE if status == 200 else PlanState.STANDBY)
    assert plan.attempts_count == 1
    assert list(PlanAttempt.objects.filter(plan=plan).values_list("status_code", flat=True)) == [
        status
    ]
    expected = LifeState.DEAD if status == 200 else LifeState.INEXISTENT
    assert Life.objects.get(pk=life.pk).state == expected
