"""A running grading's output reaches `GET /api/jobs/{id}/logs/` before the job ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from rest_framework.test import APIClient

from apps.grading.tasks import grade_job
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission

pytestmark = pytest.mark.django_db(transaction=True)

PROGRAM = """
import json, sys, time
print("first line", flush=True)
time.sleep(3)
print("second line", flush=True)
json.dump({"score": 1}, open("metrics.json", "w"))
"""


def test_logs_grow_while_the_program_runs(
    user: User, sandbox_settings: Any, client_for: Callable[[User], APIClient]
) -> None:
    sandbox_settings.GRADING_TIMEOUT = 20
    job = make_job(make_stored_submission(user, program=PROGRAM))
    client = client_for(user)

    def work() -> None:
        try:
            grade_job(job.pk)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work)
    worker.start()
    seen: list[tuple[str, str]] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            body = client.get(f"/api/jobs/{job.pk}/logs/").json()
            seen.append((body["status"], body["logs"]))
            if body["status"] in ("completed", "failed"):
                break
            time.sleep(0.2)
    finally:
        worker.join(timeout=30)

    running = [logs for status, logs in seen if status == "running"]
    assert any("first line" in logs and "second line" not in logs for logs in running), seen
    assert seen[-1][0] == "completed"
    assert "first line" in seen[-1][1]
    assert "second line" in seen[-1][1]


def test_the_jobs_log_sink_shows_a_running_job_and_leaves_a_finished_one(user: User) -> None:
    from apps.jobs.models import JobStatus
    from apps.jobs.services import job_logs_sink

    running = make_job(make_stored_submission(user), status=JobStatus.RUNNING)
    finished = make_job(make_stored_submission(user), status=JobStatus.COMPLETED, logs="final")
    job_logs_sink(job_id=running.pk)("so far\n")
    job_logs_sink(job_id=finished.pk)("late\n")
    running.refresh_from_db()
    finished.refresh_from_db()
    assert running.logs == "so far\n"
    assert finished.logs == "final"


def test_the_jobs_log_sink_never_raises_for_what_the_database_refuses(
    user: User, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL refuses a NUL in text (a DataError); SQLite stores it. Either way the grading
    goes on: the sink logs and returns."""
    from apps.jobs.models import JobStatus
    from apps.jobs.services import job_logs_sink

    job = make_job(make_stored_submission(user), status=JobStatus.RUNNING, logs="before")
    job_logs_sink(job_id=job.pk)("a\x00b")
    job.refresh_from_db()
    if connections["default"].vendor == "postgresql":
        assert job.logs == "before"
        assert "cannot show the running logs" in caplog.text
    else:
        assert job.logs == "a\x00b"
