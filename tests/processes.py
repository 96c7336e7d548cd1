"""Real processes for the tests that need them (qcluster, run_plan_watcher, gunicorn), sharing
the test database, the broker and the metrics folder with the test process."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def database_url() -> str:
    """The test database as a URL a child process can open."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def child_env(**overrides: str) -> dict[str, str]:
    """The test process's environment (so PROMETHEUS_MULTIPROC_DIR and REDIS_URL too), pointed
    at the test database and media folder."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(
        DJANGO_SETTINGS_MODULE="config.test_settings",
        DATABASE_URL=database_url(),
        TEST_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        Q_WORKERS="1",
        Q_POLL="0.1",
        LOG_LEVEL="INFO",
    )
    env.update(overrides)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


Start = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start_process(tmp_path: Path) -> Iterator[Start]:
    """`start(name, args, env)` runs `args` (a list; `manage.py ...` when it starts with a
    command name) in its own process group, output to tmp_path/<name>.log. At teardown each
    gets SIGTERM, then its group SIGKILL."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        command = args if args[0] != "manage.py" else [sys.executable, *args]
        with (tmp_path / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM and wait (a clean stop flushes logs and gives back claims)."""
    process.send_signal(signal.SIGTERM)
    process.wait(20)


def http_request(
    port: int, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request on a new loopback connection: (status, headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def start_gunicorn(
    start: Start, name: str, workers: int, *, app: str = "config.wsgi", **env: str
) -> tuple[int, subprocess.Popen[bytes]]:
    """The `web` process as production runs it (config/gunicorn.py) on a free loopback port,
    once it answers `/healthz`; `app` is the WSGI application it serves."""
    port = free_port()
    process = start(
        name,
        [
            str(Path(sys.executable).parent / "gunicorn"),
            app,
            "-c",
            "config/gunicorn.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
        ],
        child_env(**env),
    )

    def answering() -> bool:
        try:
            return http_request(port, "GET", "/healthz")[0] == HTTPStatus.OK
        except OSError:
            return False

    wait_for(answering, 30, "gunicorn to answer")
    return port, process


def procfile_web_line() -> str:
    (line,) = (
        line.split(":", 1)[1].strip()
        for line in (ROOT / "Procfile").read_text().splitlines()
        if line.startswith("web:")
    )
    return line


def start_procfile_web(start: Start, **env: str) -> tuple[int, subprocess.Popen[bytes]]:
    """The Procfile's `web:` command, run by a shell as honcho or a Procfile runner does, with
    PORT set; the venv's gunicorn first on PATH."""
    port = free_port()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    process = start(
        "web",
        ["/bin/sh", "-c", f"exec {procfile_web_line()}"],
        child_env(PORT=str(port), PATH=path, **env),
    )

    def answering() -> bool:
        try:
            return http_request(port, "GET", "/healthz")[0] == HTTPStatus.OK
        except OSError:
            return False

    wait_for(answering, 30, "the Procfile's web process to answer")
    return port, process


def read_all(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends until it closes the connection (a reset counts as closed)."""
    sock.settimeout(seconds)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data
