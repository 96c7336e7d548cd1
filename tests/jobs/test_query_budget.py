"""Query budgets of the submission hot path (a regression here costs throughput)."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django_q.brokers.orm import ORM

from apps.core.queue import task_broker
from apps.quotas.models import QuotaPolicy
from tests.factories.submissions import make_submission

pytestmark = pytest.mark.django_db


def plain_submission_queries() -> int:
    """The statements of one new job with a key, inside a test's transaction. With the ORM
    broker the task's queue row is written in the job's transaction: on PostgreSQL by the
    function that inserts the job, on SQLite by an INSERT of its own."""
    if connection.vendor == "postgresql":
        return 6
    return 12 + (1 if isinstance(task_broker(), ORM) else 0)


Submit = Callable[..., Any]


def test_submission_and_replay_query_budgets(
    submit: Submit, user: User, user_client: Any, django_assert_num_queries: Any
) -> None:
    QuotaPolicy.objects.create(user=user)
    # The token's first use writes its last_used_at (then at most once a minute): not a
    # cost of each submission.
    assert user_client.get("/api/me/").status_code == HTTPStatus.OK
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "budget"}
    # token; key read; key insert (+ savepoint pair inside the test's transaction); savepoint
    # pair of the job transaction; draft -> pending (one conditional UPDATE); policy lock;
    # usage; job insert; key bind; the ORM broker's queue row. On PostgreSQL the key's read
    # and insert are one statement (no savepoint: it cannot fail on the key's unique
    # constraint), and the policy lock, the usage, the job's insert, the key's bind and the
    # queue row are one call of the admission function.
    with django_assert_num_queries(plain_submission_queries()):
        assert submit(body).status_code == HTTPStatus.CREATED
    # token; key read (with its job).
    with django_assert_num_queries(2):
        assert submit(body).status_code == HTTPStatus.OK
