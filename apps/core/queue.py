"""The django-q2 broker this process enqueues with, built once."""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def task_broker() -> Any:
    """The configured django-q2 broker, one per process, to pass as `async_task(broker=...)`.

    Without it `async_task` builds a broker for every task: with Redis a new client and
    connection pool, so a TCP connect per enqueue; with the ORM broker an extra stale-connection
    check. Both brokers are safe to share between threads (Redis clients pool their
    connections; the ORM broker uses each thread's own database connection).
    """
    from django_q.brokers import get_broker

    return get_broker()
