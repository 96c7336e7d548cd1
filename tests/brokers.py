"""A real django-q2 Redis broker whose server is not there: every enqueue is refused."""

from __future__ import annotations

import socket
from typing import Any

import redis
from django_q.brokers.redis_broker import Redis as RedisBroker


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
