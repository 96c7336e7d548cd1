"""A real process claims a key and is killed (SIGKILL): the key is usable after the lock timeout."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.models import IdempotencyKey, Job
from apps.jobs.services import idempotency_fingerprint
from tests.factories.submissions import make_submission
from tests.factories.tokens import make_token
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

CLAIMER = """
import sys, time
import django
django.setup()
from django.contrib.auth.models import User
from apps.jobs.services import idempotency_claim
user = User.objects.get(pk=int(sys.argv[1]))
claim = idempotency_claim(user=user, key=sys.argv[2], fingerprint=sys.argv[3], ttl_hours=24)
print("claimed", claim.key_id, flush=True)
time.sleep(600)
"""


def _database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    auth = f"{user}:{settings['PASSWORD']}" if settings.get("PASSWORD") else user
    return f"postgres://{auth}@{settings['HOST']}:{settings['PORT'] or 5432}/{settings['NAME']}"


def test_claim_of_a_killed_process_is_taken_over_after_the_lock_timeout(settings: Any) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
    user = make_user(username="ci")
    submission = make_submission(owner=user)
    fingerprint = idempotency_fingerprint(
        submission_id=submission.pk, config={}, reservation_id=None
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": _database_url(),
        "LOG_LEVEL": "ERROR",
    }
    claimer = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, str(user.pk), "ci-build-1", fingerprint],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert claimer.stdout is not None
        line = claimer.stdout.readline()
        assert line.startswith("claimed"), line
    finally:
        os.kill(claimer.pid, signal.SIGKILL)
        claimer.wait(timeout=10)
        if claimer.stdout is not None:
            claimer.stdout.close()
    assert claimer.returncode == -signal.SIGKILL

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user)}")
    body = {"submission_id": submission.pk, "idempotency_key": "ci-build-1"}

    busy = client.post("/api/jobs/", body, format="json")
    assert busy.status_code == HTTPStatus.CONFLICT
    assert busy.json()["code"] == "idempotency_request_in_progress"

    with time_machine.travel(timezone.now() + dt.timedelta(seconds=61), tick=False):
        taken = client.post("/api/jobs/", body, format="json")
        replay = client.post("/api/jobs/", body, format="json")
    assert taken.status_code == HTTPStatus.CREATED
    assert replay.status_code == HTTPStatus.OK
    assert replay.json()["job_id"] == taken.json()["job_id"]
    assert Job.objects.count() == 1
    assert IdempotencyKey.objects.get().job_id == taken.json()["job_id"]
