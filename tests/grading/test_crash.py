"""A real `manage.py qcluster` killed with SIGKILL mid-grade: the submission still completes
exactly once, after its lease expired, with both attempts recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.grading.models import GradingAttempt, GradingOutcome
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.grading.sandboxes import processes_with_argument, sleep_argument
from tests.processes import Start, child_env, wait_for

# The sandbox lets nothing out but the logs and metrics.json: a survivor of the killed worker
# is looked for on the host by the unique argument of the `sleep` it runs.
SLEEPER = """
import json, subprocess
subprocess.run(["/bin/sleep", "{marker}"], check=True)
json.dump({{"score": 0.6}}, open("metrics.json", "w"))
"""


def cluster_env(**overrides: str) -> dict[str, str]:
    """A child's environment on the ORM broker (the test database), never Redis."""
    env = child_env(**overrides)
    env.pop("REDIS_URL", None)
    return env


@pytest.fixture
def start_cluster(start_process: Start) -> Callable[..., subprocess.Popen[bytes]]:
    """Start `manage.py qcluster` on the ORM broker (the shared `start_process` cleans up)."""

    def start(name: str, **env: str) -> subprocess.Popen[bytes]:
        return start_process(name, ["manage.py", "qcluster"], cluster_env(**env))

    return start


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cluster_killed_mid_grade_completes_exactly_once_after_lease(
    user: User, tmp_path: Path, start_cluster: Any, sandbox_settings: Any
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.tasks import async_task

    marker = sleep_argument(2)
    submission = make_stored_submission(user, program=SLEEPER.format(marker=marker))
    job = make_job(submission)
    # GRADING_TIMEOUT 4 s -> lease 5 s (renewed while the worker lives); the broker re-delivers
    # an unacknowledged task 11 s after it handed it out.
    timings = {"GRADING_TIMEOUT": "4", "Q_TIMEOUT": "6", "Q_RETRY": "11"}
    first = start_cluster("first", **timings)
    async_task("apps.grading.tasks.grade_job", job.pk, broker=ORM(list_key=Conf.PREFIX))

    def graded_once_started() -> bool:
        row = Submission.objects.get(pk=submission.pk)
        return row.status == SubmissionStatus.PROCESSING and row.attempts == 1

    wait_for(graded_once_started, 40, "the first attempt to start")
    time.sleep(0.5)
    assert processes_with_argument(marker), "the first attempt's program is not running"
    os.killpg(first.pid, signal.SIGKILL)  # the cluster and its workers; the sandbox dies with them
    first.wait(timeout=10)
    wait_for(lambda: not processes_with_argument(marker), 5, "the sandbox to end")

    second = start_cluster("second", **timings)
    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).status == SubmissionStatus.COMPLETED,
        45,
        "the re-delivered task to complete the submission",
    )
    time.sleep(1)
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=15)

    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score, row.attempts) == (SubmissionStatus.COMPLETED, 0.6, 2)
    attempts = list(GradingAttempt.objects.filter(submission=row).order_by("number"))
    assert [(a.number, a.outcome) for a in attempts] == [
        (1, GradingOutcome.ABANDONED),
        (2, GradingOutcome.COMPLETED),
    ]
    assert attempts[0].worker != attempts[1].worker
    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED
