"""The task queue: every task is named once in apps.core.queue, and only named tasks go out."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils.module_loading import import_string

from apps.core.queue import TASKS, TaskEnqueue, enqueue, enqueue_on_commit
from apps.core.schedules import periodic_tasks


@pytest.mark.parametrize("task", TASKS)
def test_every_named_task_is_a_function_the_worker_can_import(task: str) -> None:
    assert callable(import_string(task))


def test_every_periodic_task_runs_a_named_task() -> None:
    assert {task.func for task in periodic_tasks()} <= set(TASKS)


@pytest.mark.django_db
def test_an_unnamed_task_is_refused_before_anything_is_enqueued(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(ValueError, match="not a task"):
            enqueue_on_commit("apps.jobs.tasks.nothing_here", "x")
        with pytest.raises(ValueError, match="not a task"):
            enqueue("os.system", "true")
    assert [c for c in callbacks if isinstance(c, TaskEnqueue)] == []
