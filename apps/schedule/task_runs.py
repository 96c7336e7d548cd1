"""Services of the task endpoint: record a topic call, run its handler once on a worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.queue import enqueue_on_commit
from apps.schedule.booking import contains_nul
from apps.schedule.exceptions import UnknownTopic
from apps.schedule.models import TaskRun
from apps.schedule.topics import topic_get, topic_names

TASK_RUN_TASK = "apps.schedule.tasks.task_run"


@dataclass(frozen=True)
class TaskRunResult:
    task_run: TaskRun
    created: bool


def task_run_create(
    *, user: AbstractBaseUser, topic: str, content: dict[str, Any], key: str | None = None
) -> TaskRunResult:
    """Record a call of `topic` and hand it to a worker after commit.

    Idempotent on `key` (a plan's `webhook-id`): a retried delivery returns the first TaskRun
    and enqueues nothing. Raises UnknownTopic (400) or InvalidRequest-shaped UnknownTopic with
    `fields` for content the topic refuses.
    """
    spec = topic_get(topic)
    if spec is None:
        raise UnknownTopic(
            f"Unknown topic {topic!r}; known: {', '.join(topic_names())}.",
            fields={"topic": [f"Must be one of: {', '.join(topic_names())}."]},
        )
    errors = spec.validate(content)
    if contains_nul(content):
        errors = {**errors, "content": ["NUL characters are not allowed."]}
    if errors:
        raise UnknownTopic(f"Invalid content for {topic!r}.", fields=errors)
    if key:
        existing = TaskRun.objects.filter(key=key).first()
        if existing is not None:
            return _task_run_replay(existing)
    try:
        with transaction.atomic():
            run = TaskRun.objects.create(owner_id=user.pk, topic=topic, content=content, key=key)
            # Not robust: a refused enqueue fails the call (5xx), so the calling plan retries
            # with its webhook-id, and the replay below enqueues the still-pending run again.
            enqueue_on_commit(TASK_RUN_TASK, run.pk, robust=False)
    except IntegrityError:
        return _task_run_replay(TaskRun.objects.get(key=key))
    return TaskRunResult(run, created=True)


def _task_run_replay(run: TaskRun) -> TaskRunResult:
    """A repeated call (same key): the first TaskRun. One still pending is enqueued again, in
    case the first enqueue was lost; a duplicate delivery is a no-op (`task_run_execute`)."""
    if run.state == TaskRun.State.PENDING:
        enqueue_on_commit(TASK_RUN_TASK, run.pk, robust=False)
    return TaskRunResult(run, created=False)


def task_run_execute(*, task_run_id: int) -> str:
    """Run the handler exactly once: the pending → done compare-and-set and the handler's
    writes commit together, so a redelivery after success does nothing and a crash rolls both
    back (the broker delivers again)."""
    run = TaskRun.objects.select_related("owner").filter(pk=task_run_id).first()
    if run is None or run.state != TaskRun.State.PENDING:
        return "skipped"
    spec = topic_get(run.topic)
    if spec is None:
        TaskRun.objects.filter(pk=run.pk, state=TaskRun.State.PENDING).update(
            state=TaskRun.State.FAILED, error="unknown topic", finished_at=timezone.now()
        )
        return "failed"
    with transaction.atomic():
        claimed = TaskRun.objects.filter(pk=run.pk, state=TaskRun.State.PENDING).update(
            state=TaskRun.State.DONE, finished_at=timezone.now()
        )
        if claimed != 1:
            return "skipped"
        spec.handler(run.owner, dict(run.content))
    return "done"
