"""Fixtures of the schedule tests: a real HTTP receiver on loopback, booking helpers."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

ROOT = Path(__file__).resolve().parents[2]


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
    # Called with each request before it is answered (e.g. a receiver that replays what it got).
    on_request: Callable[[Received], None] | None = None

    @property
    def host(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

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
            received = Received(
                self.command, self.path, dict(self.headers.items()), body, time.time()
            )
            if receiver.on_request is not None:
                receiver.on_request(received)
            with receiver.lock:
                receiver.requests.append(received)
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


def _start(host: str, port: int) -> Receiver:
    box: list[Receiver] = []
    server = ThreadingHTTPServer((host, port), _handler(box))
    server.daemon_threads = True
    box.append(Receiver(server=server))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return box[0]


def _stop(receiver: Receiver) -> None:
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    started = _start("127.0.0.1", 0)
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [started.host]
    try:
        yield started
    finally:
        _stop(started)


@pytest.fixture
def start_receiver() -> Iterator[Callable[[str, int], Receiver]]:
    """Start more receivers, on any loopback address (127.0.0.0/8), stopped after the test."""
    started: list[Receiver] = []

    def start(host: str, port: int = 0) -> Receiver:
        assert host.startswith("127."), "tests listen on loopback only"
        started.append(_start(host, port))
        return started[-1]

    yield start
    for one in started:
        _stop(one)


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


@dataclass
class ScriptedDns:
    """Answers for test-only host names: each lookup of a name takes the next answer (the last
    one repeats). Every other name, and every address literal, goes to the real resolver."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)


@pytest.fixture
def scripted_dns(monkeypatch: pytest.MonkeyPatch) -> ScriptedDns:
    import socket

    dns = ScriptedDns()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in dns.answers:
            return real(host, port, *args, **kwargs)
        dns.lookups.append(name)
        queue = dns.answers[name]
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        port_number = int(port or 0)
        if ":" in address:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port_number, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port_number))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """A safety net for tests whose scripted DNS names a public address: a TCP connect to
    anything but loopback is recorded and refused, so no test ever leaves this machine."""
    import ipaddress
    import socket

    refused: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        # Resolve a name the way create_connection would (once, through the possibly scripted
        # resolver), then connect to that address only if it is loopback.
        host, port = address[0], int(address[1])
        resolved = str(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0])
        if not ipaddress.ip_address(resolved.split("%", 1)[0]).is_loopback:
            refused.append((resolved, port))
            raise ConnectionRefusedError(f"test network: {resolved}:{port} is not loopback")
        return real((resolved, port), *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return refused


# --- real processes (watchers, clusters) ---------------------------------------------------


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def child_env(receiver: Receiver) -> dict[str, str]:
    db = django_settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{db['NAME']}"
    else:
        url = (
            f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT']}/"
            f"{db['NAME']}"
        )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": url,
        "BOOKING_PLAN_WATCH_INTERVAL": "200",
        "SCHEDULE_WEBHOOK_ALLOWED_HOSTS": receiver.host,
        "Q_WORKERS": "2",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)  # the ORM broker: the child cluster and watchers share the test db
    return env


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    # Each child leads its own process group: after a clean SIGTERM to the leader, whatever is
    # left of the group (a qcluster's workers) is killed, so nothing outlives the test holding
    # connections to the test database.
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
    for proc in started:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def spawn(
    processes: list[subprocess.Popen[bytes]], env: dict[str, str], *args: str
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    processes.append(proc)
    return proc
