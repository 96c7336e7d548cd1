"""The gunicorn worker class of the `web` process (config/gunicorn.py `worker_class`).

gunicorn's asyncio worker (`-k asgi`) reads every connection on one event loop; this one serves
the WSGI application given on the command line (`config.wsgi`) through `WsgiBridge`, with the
head deadline of `Protocol`. The master, its hooks (metrics' `child_exit`), `--workers`, the
request limits, logging and SIGTERM's graceful stop are gunicorn's as before.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from gunicorn.workers import gasgi

from config.server.accept import AcceptGate, Acceptor
from config.server.body import BodyLimits, SpoolBudget
from config.server.bridge import WsgiBridge
from config.server.heads import BodyRoutes
from config.server.protocol import Protocol

# The asyncio worker builds each connection's protocol from this module-level name; there is no
# setting for it.
gasgi.ASGIProtocol = Protocol


class Worker(gasgi.ASGIWorker):  # type: ignore[misc]  # gunicorn ships no type hints
    bridge: WsgiBridge | None = None
    gate: AcceptGate | None = None
    asgi: Any  # the application gunicorn loaded (here WSGI), then the bridge serving it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[Protocol] = set()

    def handle_exit_signal(self) -> None:
        """SIGTERM: stop accepting, finish the requests being served, and close at once the
        connections still waiting for a head, rather than waiting out their deadline."""
        super().handle_exit_signal()
        for connection in list(self.connections):
            connection.drop_if_waiting()

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        """The asyncio worker warns about `threads`; here they size the WSGI thread pool."""

    async def _serve(self) -> None:
        """gunicorn's serving loop with the listening sockets read by `Acceptor`s, which take a
        connection only while the worker has a free thread (config/server/accept.py). The WSGI
        application has no ASGI lifespan (config/gunicorn.py turns it off)."""
        if self.gate is None:  # load_wsgi makes it
            raise RuntimeError("the worker's application is not loaded")
        ssl_context = self._get_ssl_context()
        for sock in self.sockets:
            acceptor = Acceptor(self.gate, sock.sock, lambda: Protocol(self), ssl_context, self.log)
            self.servers.append(acceptor)
        try:
            while self.alive:
                self.notify()
                if self.ppid != os.getppid():
                    self.log.info("Parent changed, shutting down: %s", self)
                    break
                await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            pass
        await self._shutdown()

    def load_wsgi(self) -> None:
        super().load_wsgi()  # self.asgi = the WSGI application named on the command line
        from django.conf import settings

        Protocol.head_timeout = float(settings.REQUEST_HEADER_TIMEOUT)
        limits = BodyLimits(
            grace=float(settings.REQUEST_BODY_TIMEOUT),
            min_rate=float(settings.REQUEST_BODY_MIN_RATE),
            max_size=int(settings.MAX_REQUEST_BODY_SIZE),
            drain=int(settings.MAX_UPLOAD_FILE_SIZE),
            spool_dir=settings.FILE_UPLOAD_TEMP_DIR,
            default_size=int(settings.MAX_REQUEST_BODY_SIZE_DEFAULT),
        )
        self.gate = AcceptGate(self.loop, self.cfg.threads)
        self.bridge = WsgiBridge(
            self.asgi,
            threads=self.cfg.threads,
            limits=limits,
            routes=BodyRoutes(settings.UPLOAD_URL_NAMES, settings.SESSION_COOKIE_NAME),
            budget=SpoolBudget(
                int(settings.REQUEST_SPOOL_BUDGET),
                int(settings.REQUEST_SPOOL_RESERVE),
                per_client=int(settings.REQUEST_SPOOL_PER_CLIENT),
                per_client_large=int(settings.MAX_REQUEST_BODY_SIZE),
            ),
            send_timeout=self.cfg.timeout,
            proxies=int(settings.TRUSTED_PROXY_COUNT),
            gate=self.gate,
        )
        self.asgi = self.bridge

    def _cleanup(self) -> None:
        super()._cleanup()
        if self.bridge is not None:
            # A request still running in a thread finishes; its response has nowhere to go.
            self.bridge.close()
