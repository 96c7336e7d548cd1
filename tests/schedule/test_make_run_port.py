"""`make run PORT=...`: a term Life's self-calls reach the server `make run` started, on that
port, not whatever listens on 8000.

The real `make run` (migrate, collectstatic, bootstrap, then honcho with runserver, qcluster and
the watcher) runs against the test database, with the schedule's times shrunk; the Life is
booked and read over HTTP on the port it was given."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from tests.factories.users import make_user
from tests.processes import Start, child_env, free_port, http_request, wait_for


def _json(port: int, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    status, _, raw = http_request(
        port,
        method,
        path,
        body=data,
        Authorization=f"Bearer {token}",
        **({"Content-Type": "application/json"} if data is not None else {}),
    )
    return status, json.loads(raw) if raw else None


def _answers(port: int) -> bool:
    try:
        return http_request(port, "GET", "/api/")[0] == HTTPStatus.OK
    except OSError:
        return False


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to make, honcho and the processes it started, so each stops cleanly."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


@pytest.mark.django_db(transaction=True)
def test_make_run_on_another_port_sends_a_term_lifes_self_calls_to_that_port(
    start_process: Start, tmp_path: Path
) -> None:
    admin = make_user(username="ops", is_staff=True, is_superuser=True)
    token = Token.objects.create(user=admin).key
    port = free_port()
    env = child_env(
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        BOOKING_PLAN_WATCH_INTERVAL="200",
        EXECUTION_GUARD_TIME="1",
        MINIMUM_LIFE_TERM="0.05",
        Q_WORKERS="1",
    )
    # What a new user has: no base URL of their own, only the port they chose.
    for name in ("SCHEDULE_WEBHOOK_BASE_URL", "PORT", "MAKEFLAGS", "MFLAGS", "DEBUG"):
        env.pop(name, None)
    make = start_process("make-run", ["make", "--no-print-directory", "run", f"PORT={port}"], env)
    try:
        wait_for(lambda: _answers(port) or make.poll() is not None, 180, "make run to serve")
        assert make.poll() is None, (tmp_path / "make-run.log").read_text()

        now = dt.datetime.now(dt.UTC)
        status, life = _json(
            port,
            "POST",
            "/api/schedules/",
            token,
            {
                "schedule_type": "term",
                "term": {
                    "birth_time": (now + dt.timedelta(seconds=4)).isoformat(),
                    "death_time": (now + dt.timedelta(seconds=8)).isoformat(),
                },
                "birth": {
                    "path": "/api/schedule/tasks/",
                    "method": "POST",
                    "body": {"topic": "quota.boost", "content": {"concurrent": 2}},
                },
                "death": {
                    "path": "/api/schedule/tasks/",
                    "method": "POST",
                    "body": {"topic": "quota.restore", "content": {"concurrent": 2}},
                },
            },
        )
        assert status == HTTPStatus.CREATED, life
        path = f"/api/schedules/{life['life_uuid']}/"

        def finished() -> bool:
            return _json(port, "GET", path, token)[1]["state"] in {"Dead", "Stillbirth"}

        wait_for(finished, 120, "the Life to end")
        detail = _json(port, "GET", path, token)[1]
        attempts = {plan["kind"]: plan["attempts"] for plan in detail["plans"]}
        assert detail["state"] == "Dead", detail
        for kind in ("birth", "death"):
            assert [a["status_code"] for a in attempts[kind]] == [HTTPStatus.ACCEPTED], detail
    finally:
        _stop_group(make)
    log = (tmp_path / "make-run.log").read_text()
    assert log.count("POST /api/schedule/tasks/") >= 2, log
