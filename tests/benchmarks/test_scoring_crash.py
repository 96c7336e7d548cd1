"""A real `manage.py qcluster` killed with SIGKILL between the stages (the run stage done, the
scorer running): after redelivery the phase submission is scored exactly once."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.benchmarks.models import Entry, Score
from apps.grading.models import GradingAttempt, GradingOutcome
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.scoring import (
    apply_bundle,
    host_user,
    perfect_program,
    phase_of,
    phase_submission,
    scorer_replaced,
)
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.grading.sandboxes import processes_with_argument, sleep_argument
from tests.grading.test_crash import start_cluster  # noqa: F401 - the fixture
from tests.processes import wait_for

# The example's scorer, after a sleep the test finds on the host by its unique argument.
SLOW_SCORER = """
import runpy, subprocess
subprocess.run(["/bin/sleep", "{marker}"], check=True)
runpy.run_path("score_example.py", run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sandbox_settings")
def test_worker_killed_while_scoring_scores_exactly_once_after_redelivery(
    user: User,
    start_cluster: Any,  # noqa: F811 - the fixture
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    from tests.benchmarks.bundles import EXAMPLE

    marker = sleep_argument(2)
    challenge = apply_bundle(
        host_user(),
        extra={
            **scorer_replaced(SLOW_SCORER.format(marker=marker)),
            "scoring/score_example.py": (EXAMPLE / "scoring/score.py").read_bytes(),
        },
    )
    OrmQ.objects.all().delete()  # the baseline's task: its scorer would sleep too
    submission, job = phase_submission(user, phase_of(challenge, "code"), perfect_program())
    timings = {"GRADING_TIMEOUT": "5", "Q_TIMEOUT": "12", "Q_RETRY": "16"}
    first = start_cluster("first", **timings)
    async_task("apps.grading.tasks.grade_job", job.pk, broker=ORM(list_key=Conf.PREFIX))

    def scoring_in_first_attempt() -> bool:
        row = Submission.objects.get(pk=submission.pk)
        return row.attempts == 1 and bool(processes_with_argument(marker))

    wait_for(scoring_in_first_attempt, 40, "the first attempt's scorer to run")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    wait_for(lambda: not processes_with_argument(marker), 5, "the sandbox to end")
    assert not Score.objects.filter(entry_id=submission.pk).exists()

    second = start_cluster("second", **timings)
    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).status == SubmissionStatus.COMPLETED,
        60,
        "the re-delivered task to score the submission",
    )
    time.sleep(1)
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=15)

    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score, row.attempts) == (SubmissionStatus.COMPLETED, None, 2)
    scores = Score.objects.filter(entry_id=submission.pk)
    assert sorted((s.split, s.version) for s in scores) == [("private", 1), ("public", 1)]
    assert all(s.values == {"accuracy": 1.0, "errors": 0.0} for s in scores)
    assert Entry.objects.get(pk=submission.pk).failure == ""
    attempts = GradingAttempt.objects.filter(submission=row).order_by("number")
    assert [(a.number, a.outcome) for a in attempts] == [
        (1, GradingOutcome.ABANDONED),
        (2, GradingOutcome.COMPLETED),
    ]
