"""Reading a request body on the event loop, within its limits.

A body is read into a spooled temporary file (memory up to `SPOOL_MEMORY`, then disk) while
the client sends it, so a client trickling a body holds a coroutine and a socket, never a
thread. It must keep bringing `min_rate` bytes per second after `grace` seconds, earlier bytes
banking at most `grace` seconds of silence (408 `request_timeout` otherwise), and stay within
the limit its route allows (`BodyLimits`; refused from `Content-Length` before a byte is read
when it declares more). Every byte held counts
against the worker's `SpoolBudget` and its client address's share of it until the request
ends: past either, 503 `service_unavailable` with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import IO, Any

from config.server.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Body bytes kept in memory before the spool moves to a file on disk.
SPOOL_MEMORY = 1024 * 1024
#: Seconds a client refused for a full spool budget is asked to wait.
BUSY_RETRY_AFTER = 5


@dataclass(frozen=True)
class BodyLimits:
    """How a request body must arrive (settings REQUEST_BODY_*, MAX_REQUEST_BODY_SIZE*)."""

    grace: float  # seconds before the minimum rate applies
    min_rate: float  # bytes per second, on average since the body started
    max_size: int  # bytes, on the upload routes with a credential
    drain: int  # bytes of a refused body read (and dropped) so the client reads the answer
    spool_dir: str | None = None
    default_size: int = 4 * 1024 * 1024  # bytes, everywhere else

    def first_due(self, started: float) -> float:
        """When the first byte of a body is due."""
        return started + self.grace

    def next_due(self, due: float, now: float, size: int) -> float:
        """When the next byte is due, `size` bytes having arrived at `now`: they earn
        `size / min_rate` seconds, but never more than `grace` seconds ahead of now. Bytes sent
        at once bank no silence: a body holding its bytes (and the spool budget) must keep
        bringing `min_rate` bytes per second."""
        return min(due + size / self.min_rate, now + self.grace)


@dataclass(frozen=True)
class Refusal:
    """An answer the server writes itself, in the API's error body; the connection closes."""

    status: HTTPStatus
    message: str
    extra: Mapping[str, object] = field(default_factory=dict)
    headers: tuple[tuple[bytes, bytes], ...] = ()


class SpoolBudget:
    """Bytes of request bodies one worker holds at once, in memory or on disk
    (`REQUEST_SPOOL_BUDGET`). A body is charged as its bytes arrive and released when its
    request ends, so holding the budget costs an attacker the bytes themselves.

    The last `reserve` bytes (`REQUEST_SPOOL_RESERVE`) go only to bodies within the default
    limit: an upload with a made-up credential (the server cannot check one) never takes the
    room an API call or a login form needs.

    Each client address holds at most `per_client` bytes of bodies within the default limit
    (`REQUEST_SPOOL_PER_CLIENT`) and, apart, at most `per_client_large` bytes of bodies allowed
    more (`MAX_REQUEST_BODY_SIZE`): many trickling connections from one address fill its own
    share, not the worker's budget, and a made-up credential buys one largest upload."""

    def __init__(
        self,
        total: int,
        reserve: int = 0,
        per_client: int | None = None,
        per_client_large: int | None = None,
    ) -> None:
        self.total = total
        self.reserve = min(reserve, total)
        self.per_client = total if per_client is None else per_client
        self.per_client_large = total if per_client_large is None else per_client_large
        self.held = 0
        self._clients: dict[tuple[str, bool], int] = {}
        self._lock = threading.Lock()  # released from the pool threads, charged on the loop

    def _share(self, large: bool) -> int:
        return self.per_client_large if large else self.per_client

    def available(self, keep: int = 0, client: str = "", large: bool = False) -> int:
        """Bytes a body of `client` may still be charged while `keep` bytes stay free."""
        with self._lock:
            own = self._share(large) - self._clients.get((client, large), 0)
            return min(self.total - keep - self.held, own)

    def charge(self, size: int, keep: int = 0, client: str = "", large: bool = False) -> bool:
        with self._lock:
            key = (client, large)
            own = self._clients.get(key, 0)
            if self.held + size > self.total - keep or own + size > self._share(large):
                return False
            self.held += size
            self._clients[key] = own + size
            return True

    def release(self, size: int, client: str = "", large: bool = False) -> None:
        with self._lock:
            self.held -= size
            key = (client, large)
            left = self._clients.get(key, 0) - size
            if left > 0:
                self._clients[key] = left
            else:
                self._clients.pop(key, None)  # no entry per address once seen


class ChargedSpool(tempfile.SpooledTemporaryFile[bytes]):
    """A body's spool that gives its bytes back to the budget when closed."""

    def __init__(
        self,
        budget: SpoolBudget,
        spool_dir: str | None,
        keep: int,
        client: str = "",
        large: bool = False,
    ) -> None:
        super().__init__(SPOOL_MEMORY, dir=spool_dir)
        self._budget = budget
        self._keep = keep
        self._client = client
        self._large = large
        self._charged = 0

    def charge(self, size: int) -> bool:
        if not self._budget.charge(size, self._keep, self._client, self._large):
            return False
        self._charged += size
        return True

    def close(self) -> None:
        try:
            super().close()
        finally:
            charged, self._charged = self._charged, 0
            if charged:
                self._budget.release(charged, self._client, self._large)


def too_large(limit: int) -> Refusal:
    return Refusal(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"A request body may carry at most {limit} bytes.",
        {"max_request_size": limit},
    )


def busy() -> Refusal:
    return Refusal(
        HTTPStatus.SERVICE_UNAVAILABLE,
        "The server is receiving too many request bodies at once; retry later.",
        headers=((b"Retry-After", str(BUSY_RETRY_AFTER).encode()),),
    )


def _too_slow(limits: BodyLimits) -> Refusal:
    return Refusal(
        HTTPStatus.REQUEST_TIMEOUT,
        f"The request body arrived slower than {limits.min_rate:g} bytes per second "
        f"(after the first {limits.grace:g} seconds); the connection is closed.",
    )


def declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value)  # gunicorn's parser accepted only digits, and only one
    return None


async def read_body(
    scope: Scope,
    receive: Receive,
    send: Send,
    limits: BodyLimits,
    *,
    limit: int,
    over_limit: Refusal,
    budget: SpoolBudget,
    client: str = "",
) -> IO[bytes] | None:
    """The whole body in a spooled file charged to `budget`, or None when the client left or
    was answered. Nothing is read before the declared length is checked against `limit` and
    the budget, so a client waiting for `100 Continue` gets the refusal instead. `client` is
    the address whose share of the budget the body is charged to."""
    # A body allowed more than the default limit leaves the budget's reserve to the others.
    large = limit > limits.default_size
    keep = budget.reserve if large else 0
    declared = declared_length(scope)
    if declared is not None and (
        declared > limit or declared > budget.available(keep, client, large)
    ):
        await refuse(send, over_limit if declared > limit else busy())
        await _drain(receive, limits, min(limits.drain, limit))
        return None
    loop = asyncio.get_running_loop()
    spool = ChargedSpool(budget, limits.spool_dir, keep, client, large)
    due, received = limits.first_due(loop.time()), 0
    try:
        try:
            # One timeout for the whole body, moved on as bytes arrive (no task per chunk).
            async with asyncio.timeout_at(due) as deadline:
                while True:
                    message = await receive()
                    if deadline.expired():
                        # The deadline passed as the chunk came: a receive built on
                        # `asyncio.wait_for` (gunicorn's) returns the chunk and swallows the
                        # timeout's cancellation, so the timeout would never be raised.
                        raise TimeoutError
                    if message["type"] != "http.request":
                        break  # the client left (or gunicorn gave up on an idle body)
                    chunk = message.get("body", b"")
                    received += len(chunk)
                    if received > limit:
                        await refuse(send, over_limit)
                        break
                    if not spool.charge(len(chunk)):
                        await refuse(send, busy())
                        break
                    spool.write(chunk)
                    if not message.get("more_body", False):
                        spool.seek(0)
                        return spool
                    due = limits.next_due(due, loop.time(), len(chunk))
                    deadline.reschedule(due)
        except TimeoutError:
            await refuse(send, _too_slow(limits))
    except BaseException:
        spool.close()
        raise
    spool.close()
    return None


async def _drain(receive: Receive, limits: BodyLimits, size: int) -> None:
    """Read and drop up to `size` bytes of a refused body, at the body's minimum rate, so that
    a client still sending reads the answer rather than a reset connection."""
    loop = asyncio.get_running_loop()
    due, received = limits.first_due(loop.time()), 0
    while received <= size:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, due - loop.time()))
        except TimeoutError:
            return
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        chunk = len(message.get("body", b""))
        received += chunk
        due = limits.next_due(due, loop.time(), chunk)


async def refuse(send: Send, refusal: Refusal) -> None:
    body = error_body(refusal.status, refusal.message, **refusal.extra)
    await send(
        {
            "type": "http.response.start",
            "status": int(refusal.status),
            "headers": [
                (b"Content-Type", b"application/json"),
                (b"Content-Length", str(len(body)).encode()),
                (b"Connection", b"close"),
                *refusal.headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
