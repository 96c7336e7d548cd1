"""A real `manage.py qcluster` (SQLite or PostgreSQL, ORM broker) stops within honcho's grace
period (5 s) on SIGTERM, idle or while a grading runs; an interrupted grading is given back and
finished by the next worker."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ

from apps.core.queue import GRADE_JOB
from apps.grading.models import GradingAttempt, GradingOutcome
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.grading.sandboxes import processes_with_argument, sleep_argument
from tests.processes import Start, child_env, wait_for

GRACE_SECONDS = 5  # honcho's KILL_WAIT: after it, SIGKILL

# Found on the host by the unique argument of the `sleep` it runs.
SLEEPER = """
import json, subprocess
subprocess.run(["/bin/sleep", "{marker}"], check=True)
json.dump({{"score": 0.7}}, open("metrics.json", "w"))
"""


def _env(**overrides: str) -> dict[str, str]:
    # The ORM broker (no REDIS_URL); bubblewrap where it runs, else unsandboxed.
    return child_env(REDIS_URL="", GRADING_ALLOW_UNSANDBOXED="true", **overrides)


def _started(tmp_path: Path, name: str) -> bool:
    log = (tmp_path / f"{name}.log").read_text(errors="replace")
    return "running." in log and "grader:" in log


def _group_gone(process: subprocess.Popen[bytes]) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop_seconds(process: subprocess.Popen[bytes], *, whole_group: bool) -> float:
    """Send SIGTERM as honcho does (to the process group) or to the main process only (as
    `kill PID` or a container runtime does); seconds until every process of the group is gone
    (at most the grace period plus a margin, after which the test fails)."""
    started = time.monotonic()
    if whole_group:
        os.killpg(process.pid, signal.SIGTERM)
    else:
        process.send_signal(signal.SIGTERM)
    deadline = started + GRACE_SECONDS + 5
    while time.monotonic() < deadline:
        if process.poll() is not None and _group_gone(process):
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_idle_cluster_stops_within_the_grace_period_every_time(
    start_process: Start, tmp_path: Path
) -> None:
    for run in range(3):
        name = f"idle-{run}"
        process = start_process(name, ["manage.py", "qcluster"], _env(Q_WORKERS="2"))
        wait_for(partial(_started, tmp_path, name), 60, "the cluster to start")
        seconds = _stop_seconds(process, whole_group=True)
        assert seconds < GRACE_SECONDS, f"stop {run + 1} took {seconds:.1f} s"
        assert process.returncode == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "main-process"])
def test_cluster_stops_mid_grading_and_the_next_one_finishes_it(
    whole_group: bool, user: User, start_process: Start, tmp_path: Path, settings: Any
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.tasks import async_task

    marker = sleep_argument(3)
    submission = make_stored_submission(user, program=SLEEPER.format(marker=marker))
    job = make_job(submission)
    first = start_process("first", ["manage.py", "qcluster"], _env())
    wait_for(lambda: _started(tmp_path, "first"), 60, "the cluster to start")
    async_task(GRADE_JOB, job.pk, broker=ORM(list_key=Conf.PREFIX))
    wait_for(lambda: bool(processes_with_argument(marker)), 40, "the program to run")

    seconds = _stop_seconds(first, whole_group=whole_group)

    assert seconds < GRACE_SECONDS, f"the stop took {seconds:.1f} s"
    assert first.returncode == 0
    assert not processes_with_argument(marker), "the graded program outlived the worker"
    row = Submission.objects.get(pk=submission.pk)
    # Given back: the lease expired at once, the attempt not counted.
    assert row.status == SubmissionStatus.PROCESSING
    assert row.lease_expires_at is not None
    assert row.lease_expires_at <= timezone.now()
    assert row.attempts == 0
    (attempt,) = GradingAttempt.objects.filter(submission=row)
    assert attempt.outcome == GradingOutcome.ABANDONED
    assert "worker stopped" in attempt.reason
    # The interrupted delivery was acknowledged and the job enqueued again, once.
    assert OrmQ.objects.filter(key=Conf.PREFIX).count() == 1

    second = start_process("second", ["manage.py", "qcluster"], _env())
    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).status == SubmissionStatus.COMPLETED,
        60,
        "the next cluster to finish the grading",
    )
    assert _stop_seconds(second, whole_group=True) < GRACE_SECONDS
    row = Submission.objects.get(pk=submission.pk)
    assert (row.score, row.attempts) == (0.7, 1)
    assert [a.outcome for a in GradingAttempt.objects.filter(submission=row).order_by("pk")] == [
        GradingOutcome.ABANDONED,
        GradingOutcome.COMPLETED,
    ]
    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED


def _pid_alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_signalled_alone_mid_grading_gives_back_and_is_replaced(
    user: User, start_process: Start, tmp_path: Path
) -> None:
    """As django-q2's guard does to a worker past its timeout: the grading is given back, the
    worker leaves cleanly (the task queue stays sound) and its replacement finishes the work."""
    from django_q.brokers.orm import ORM
    from django_q.tasks import async_task

    marker = sleep_argument(3)
    submission = make_stored_submission(user, program=SLEEPER.format(marker=marker))
    job = make_job(submission)
    process = start_process("alone", ["manage.py", "qcluster"], _env())
    wait_for(functools.partial(_started, tmp_path, "alone"), 60, "the cluster to start")
    log = tmp_path / "alone.log"
    (worker_pid,) = [
        int(line.rsplit(" ", 1)[1])
        for line in log.read_text().splitlines()
        if "ready for work at" in line
    ]
    async_task(GRADE_JOB, job.pk, broker=ORM(list_key=Conf.PREFIX))
    wait_for(lambda: bool(processes_with_argument(marker)), 40, "the program to run")

    os.kill(worker_pid, signal.SIGTERM)

    wait_for(lambda: not _pid_alive(worker_pid), 5, "the signalled worker to leave")
    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).status == SubmissionStatus.COMPLETED,
        60,
        "the new worker to finish the grading",
    )
    assert "reincarnated worker" in log.read_text()
    row = Submission.objects.get(pk=submission.pk)
    assert (row.score, row.attempts) == (0.7, 1)
    assert [a.outcome for a in GradingAttempt.objects.filter(submission=row).order_by("pk")] == [
        GradingOutcome.ABANDONED,
        GradingOutcome.COMPLETED,
    ]
    assert _stop_seconds(process, whole_group=True) < GRACE_SECONDS
