"""Fixtures of the schedule tests: a real HTTP receiver on loopback, booking helpers."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.utils import timezone


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """Answers each request with the next scripted (status, headers) (then 200) and records it."""

    server: ThreadingHTTPServer
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"


def _handler(receiver_box: list[Receiver]) -> type[BaseHTTPRequestHandler]:
    import time

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            receiver = receiver_box[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with receiver.lock:
                receiver.requests.append(
                    Received(self.command, self.path, dict(self.headers.items()), body, time.time())
                )
                status, headers = receiver.script.pop(0) if receiver.script else (200, {})
            headers = dict(headers)
            payload = headers.pop("__body__", '{"ok": true}').encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    box: list[Receiver] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(box))
    server.daemon_threads = True
    box.append(Receiver(server=server))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [box[0].host]
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()


def at(minutes: float = 60, seconds: float = 0) -> str:
    """A schedule time string in UTC (SCHEDULE_TIMEZONE is UTC in the tests)."""
    moment = timezone.now() + dt.timedelta(minutes=minutes, seconds=seconds)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def action(path: str = "/api/me/", **extra: Any) -> dict[str, Any]:
    return {"path": path, "method": "POST", "body": {"hello": "world"}, **extra}


def point_body(*, when: str | None = None, resource_id: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "schedule_type": "point",
        "resource_id": resource_id,
        "term": {"birth_time": when or at(60)},
        "birth": action(),
        **extra,
    }


def term_body(
    *, birth: str | None = None, death: str | None = None, resource_id: str = "", **extra: Any
) -> dict[str, Any]:
    return {
        "schedule_type": "term",
        "resource_id": resource_id,
        "term": {"birth_time": birth or at(60), "death_time": death or at(120)},
        "birth": action("/api/me/"),
        "death": action("/api/me/"),
        **extra,
    }


@pytest.fixture
def q_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 runs tasks inline (its documented `sync` mode) instead of via a broker."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)
