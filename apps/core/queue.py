"""The django-q2 broker this process enqueues with, built once."""

from __future__ import annotations

from functools import cache
from typing import Any


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
