"""Load-aware accepting: a worker takes a new connection only when its threads could serve it.

Every worker of the `web` process listens on the same socket. asyncio's own server accepts
whatever the kernel holds (up to 100 connections a wake-up) whether or not the worker's thread
is free, so a request could wait behind a busy worker's queue while another worker sat idle.
Here a worker stops reading the listening socket while all its threads are busy, and takes
one connection at a time: until that connection's request reaches a thread (or the connection
shows it is still sending, closes, or `SETTLE` seconds pass), the worker takes no other. The
connections not taken wait in the kernel's queue (gunicorn's `backlog`) for the first worker
with a free thread, as with sync workers.

A connection that sends nothing at once, or sends its head or body slowly, holds no thread and
stops accepting only for a few turns of the loop: until the loop has polled it and found nothing,
or its first bytes arrive incomplete (`SETTLE` seconds at most, say for a TLS handshake). It then
waits for its deadlines (`Protocol.head_timeout`, the body's) while the worker accepts others.

Kept-alive connections sending request after request keep a worker's threads busy without
end; a worker whose threads went on finishing requests while connections waited `WAIT_LIMIT`
seconds in the kernel's queue takes them, so that they are not kept out for good.
"""

from __future__ import annotations

import asyncio
import errno
import select
import socket
import ssl
from collections.abc import Callable
from typing import Any

#: Seconds a newly accepted connection may keep its worker from accepting another one while its
#: request is on its way to a thread.
SETTLE = 0.01
#: Seconds a closed gate leaves connections in the kernel's queue: if they still wait then
#: and the worker finished a request meanwhile (its threads go from one kept-alive
#: connection's request to the next), they are taken and their requests wait their turn, so
#: that kept-alive connections sending request after request cannot keep new ones out for
#: good. A worker whose threads finished nothing (a long request) takes none: another may.
WAIT_LIMIT = 0.5
#: Connections taken at most at once that way.
TAKE_WAITING = 100
#: Seconds before accepting again after running out of file descriptors or memory (asyncio's
#: own delay).
RETRY_DELAY = 1.0
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def _waiting(sock: socket.socket) -> bool:
    """Whether a connection waits in `sock`'s queue (`poll`: any descriptor number)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class AcceptGate:
    """Whether a worker accepts: its requests running or queued for its threads (`busy`), and
    the one connection accepted last while it has not shown what it is (`fresh`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int) -> None:
        self.loop = loop
        self.threads = threads
        self.busy = 0
        self.finishes = 0  # requests finished, ever
        self.fresh: object | None = None
        self._fresh_timer: asyncio.TimerHandle | None = None
        self.acceptors: list[Acceptor] = []

    @property
    def open(self) -> bool:
        return self.busy < self.threads and self.fresh is None

    def hold(self, connection: object) -> None:
        """`connection` was just accepted: no other until it settles."""
        self._cancel_timer()
        self.fresh = connection
        self._fresh_timer = self.loop.call_later(SETTLE, self.settle, connection)

    def settle(self, connection: object) -> None:
        """`connection` no longer keeps the worker from accepting."""
        if self.fresh is connection:
            self.fresh = None
            self._cancel_timer()
            self._changed()

    def started(self) -> None:
        """A request was handed to the threads (it may wait there for one)."""
        self.busy += 1
        if self.fresh is not None:
            self.fresh = None  # the busy count stands in for it
            self._cancel_timer()
            self._changed()

    def finished(self) -> None:
        self.busy -= 1
        self.finishes += 1
        self._changed()

    def _cancel_timer(self) -> None:
        if self._fresh_timer is not None:
            self._fresh_timer.cancel()
            self._fresh_timer = None

    def _changed(self) -> None:
        if self.open:
            for acceptor in self.acceptors:
                acceptor.resume()


class Acceptor:
    """One listening socket read while the gate is open, one connection per turn of the loop.

    It stands where gunicorn's asyncio worker keeps its servers (`close`, `wait_closed`)."""

    def __init__(
        self,
        gate: AcceptGate,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext | None,
        log: Any,
    ) -> None:
        self.gate = gate
        self.loop = gate.loop
        self.sock = sock
        self.sock.setblocking(False)
        self.protocol_factory = protocol_factory
        self.ssl_context = ssl_context
        self.log = log
        self._reading = False
        self._closed = False
        self._waiting_timer: asyncio.TimerHandle | None = None
        self._finishes = 0  # the gate's count when the watch was armed
        self._connecting: set[asyncio.Task[Any]] = set()
        gate.acceptors.append(self)
        self.resume()

    def resume(self) -> None:
        if not self._closed and not self._reading and self.gate.open:
            self.loop.add_reader(self.sock.fileno(), self._accept)
            self._reading = True

    def pause(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.sock.fileno())
            self._reading = False
        self._watch(WAIT_LIMIT)

    def _watch(self, delay: float) -> None:
        if self._waiting_timer is not None:
            self._waiting_timer.cancel()
        self._waiting_timer = None
        self._finishes = self.gate.finishes
        if not self._closed:
            self._waiting_timer = self.loop.call_later(delay, self._check_waiting)

    def _check_waiting(self) -> None:
        """While the gate is closed: connections left waiting while the worker's threads
        moved on to other requests are taken."""
        self._waiting_timer = None
        if self._closed or self._reading:
            return
        progressed = self.gate.finishes != self._finishes
        if progressed and _waiting(self.sock):
            for _ in range(TAKE_WAITING):  # asyncio's own server takes as many a wake-up
                if not self._take():
                    break
            return
        self._watch(WAIT_LIMIT)

    def _accept(self) -> None:
        if not self.gate.open:
            self.pause()
            return
        self._take()

    def _take(self) -> bool:
        """Accept one connection; whether there was one."""
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            if not self._reading:
                self._watch(WAIT_LIMIT)
            return False  # another worker took it, or the client left
        except OSError as exc:
            if exc.errno not in _RESOURCE_ERRORS:
                raise
            self.log.error("Out of resources accepting a connection (%s); retrying", exc)
            self.pause()
            self.loop.call_later(RETRY_DELAY, self.resume)
            return False
        conn.setblocking(False)
        protocol = self.protocol_factory()
        self.gate.hold(protocol)
        self.pause()  # until the gate opens again
        task = self.loop.create_task(self._connect(conn, protocol))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)
        return True

    async def _connect(self, conn: socket.socket, protocol: asyncio.Protocol) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: protocol, conn, ssl=self.ssl_context)
        except Exception as exc:  # a TLS handshake that failed or timed out
            self.log.debug("Connection not set up: %s", exc)
            conn.close()
            self.gate.settle(protocol)

    def close(self) -> None:
        """Stop accepting (a stopping worker); the kernel's queue stays for the other workers."""
        self._closed = True
        self.pause()
        if self._waiting_timer is not None:
            self._waiting_timer.cancel()
            self._waiting_timer = None

    async def wait_closed(self) -> None:
        return
