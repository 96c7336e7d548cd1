"""The Django WSGI application behind gunicorn's asyncio worker.

A request reaches a thread only once its body is complete: the head is checked (`heads`), then
the loop reads the body within its route's limit and the worker's spool budget (`body`).

The threads are a fixed pool (gunicorn's `threads`, default 1 as in a sync worker), so each keeps
its database connection across requests (`CONN_MAX_AGE`). Django's own ASGI handler would run
each request in a new thread, opening a new database connection every time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any
from urllib.parse import unquote_to_bytes

from apps.core.client_address import address_of
from config.server.accept import AcceptGate
from config.server.body import (
    BodyLimits,
    Message,
    Receive,
    Scope,
    Send,
    SpoolBudget,
    read_body,
    refuse,
)
from config.server.heads import BodyRoutes, head_refusal, to_origin_form

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: Response bytes gathered into one trip to the event loop.
SEND_CHUNK = 64 * 1024


class WsgiBridge:
    """An ASGI application running a WSGI application on complete requests."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        threads: int,
        limits: BodyLimits,
        routes: BodyRoutes,
        budget: SpoolBudget,
        send_timeout: float,
        proxies: int = 0,
        gate: AcceptGate | None = None,
    ) -> None:
        self.app = app
        self.threads = threads
        self.limits = limits
        self.routes = routes
        self.budget = budget
        self.send_timeout = send_timeout
        self.proxies = proxies  # TRUSTED_PROXY_COUNT, for the client address
        self.gate = gate  # told when a request takes or leaves the threads
        self.executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="wsgi")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"only HTTP is served, not {scope['type']}")
        refusal = head_refusal(scope)
        if refusal is not None:
            await refuse(send, refusal)
            return
        to_origin_form(scope)
        limit, over_limit = self.routes.body_limit(scope, self.limits)
        body = await read_body(
            scope,
            receive,
            send,
            self.limits,
            limit=limit,
            over_limit=over_limit,
            budget=self.budget,
            client=client_address(scope, self.proxies),
        )
        if body is None:
            return
        loop = asyncio.get_running_loop()
        gate = self.gate
        if gate is not None:
            gate.started()
        future = self.executor.submit(self._run, scope, body, send, loop)
        try:
            await asyncio.wrap_future(future)
        finally:
            if future.cancel():  # cancelled before a thread took it: _run never closes it
                body.close()
            if gate is not None:
                if future.done():
                    gate.finished()
                else:  # the client left while a thread runs it: the thread is busy until it ends
                    future.add_done_callback(lambda _: _call_soon(loop, gate.finished))

    def _run(
        self, scope: Scope, body: IO[bytes], send: Send, loop: asyncio.AbstractEventLoop
    ) -> None:
        """In a pool thread: the WSGI call, its response sent through the loop."""
        try:
            response = _Response(send, loop, self.send_timeout)
            result = self.app(wsgi_environ(scope, body, self.threads > 1), response.start_response)
            try:
                response.send_iterable(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        finally:
            body.close()

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class _Response:
    """WSGI's start_response/write on top of ASGI send, called from a pool thread.

    Output is held back until `SEND_CHUNK` bytes gather, so that the last piece goes with
    `more_body: False` (a one-chunk response, as Django's usually are, is a single trip to the
    loop). A client that does not
    take a chunk within `timeout` seconds (gunicorn's `timeout`) frees the thread: the call
    ends with TimeoutError and the connection is closed."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self._send = send
        self._loop = loop
        self._timeout = timeout
        self._start: Message | None = None
        self._started = False
        self._held: bytes | None = None

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None and self._started:
            raise exc_info[1].with_traceback(exc_info[2])
        self._start = {
            "type": "http.response.start",
            "status": int(status.split(" ", 1)[0]),
            # Names as the application spelled them (ASGI servers match them without case).
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        }
        return self.write

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self._held is None:
            self._held = bytes(data)
        elif len(self._held) + len(data) <= SEND_CHUNK:
            self._held += data  # small chunks (a file served 4 KiB at a time) go together
        else:
            self._emit(self._held, more=True)
            self._held = bytes(data)

    def send_iterable(self, result: Iterable[bytes]) -> None:
        for chunk in result:
            self.write(chunk)
        self._emit(self._held or b"", more=False)

    def _emit(self, body: bytes, *, more: bool) -> None:
        messages: list[Message] = []
        if not self._started:
            if self._start is None:
                raise RuntimeError("the WSGI application sent a body before start_response")
            messages.append(self._start)
            self._started = True
        messages.append({"type": "http.response.body", "body": body, "more_body": more})
        self._held = None
        future = asyncio.run_coroutine_threadsafe(self._send_all(messages), self._loop)
        try:
            future.result(self._timeout)
        finally:
            future.cancel()

    async def _send_all(self, messages: list[Message]) -> None:
        for message in messages:
            await self._send(message)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """`callback` on `loop` from a pool thread; nothing once the loop is closed (a stopped
    worker)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def client_address(scope: Scope, proxies: int) -> str:
    """The address the application's `client_ip` finds for the same request."""
    client = scope.get("client") or ("", 0)
    values = [value for name, value in scope["headers"] if name == b"x-forwarded-for"]
    forwarded = b",".join(values).decode("latin-1") if values else None  # joined as in environ
    return address_of(str(client[0]), forwarded, proxies)


def wsgi_environ(scope: Scope, body: IO[bytes], multithread: bool) -> dict[str, Any]:
    """The environ a gunicorn sync worker builds for the same request (PEP 3333)."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: str = scope["query_string"].decode("latin-1")
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
        "PATH_INFO": unquote_to_bytes(raw_path).decode("latin-1"),
        "QUERY_STRING": query,
        "RAW_URI": raw_path.decode("latin-1") + (f"?{query}" if query else ""),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or 0),
        "SERVER_PROTOCOL": f"HTTP/{scope['http_version']}",
        "SERVER_SOFTWARE": "gunicorn",
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": multithread,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        # Repeated fields are joined as one list value (RFC 9110 §5.3), as gunicorn does.
        environ[name] = f"{environ[name]},{value}" if name in environ else value
    return environ
