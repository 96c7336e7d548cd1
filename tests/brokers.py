"""A real django-q2 Redis broker whose server is not there: every enqueue is refused; the
tasks a test enqueued."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import redis
from django_q.brokers.redis_broker import Redis as RedisBroker
from django_q.models import OrmQ

from apps.core.queue import TaskEnqueue


class _UnreachableRedis(RedisBroker):  # type: ignore[misc]  # django-q2 is untyped
    port = 0

    @classmethod
    def get_connection(cls, list_key: str | None = None) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=cls.port, socket_connect_timeout=1)


def unreachable_broker() -> Any:
    """A broker on a loopback port nobody listens on (connection refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        _UnreachableRedis.port = int(sock.getsockname()[1])
    return _UnreachableRedis("unreachable")


def queued_tasks(callbacks: list[Callable[[], Any]]) -> list[tuple[Any, ...]]:
    """The tasks enqueued, as (task, *args): the ORM broker's queue rows (the job submission
    writes its `grade_job` row in the job's transaction) and the on-commit enqueues captured
    in `callbacks` (`django_capture_on_commit_callbacks`; a Redis broker's, and every other
    service's)."""
    rows = [row.task for row in OrmQ.objects.order_by("id")]
    return [(task["func"], *task["args"]) for task in rows] + [
        (callback.task, *callback.args)
        for callback in callbacks
        if isinstance(callback, TaskEnqueue)
    ]
