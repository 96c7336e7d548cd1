"""gunicorn's asyncio HTTP/1 protocol with a total deadline for each request head.

gunicorn bounds the wait for a kept-alive connection's next request (`keepalive`), but not the
first request's head, and no timeout a trickling client can reset protects a server. Here each
head must be complete within `REQUEST_HEADER_TIMEOUT` seconds of the moment the connection
starts waiting for it, however the bytes arrive; otherwise the connection is closed.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

from gunicorn.asgi import protocol as gunicorn_protocol
from gunicorn.asgi.parser import PythonProtocol
from gunicorn.asgi.protocol import ASGIProtocol

from config.server.errors import error_response

# gunicorn's asyncio protocol writes status lines from its own short table ("417 Unknown"); the
# WSGI application's status strings carried every phrase. Fill the table's gaps.
for _status in HTTPStatus:
    gunicorn_protocol._REASON_PHRASES.setdefault(_status.value, _status.phrase)


class BodyPassingParser(PythonProtocol):  # type: ignore[misc]  # no type hints in gunicorn
    """gunicorn's pure-Python HTTP/1 parser, except that a body's bytes read from the socket
    are handed on as they are. The parser appends every read to a buffer, then copies the body
    out of it twice (a slice, then `bytes`): three copies of each uploaded byte, each into new
    memory. A read that starts in the body with nothing buffered goes straight to `on_body`;
    heads, chunked bodies and the bytes after a body take gunicorn's path."""

    __slots__ = ()

    def feed(self, data: Any) -> None:
        parser: Any = self  # gunicorn's slots, untyped
        if parser._state == "body" and not parser._buffer and type(data) is bytes:
            take = min(len(data), parser._body_remaining)
            if take > 0:
                parser._body_remaining -= take
                if parser._on_body:
                    parser._on_body(data if take == len(data) else data[:take])
                if parser._body_remaining <= 0:
                    parser._state = "complete"
                    parser.is_complete = True
                    if parser._on_message_complete:
                        parser._on_message_complete()
                data = data[take:]
                if not data:
                    return
        super().feed(data)


# The protocol picks its parser (and recognises it) by this module-level name; gunicorn's C
# parser, when installed, is preferred as before.
gunicorn_protocol.PythonProtocol = BodyPassingParser


class Protocol(ASGIProtocol):  # type: ignore[misc]  # gunicorn ships no type hints
    #: Seconds a request head may take, set by the worker from the settings.
    head_timeout: float = 10.0

    _head_timer: asyncio.TimerHandle | None = None
    #: The response being written carries `Connection: close` (an answer the server wrote
    #: itself, whose body may be unread): no further request is served on the connection.
    _response_closes = False
    #: A whole request has arrived on the connection (its body included).
    _message_complete = False
    _got_data = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.worker.connections.add(self)
        self._arm_head_timer()
        # Two turns of the loop: the first polls the socket, the second runs after what it read.
        self.worker.loop.call_soon(self.worker.loop.call_soon, self._settle_if_silent)

    def _settle_if_silent(self) -> None:
        if not self._got_data:
            self._settle()  # nothing sent yet: the worker need not wait for this connection

    def _arm_keepalive_timer(self) -> None:
        # Called whenever the connection waits for its next request.
        super()._arm_keepalive_timer()
        self._arm_head_timer()
        self._settle()

    def data_received(self, data: bytes) -> None:
        self._got_data = True
        super().data_received(data)
        if not self._message_complete:
            self._settle()  # still sending: the worker need not wait for this request

    def _on_message_complete(self) -> None:
        self._message_complete = True
        super()._on_message_complete()

    def _settle(self) -> None:
        """This connection no longer keeps the worker from accepting others
        (config/server/accept.py)."""
        gate = getattr(self.worker, "gate", None)
        if gate is not None:
            gate.settle(self)

    def _on_headers_complete(self) -> Any:
        self._cancel_head_timer()
        return super()._on_headers_complete()

    async def _serve_http_request(self, request: Any, sockname: Any, peername: Any) -> bool:
        self._response_closes = False
        keepalive: bool = await super()._serve_http_request(request, sockname, peername)
        return keepalive and not self._response_closes

    def _send_response_start(
        self, status: int, headers: Any, request: Any, close: bool = False
    ) -> None:
        # gunicorn decides keep-alive from the request alone and writes the application's
        # `Connection` header as it is; a response that says close must end the connection.
        for name, value in headers:
            name_bytes = name if isinstance(name, bytes) else name.encode("latin-1")
            value_bytes = value if isinstance(value, bytes) else value.encode("latin-1")
            if name_bytes.lower() == b"connection" and b"close" in value_bytes.lower():
                self._response_closes = True
        super()._send_response_start(status, headers, request, close=close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._settle()
        self.worker.connections.discard(self)
        super().connection_lost(exc)

    def drop_if_waiting(self) -> None:
        """A stopping worker closes the connections waiting for a head (an idle kept-alive one,
        or a client still sending its head); the requests being served finish."""
        if self._awaiting_request:
            self._drop()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        if self.head_timeout > 0 and not self._closed:
            self._head_timer = self.worker.loop.call_later(self.head_timeout, self._head_expired)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if not self._awaiting_request:
            return  # the head arrived; a request is being served
        self.log.info("Request head not complete in %ss; connection dropped", self.head_timeout)
        self._drop()

    def _drop(self) -> None:
        self._cancel_head_timer()
        self._close_transport()
        if self._request_ready is not None:
            # Wakes the connection's task, which sees the connection closed and ends.
            self._request_ready.set()

    def _send_error_response(self, status: int, message: str, extra_headers: Any = ()) -> None:
        """What the parser refuses, in the API's JSON error body (gunicorn writes text)."""
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Error"
        self._safe_write(error_response(status, reason, message))
