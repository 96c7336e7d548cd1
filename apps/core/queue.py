"""Handing tasks to django-q2: the broker this process enqueues with (built once), and the
after-commit enqueue every service uses."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)


@cache
def task_broker() -> Any:
    """The configured django-q2 broker, one per process, to pass as `async_task(broker=...)`.

    Without it `async_task` builds a broker for every task: with Redis a new client and
    connection pool, so a TCP connect per enqueue. The ORM broker is replaced by one that
    inserts into the queue table as is: django-q2's own calls `close_old_connections()` before
    every use (right for the cluster's long-lived broker thread), which makes Django
    health-check the connection with an extra `SELECT 1` round trip before the INSERT; a
    request or a task already has its connection managed. Both are safe to share between
    threads (Redis clients pool their connections; the ORM broker uses each thread's own
    database connection).
    """
    from django_q.brokers import get_broker
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ

    class EnqueueOrm(ORM):
        @staticmethod
        def get_connection(list_key: str | None = None) -> Any:
            return OrmQ.objects.using(Conf.ORM)

    broker = get_broker()
    if type(broker) is ORM:
        return EnqueueOrm(list_key=broker.list_key)
    return broker


@dataclass(frozen=True)
class TaskEnqueue:
    """Enqueue the django-q2 task `task(*args)`: register it with `transaction.on_commit`.

    A broker that refuses the task (down, unreachable) is logged and swallowed, never raised:
    by then the work it names is committed, so failing the request would invite a client to
    retry what already happened. Work whose enqueue was lost is found again by its app's reaper
    (e.g. `grading_reap_expired`). A plain object rather than a `partial`, so that the task and
    its arguments can be named in logs and inspected by tests.
    """

    task: str
    args: tuple[Any, ...] = ()

    def __call__(self) -> None:
        from django_q.tasks import async_task

        try:
            async_task(self.task, *self.args, broker=task_broker())
        except Exception:
            logger.exception(
                "Could not enqueue %s%r; the work is committed and will be re-enqueued by its "
                "reaper.",
                self.task,
                self.args,
            )


def enqueue_on_commit(task: str, *args: Any) -> None:
    """Enqueue `task(*args)` once the current transaction commits (at once outside one)."""
    transaction.on_commit(TaskEnqueue(task, args))
