"""POST /api/schedule/tasks/: topics run once on a worker; quota boost and restore."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django_q.conf import Conf
from rest_framework.test import APIClient

from apps.quotas.models import QuotaPolicy
from apps.schedule.models import TaskRun
from apps.schedule.task_runs import task_run_create, task_run_execute
from tests.brokers import unreachable_broker

pytestmark = pytest.mark.django_db
TASKS = "/api/schedule/tasks/"


def test_boost_then_restore_the_concurrent_quota(
    staff_user: User,
    staff_client: APIClient,
    django_capture_on_commit_callbacks: Any,
    q_sync: None,
) -> None:
    user, user_client = staff_user, staff_client
    with django_capture_on_commit_callbacks(execute=True):
        boost = user_client.post(
            TASKS, {"topic": "quota.boost", "content": {"concurrent": 3}}, format="json"
        )
    assert boost.status_code == HTTPStatus.ACCEPTED
    assert boost.json()["topic"] == "quota.boost"
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 3
    with django_capture_on_commit_callbacks(execute=True):
        user_client.post(
            TASKS, {"topic": "quota.restore", "content": {"concurrent": 3}}, format="json"
        )
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 0


def test_unknown_topic_is_refused(user_client: APIClient) -> None:
    response = user_client.post(TASKS, {"topic": "nope", "content": {}}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unknown_topic"
    assert "topic" in response.json()["fields"]


def test_bad_content_is_refused(staff_client: APIClient) -> None:
    response = staff_client.post(
        TASKS, {"topic": "quota.boost", "content": {"concurrent": "lots"}}, format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unknown_topic"
    assert TaskRun.objects.count() == 0


def test_missing_topic_is_invalid_request(user_client: APIClient) -> None:
    response = user_client.post(TASKS, {"content": {}}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


def test_a_retried_plan_call_runs_its_handler_once(staff_user: User) -> None:
    user = staff_user
    first = task_run_create(user=user, topic="quota.boost", content={"concurrent": 1}, key="msg_1")
    again = task_run_create(user=user, topic="quota.boost", content={"concurrent": 1}, key="msg_1")
    assert first.created
    assert not again.created
    assert again.task_run.pk == first.task_run.pk
    assert task_run_execute(task_run_id=first.task_run.pk) == "done"
    assert task_run_execute(task_run_id=first.task_run.pk) == "skipped"
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 1


def test_a_call_whose_enqueue_was_refused_is_enqueued_again_by_its_retry(
    staff_user: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """The broker refuses the first call's task: the call fails (so the plan retries with the
    same webhook-id) and its retry enqueues the still-pending run, which then runs once."""
    user = staff_user
    broker = unreachable_broker()
    monkeypatch.setattr("apps.core.queue.task_broker", lambda: broker)
    with pytest.raises(redis.ConnectionError), django_capture_on_commit_callbacks(execute=True):
        task_run_create(user=user, topic="quota.boost", content={"concurrent": 2}, key="msg_2")
    run = TaskRun.objects.get(key="msg_2")
    assert run.state == TaskRun.State.PENDING

    monkeypatch.setattr(Conf, "SYNC", True)  # the broker is back: run the task inline
    with django_capture_on_commit_callbacks(execute=True):
        again = task_run_create(
            user=user, topic="quota.boost", content={"concurrent": 2}, key="msg_2"
        )
    assert not again.created
    assert again.task_run.pk == run.pk
    run.refresh_from_db()
    assert run.state == TaskRun.State.DONE
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 2

    # A further retry of a finished run enqueues nothing and changes nothing.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        task_run_create(user=user, topic="quota.boost", content={"concurrent": 2}, key="msg_2")
    assert callbacks == []
    assert QuotaPolicy.objects.get(user=user).concurrent_boost == 2
