"""The `grade_job` queue row written by the job's own INSERT statement (PostgreSQL, ORM broker)
is the row the broker's own enqueue writes; it exists exactly when the job does."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.models import OrmQ

from apps.core.queue import GRADE_JOB, enqueue_in_transaction, queue_row, task_broker
from apps.jobs.models import Job
from apps.quotas.models import QuotaPolicy
from apps.submissions.models import Submission
from tests.brokers import unreachable_broker
from tests.factories.submissions import make_submission

pytestmark = pytest.mark.django_db

Submit = Callable[..., Any]


@pytest.fixture
def orm_broker() -> None:
    """These tests read the ORM broker's rows (with REDIS_URL the broker is Redis: its tasks
    are enqueued after commit, as `tests/jobs/test_submit_api.py` checks)."""
    if not isinstance(task_broker(), ORM):
        pytest.skip("the broker is not the ORM broker")


def _shape(row: OrmQ) -> dict[str, Any]:
    """What a queue row says, without what differs from one enqueue to the next (the task's
    id, name and start, the row's id and lock moment): the key, the task's fields and the
    types of their values, the lock's type."""
    task = row.task
    return {
        "key": row.key,
        "fields": sorted(task),
        "types": {name: type(value).__name__ for name, value in task.items()},
        "func": task["func"],
        "args": [type(arg).__name__ for arg in task["args"]],
        "kwargs": task["kwargs"],
        "lock": type(row.lock).__name__,
        "lock_aware": timezone.is_aware(row.lock),
    }


@pytest.mark.usefixtures("orm_broker")
def test_the_job_statements_queue_row_is_the_brokers_own(
    submit: Submit, ready_submission: Submission, user: User
) -> None:
    before = timezone.now()
    response = submit({"submission_id": ready_submission.pk, "idempotency_key": "row-1"})
    assert response.status_code == HTTPStatus.CREATED
    job = Job.objects.get()
    [row] = OrmQ.objects.all()
    assert row.task["func"] == GRADE_JOB
    assert row.task["args"] == (job.pk,)
    assert before - dt.timedelta(seconds=1) <= row.lock <= timezone.now()

    # The general path: the broker's own INSERT of the same task.
    with transaction.atomic():
        enqueue_in_transaction(GRADE_JOB, job.pk)
    general = OrmQ.objects.exclude(pk=row.pk).get()
    assert _shape(row) == _shape(general)
    assert general.task["args"] == row.task["args"]
    assert general.task["id"] != row.task["id"]


@pytest.mark.usefixtures("orm_broker")
def test_a_refused_submission_leaves_no_queue_row(
    submit: Submit, user: User, ready_submission: Submission
) -> None:
    QuotaPolicy.objects.create(user=user, max_concurrent_jobs=1)
    first = submit({"submission_id": ready_submission.pk, "idempotency_key": "q-1"})
    assert first.status_code == HTTPStatus.CREATED
    other = make_submission(owner=user, question_id="another-question")
    refused = submit({"submission_id": other.pk, "idempotency_key": "q-2"})

    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert refused.json()["code"] == "quota_exceeded"
    assert [row.task["args"] for row in OrmQ.objects.all()] == [(first.json()["job_id"],)]


def test_a_row_is_built_only_for_the_orm_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    with transaction.atomic():
        built = queue_row(GRADE_JOB, "j")
        if isinstance(task_broker(), ORM):
            assert built is not None
            key, package, _lock = built.params
            assert key == task_broker().list_key
            assert isinstance(package, str)
        else:
            assert built is None
        broker = unreachable_broker()
        monkeypatch.setattr("apps.core.queue.task_broker", lambda: broker)
        assert queue_row(GRADE_JOB, "j") is None
    with pytest.raises(ValueError, match="not a task"):
        queue_row("apps.nowhere.task", "j")
    assert OrmQ.objects.count() == 0


@pytest.mark.usefixtures("orm_broker")
def test_the_submission_writes_one_row_per_job_on_each_database(submit: Submit, user: User) -> None:
    """Three jobs, three rows naming them: on PostgreSQL written by the job's statement, on
    SQLite by the broker (`enqueue_in_transaction`)."""
    ids = []
    for n in range(3):
        sub = make_submission(owner=user, question_id=f"q-{n}")
        response = submit({"submission_id": sub.pk, "idempotency_key": f"k-{n}"})
        assert response.status_code == HTTPStatus.CREATED
        ids.append(response.json()["job_id"])
    assert sorted(row.task["args"][0] for row in OrmQ.objects.all()) == sorted(ids)
