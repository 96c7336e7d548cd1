"""`LOG_FORMAT=json` under `runserver` (what `make run` starts): every log line it writes is one
JSON object, runserver's and Django's own included, and a request has one access line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest

from tests.processes import ROOT, child_env, free_port, http_request, wait_for


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.django_db(transaction=True)
def test_runserver_with_log_format_json_writes_only_json_lines(tmp_path: Path) -> None:
    port = free_port()
    errors = tmp_path / "stderr.log"
    with errors.open("wb") as stderr:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=child_env(LOG_FORMAT="json", DEBUG="true"),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:

        def answering() -> bool:
            try:
                return http_request(port, "GET", "/api/")[0] == HTTPStatus.OK
            except OSError:
                return False

        wait_for(answering, 60, "runserver to answer")
        assert http_request(port, "GET", "/no-such-page/")[0] == HTTPStatus.NOT_FOUND
        assert http_request(port, "POST", "/api/jobs/")[0] == HTTPStatus.UNAUTHORIZED
        wait_for(lambda: "/api/jobs/" in errors.read_text(), 30, "the last access line")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    records = [json.loads(line) for line in _lines(errors)]
    access = [r for r in records if r["logger"] == "yoyaku.request"]
    assert [(r["path"], r["status"]) for r in access][-3:] == [
        ("/api/", 200),
        ("/no-such-page/", 404),
        ("/api/jobs/", 401),
    ]
    # runserver's own access line only for what went wrong (yoyaku.request has the rest).
    server_lines = [r["message"] for r in records if r["logger"] == "django.server"]
    assert not [m for m in server_lines if m.startswith('"GET /api/ ')], server_lines
    assert [m for m in server_lines if m.startswith('"GET /no-such-page/ HTTP/1.1" 404')]
