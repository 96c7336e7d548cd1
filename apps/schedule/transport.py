"""The HTTP client of plan actions: it connects only to the address the target check approved.

DNS rebinding: checking a name's addresses and then letting the HTTP client resolve the name
again to connect leaves a window in which the name can point somewhere else (a short TTL, a
resolver that answers differently each time). So the executor resolves once
(`targets.resolve_target`), checks every address, and the request connects to the address
that was checked.

How the address is pinned: the request keeps its real URL (so the `Host` header, the TLS
server name and the certificate check are those of the host name, and the connection pool is
keyed by the host name), and only the TCP connect is redirected — through an `httpcore`
network backend that connects to the `Route` the executor set for this request (a context
variable, so each plan thread has its own). Connecting to the IP literal instead, with a Host
header and an `sni_hostname`, would also pin the address, but the pool would then be keyed by
the IP, and a kept-alive TLS connection made for one name could be reused for another name on
the same address without its certificate ever being checked. A connect the executor did not
route (no route, another host or port) is refused, never resolved on its own.

Bounded time: each request has a deadline (SCHEDULE_ACTION_MAX_SECONDS at most) that bounds
every connect, read and write of its connection, so a receiver that trickles its answer cannot
hold a plan thread longer than that; and at most `max_body` bytes of the answer are read.
"""

from __future__ import annotations

import contextvars
import os
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from apps.schedule.targets import Target


@dataclass(frozen=True)
class Route:
    """Where the connection of the current request may go: `address` (an IP literal the
    target check approved), or by name to `host` when `address` is None (the platform's own
    SCHEDULE_WEBHOOK_BASE_URL, which the operator configures); and `deadline`
    (`time.monotonic()`) by which every connect, read and write of the request must be done."""

    host: str
    port: int
    address: str | None
    deadline: float


_ROUTE: contextvars.ContextVar[Route | None] = contextvars.ContextVar(
    "schedule_action_route", default=None
)

# What a failed request raises: connection, TLS, timeouts, protocol errors.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ConnectionNotAvailable,
    OSError,
)


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` cut to what is left of the current request's deadline; raises `error` once
    it has passed. httpcore's timeouts apply to each read or write on its own, so a receiver
    that sends one byte per read timeout could otherwise hold a thread for ever."""
    route = _ROUTE.get()
    if route is None:
        return timeout
    remaining = route.deadline - time.monotonic()
    if remaining <= 0:
        raise error("the attempt's time limit (SCHEDULE_ACTION_MAX_SECONDS) has passed")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by its request's deadline (looked up at each
    call: a kept-alive connection serves later requests with their own deadlines)."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects a new connection to its request's `Route`, and nowhere else."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        route = _ROUTE.get()
        if route is None or (host.lower(), port) != (route.host, route.port):
            raise httpcore.ConnectError(f"no checked address to connect {host}:{port} to")
        stream = self._inner.connect_tcp(
            route.address or route.host,
            port,
            timeout=_bounded(timeout, httpcore.ConnectTimeout),
            local_address=local_address,
            socket_options=socket_options,
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("actions never use unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


_POOLS: dict[int, tuple[httpcore.ConnectionPool, ssl.SSLContext]] = {}
_POOLS_LOCK = threading.Lock()


def _pool_and_context() -> tuple[httpcore.ConnectionPool, ssl.SSLContext]:
    """One connection pool per worker process (never shared across a fork), made once however
    many threads ask at the same time, and its TLS context (loading the CA bundle takes tens of
    milliseconds). No proxies from the environment, no redirects (httpcore never follows
    them)."""
    pid = os.getpid()
    with _POOLS_LOCK:
        made = _POOLS.get(pid)
        if made is None:
            _POOLS.clear()
            context = httpx.create_ssl_context(trust_env=False)
            # What httpcore sets on it for each HTTP/1.1 connection anyway.
            context.set_alpn_protocols(["http/1.1"])
            pool = httpcore.ConnectionPool(ssl_context=context, network_backend=PinnedBackend())
            made = _POOLS[pid] = (pool, context)
        return made


def _pool() -> httpcore.ConnectionPool:
    return _pool_and_context()[0]


def http_client_ready() -> None:
    """Make this process's connection pool and TLS context now (a delivery thread starting),
    rather than during the first request."""
    _pool_and_context()


def http_clients_close() -> None:
    """Close the pooled connections (process shutdown, tests)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool, _ in pools:
        pool.close()


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


@contextmanager
def _routed(route: Route) -> Iterator[None]:
    token = _ROUTE.set(route)
    try:
        yield
    finally:
        _ROUTE.reset(token)


def wire_target(url: str) -> tuple[httpcore.URL, str]:
    """The URL as it goes on the wire, and its host as the connection pool names it (IDNA,
    lower case; an IPv6 literal without brackets)."""
    parsed = httpx.URL(url)
    host = parsed.raw_host.decode("ascii").lower()
    wire = httpcore.URL(
        scheme=parsed.raw_scheme, host=parsed.raw_host, port=parsed.port, target=parsed.raw_path
    )
    return wire, host


@dataclass(frozen=True)
class Ahead:
    """A connection opened before its request's time (`connect_ahead`), to the address the
    target check approved; `send` uses it for that one request, then closes it."""

    connection: httpcore.HTTP11Connection
    stream: httpcore.NetworkStream

    def usable(self) -> bool:
        # Readable before anything was sent on it: the receiver closed it (or spoke unasked).
        return not self.connection.is_closed() and not self.stream.get_extra_info("is_readable")

    def close(self) -> None:
        self.connection.close()


def connect_ahead(*, target: Target, timeout: float) -> Ahead | None:
    """Open now (TCP, and TLS for https) the connection a request to `target` will be sent on
    at its time, so that its time is spent sending rather than connecting; gives up after
    `timeout` seconds. None when that fails, or when the pool holds an idle kept-alive
    connection to the same origin already: the request then connects (or reuses) at its time
    as before, and any failure is the request's own."""
    wire, host = wire_target(target.url)
    pool, context = _pool_and_context()
    origin = wire.origin
    if any(c.can_handle_request(origin) and c.is_idle() for c in pool.connections):
        return None
    deadline = time.monotonic() + timeout
    route = Route(host=host, port=target.port, address=target.address, deadline=deadline)
    stream: httpcore.NetworkStream | None = None
    try:
        with _routed(route):
            stream = PinnedBackend().connect_tcp(host, target.port, timeout=timeout)
            if wire.scheme == b"https":
                stream = stream.start_tls(context, server_hostname=host, timeout=timeout)
    except TRANSPORT_ERRORS:
        if stream is not None:
            stream.close()
        return None
    return Ahead(connection=httpcore.HTTP11Connection(origin=origin, stream=stream), stream=stream)


def send(
    *,
    target: Target,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes,
    connect_timeout: float,
    request_timeout: float,
    max_seconds: float,
    max_body: int,
    ahead: Ahead | None = None,
) -> Reply:
    """One request to `target`, connected to `target.address` (or by name for the platform's
    own base URL); reads at most `max_body` bytes of the response. The whole request (connect,
    send, response) ends within `max_seconds`, however slowly the receiver answers. Raises
    TRANSPORT_ERRORS.

    `ahead`, a connection `connect_ahead` opened for this request, carries it if the receiver
    has not closed it meanwhile (else the pool connects as usual); it is closed afterwards."""
    wire, host = wire_target(target.url)
    deadline = time.monotonic() + max_seconds
    route = Route(host=host, port=target.port, address=target.address, deadline=deadline)
    timeouts = {
        "connect": min(connect_timeout, max_seconds),
        "read": min(request_timeout, max_seconds),
        "write": min(request_timeout, max_seconds),
        "pool": min(connect_timeout, max_seconds),
    }
    client: httpcore.ConnectionInterface | httpcore.ConnectionPool = _pool()
    if ahead is not None and ahead.usable():
        client = ahead.connection
    try:
        with (
            _routed(route),
            client.stream(
                method, wire, headers=headers, content=body, extensions={"timeout": timeouts}
            ) as response,
        ):
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_stream():
                chunks.append(chunk)
                size += len(chunk)
                if size >= max_body:
                    break
            return Reply(status=response.status, body=b"".join(chunks)[:max_body])
    finally:
        if ahead is not None:
            ahead.close()
