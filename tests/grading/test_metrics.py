"""Grading and review metrics, read from a real /metrics scrape after jobs were submitted
through the API and graded by a real `manage.py qcluster` (another process: its counts reach
the scrape through the shared multiprocess folder)."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.queue import task_broker
from apps.grading.services import grading_run
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.metrics import deltas, scrape
from tests.processes import Start, child_env, stop, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

GRADINGS = "yoyaku_gradings_total"
DURATION = "yoyaku_grading_duration_seconds"


@pytest.mark.slow
def test_a_real_worker_s_gradings_queue_and_review_are_counted(
    user: User,
    user_client: APIClient,
    reviewer: User,
    other_reviewer: User,
    client_for: Any,
    settings: Any,
    start_process: Start,
) -> None:
    task_broker().purge_queue()  # nothing left over by earlier tests reaches our worker
    outcomes = ["completed", "failed", "review_pending"]
    submissions = [
        make_stored_submission(user, status=SubmissionStatus.DRAFT, program="print(1)")
        for _ in outcomes
    ]
    before = scrape(settings)
    job_ids = []
    for submission, outcome in zip(submissions, outcomes, strict=True):
        response = user_client.post(
            "/api/jobs/",
            {"submission_id": submission.pk, "config": {"outcome": outcome, "sleep": 0.2}},
            format="json",
        )
        assert response.status_code == HTTPStatus.CREATED
        job_ids.append(response.json()["job_id"])
    queued = scrape(settings)
    assert queued.value("yoyaku_grading_queue_depth") == 3
    assert queued.value("yoyaku_grading_oldest_queued_age_seconds") > 0

    worker = start_process(
        "qcluster",
        ["manage.py", "qcluster"],
        child_env(GRADER="tests.grading.graders.RecordingGrader"),
    )
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=job_ids, status=JobStatus.QUEUED).count() == 0
            and not Job.objects.filter(pk__in=job_ids, status=JobStatus.RUNNING).exists()
        ),
        60,
        "the worker to grade the three jobs",
    )
    stop(worker)
    after = scrape(settings)
    assert deltas(before, after, GRADINGS, "outcome") == {
        "completed": 1,
        "failed": 1,
        "review_pending": 1,
    }
    for outcome in outcomes:
        count = after.value(f"{DURATION}_count", outcome=outcome)
        assert count - before.value(f"{DURATION}_count", outcome=outcome) == 1
    # Each grading slept 0.2 s: all three are above the 0.1 s bucket.
    assert after.value(f"{DURATION}_bucket", le="0.1") == before.value(
        f"{DURATION}_bucket", le="0.1"
    )
    assert after.value(f"{DURATION}_sum") - before.value(f"{DURATION}_sum") >= 0.6
    attempts = "yoyaku_grading_attempts_total"
    assert after.value(attempts) - before.value(attempts) == 3
    assert deltas(before, after, "yoyaku_jobs_finished_total", "status") == {
        "completed": 2,  # a job that sent its submission to review completed: the grading ran
        "failed": 1,
    }
    assert after.value("yoyaku_grading_queue_depth") == 0
    assert after.value("yoyaku_grading_oldest_queued_age_seconds") == 0
    assert after.value("yoyaku_review_queue_length") == 1
    assert after.value("yoyaku_review_oldest_pending_age_seconds") > 0

    # The review of the third: a conflicting claim, then a verdict.
    waiting = submissions[2]
    url = f"/api/review/submissions/{waiting.pk}"
    rita, ravi = client_for(reviewer), client_for(other_reviewer)
    assert rita.post(f"{url}/claim/").status_code == HTTPStatus.OK
    assert ravi.post(f"{url}/claim/").status_code == HTTPStatus.CONFLICT
    verdict = rita.post(f"{url}/complete/", {"verdict": "approve", "score": 0.9}, format="json")
    assert verdict.status_code == HTTPStatus.OK
    reviewed = scrape(settings)
    conflicts = "yoyaku_review_claim_conflicts_total"
    assert reviewed.value(conflicts) - after.value(conflicts) == 1
    assert deltas(after, reviewed, "yoyaku_review_verdicts_total", "verdict") == {"approve": 1}
    wait = "yoyaku_review_wait_seconds"
    assert reviewed.value(f"{wait}_count") - after.value(f"{wait}_count") == 1
    # It waited less than a minute: in the first bucket.
    assert (
        reviewed.value(f"{wait}_bucket", le="60.0") - after.value(f"{wait}_bucket", le="60.0") == 1
    )
    assert reviewed.value("yoyaku_review_queue_length") == 0


def test_an_expired_lease_taken_over_and_exhausted_attempts_are_counted(
    user: User, settings: Any
) -> None:
    settings.GRADER = "tests.grading.graders.RecordingGrader"
    settings.GRADING_MAX_ATTEMPTS = 2
    expired = timezone.now() - dt.timedelta(seconds=5)
    taken = make_stored_submission(
        user,
        status=SubmissionStatus.PROCESSING,
        lease_token="old",
        lease_expires_at=expired,
        attempts=1,
    )
    exhausted = make_stored_submission(
        user,
        status=SubmissionStatus.PROCESSING,
        lease_token="old2",
        lease_expires_at=expired,
        attempts=2,
    )
    taken_job = make_job(taken, status=JobStatus.RUNNING)
    exhausted_job = make_job(exhausted, status=JobStatus.RUNNING)
    before = scrape(settings)
    assert grading_run(job_id=taken_job.pk) == "completed"
    assert grading_run(job_id=exhausted_job.pk) == "skipped"
    assert grading_run(job_id=taken_job.pk) == "skipped"  # a late duplicate delivery
    after = scrape(settings)
    takeovers = "yoyaku_grading_lease_takeovers_total"
    assert after.value(takeovers) - before.value(takeovers) == 1
    assert (
        after.value("yoyaku_grading_attempts_total") - before.value("yoyaku_grading_attempts_total")
        == 1
    )
    assert deltas(before, after, GRADINGS, "outcome") == {"completed": 1, "exhausted": 1}
    # The exhausted one is counted as such, not as a skip; the late duplicate is a skip.
    assert deltas(before, after, "yoyaku_grading_deliveries_skipped_total", "reason") == {
        "job_finished": 1
    }
    assert Submission.objects.get(pk=exhausted.pk).status == SubmissionStatus.FAILED
