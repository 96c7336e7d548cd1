"""The `web` process as the Procfile runs it (gunicorn with config/gunicorn.py) on loopback, on
a database of its own, with one API token made for the run."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.benchlib.databases import sqlite_url

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")
MIGRATE = "from django.core.management import call_command\ncall_command('migrate', verbosity=0)"
MAKE_USER = """
from django.contrib.auth.models import User
from apps.core.services import token_create
u, _ = User.objects.get_or_create(username="bench")
u.api_tokens.filter(name="bench").delete()
print(token_create(user=u, name="bench").token)
"""


@dataclass
class Web:
    process: subprocess.Popen[bytes]
    port: int
    token: str
    env: dict[str, str]
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def web_env(work: Path, **extra: str) -> dict[str, str]:
    """The server's environment: SQLite in `work` unless DATABASE_URL is set, media and the
    upload folder in `work`, production settings with bench-only secrets."""
    env = dict(os.environ)
    if "DATABASE_URL" not in env:
        env["DATABASE_URL"] = sqlite_url(work / "bench.sqlite3")
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-secret",
            "SCHEDULE_WEBHOOK_SECRET": "whsec_YmVuY2gtb25seS15b3lha3Utd2ViaG9vay1zZWNyZXQ=",
            "MEDIA_ROOT": str(work / "media"),
            "FILE_UPLOAD_TEMP_DIR": str(work / "incoming"),
            "LOG_LEVEL": "ERROR",
            # collectstatic is not part of the benchmarks.
            "PYTHONWARNINGS": "ignore::UserWarning",
            **extra,
        }
    )
    return env


def web_start(
    work: Path,
    *,
    workers: int,
    timeout: int,
    setup: str = MAKE_USER,
    worker_class: str | None = None,
    **extra_env: str,
) -> Web:
    """Migrate, run `setup` (Python printing the token last), start gunicorn and wait for its
    /healthz. The caller stops it with `web_stop` (its log is `work/server.log`)."""
    env = web_env(work, **extra_env)
    (work / "media").mkdir()
    (work / "incoming").mkdir()
    # One interpreter migrates and runs `setup` (Django starts once, not twice).
    code = f"{MIGRATE}\n{setup}"
    made = subprocess.run(
        [PYTHON, str(ROOT / "manage.py"), "shell", "-c", code],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    token = made.stdout.decode().strip().splitlines()[-1]
    port = free_port()
    log = work / "server.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [
                *(GUNICORN, "config.wsgi", "-c", "config/gunicorn.py"),
                *(["--worker-class", worker_class] if worker_class else []),
                *("--bind", f"127.0.0.1:{port}", "--workers", str(workers)),
                *("--timeout", str(timeout), "--log-level", "warning"),
            ],
            env=env,
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    # Generous: on a busy shared machine, booting the workers alone has taken over 30 s.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            return Web(process, port, token, env, log)
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("gunicorn did not start: " + log.read_text()[-2000:])


def web_stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if process is None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def print_log_tail(work: Path) -> None:
    """The end of the server's log on stderr (after a failure)."""
    log = work / "server.log"
    if log.exists():
        print(log.read_text()[-4000:], file=sys.stderr)
