"""The grading worker: leases, duplicate/late deliveries, take-overs, attempts, cancel."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.grading.grader import GradingResult
from apps.grading.leases import (
    grading_lease_acquire,
    grading_lease_seconds,
    grading_result_record,
)
from apps.grading.models import GradingAttempt, GradingOutcome
from apps.grading.queueing import grading_reap_expired
from apps.grading.tasks import grade_job
from apps.jobs.models import Job, JobStatus
from apps.jobs.services import job_cancel
from apps.submissions.models import Submission, SubmissionStatus
from tests.concurrency import run_concurrently
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.grading.graders import invocations

pytestmark = pytest.mark.django_db


def _fresh(submission: Submission) -> Submission:
    return Submission.objects.get(pk=submission.pk)


def test_grade_job_completes_submission_and_job(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"score": 0.75})

    assert grade_job(job.pk) == "completed"

    submission = _fresh(submission)
    job.refresh_from_db()
    assert submission.status == SubmissionStatus.COMPLETED
    assert submission.score == 0.75
    assert submission.completed_at is not None
    assert submission.attempts == 1
    assert submission.lease_token == ""
    assert job.status == JobStatus.COMPLETED
    assert job.logs == "recorded\n"
    assert job.started_at is not None
    assert job.finished_at is not None
    attempt = GradingAttempt.objects.get(submission=submission)
    assert attempt.outcome == GradingOutcome.COMPLETED
    assert attempt.number == 1
    assert len(invocations(grader_log)) == 1


def test_grading_takes_five_statements_to_lease_and_three_to_record(
    user: User, grader_log: Path, django_assert_num_queries: Any
) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission)

    # Lease: the job with its submission locked, submission and job updates, the attempt,
    # the file list. Result: the lease's compare-and-set writing the result, the job, the
    # attempt. Each transaction is a savepoint pair here (the test runs inside one).
    with django_assert_num_queries(5 + 3 + 4):
        assert grade_job(job.pk) == "completed"


def test_review_pending_result_completes_the_job(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"outcome": "review_pending", "score": 0.5})

    assert grade_job(job.pk) == "review_pending"

    assert _fresh(submission).status == SubmissionStatus.REVIEW_PENDING
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED


def test_failed_result_fails_submission_and_job_with_reason(user: User, settings: Any) -> None:
    settings.GRADER = "tests.grading.graders.RaisingGrader"
    submission = make_stored_submission(user)
    job = make_job(submission)

    assert grade_job(job.pk) == "failed"

    submission = _fresh(submission)
    job.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert "grader infrastructure is down" in submission.status_reason
    assert job.status == JobStatus.FAILED
    assert "grader infrastructure is down" in job.error


def test_delivery_after_completion_does_nothing(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"score": 3})
    grade_job(job.pk)
    before = _fresh(submission)

    assert grade_job(job.pk) == "skipped"
    assert grade_job(job.pk) == "skipped"

    after = _fresh(submission)
    job.refresh_from_db()
    assert (after.status, after.score, after.attempts) == (
        SubmissionStatus.COMPLETED,
        3,
        before.attempts,
    )
    assert after.completed_at == before.completed_at
    assert job.status == JobStatus.COMPLETED
    assert len(invocations(grader_log)) == 1
    assert GradingAttempt.objects.count() == 1


def test_late_result_cannot_move_a_completed_submission_back(user: User) -> None:
    """Out of order: an old worker's result arrives after a newer one completed it."""
    submission = make_stored_submission(user)
    job = make_job(submission)
    old = grading_lease_acquire(job_id=job.pk)
    assert old is not None
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=grading_lease_seconds() + 1)):
        new = grading_lease_acquire(job_id=job.pk)
        assert new is not None
        assert grading_result_record(lease=new, result=GradingResult("completed", score=9))

        assert not grading_result_record(lease=old, result=GradingResult("failed", reason="x"))

    submission = _fresh(submission)
    assert (submission.status, submission.score, submission.attempts) == ("completed", 9, 2)
    outcomes = dict(GradingAttempt.objects.values_list("number", "outcome"))
    assert outcomes == {1: GradingOutcome.LEASE_LOST, 2: GradingOutcome.COMPLETED}


def test_delivery_during_live_lease_is_skipped(user: User) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission)
    assert grading_lease_acquire(job_id=job.pk) is not None

    assert grading_lease_acquire(job_id=job.pk) is None

    submission = _fresh(submission)
    assert submission.attempts == 1
    assert submission.status == SubmissionStatus.PROCESSING


def test_expired_lease_is_taken_over_and_counted(user: User) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission)
    first = grading_lease_acquire(job_id=job.pk)
    assert first is not None

    with time_machine.travel(first.expires_at + dt.timedelta(seconds=1)):
        second = grading_lease_acquire(job_id=job.pk)

    assert second is not None
    assert second.token != first.token
    submission = _fresh(submission)
    assert submission.attempts == 2
    assert submission.lease_token == second.token
    assert GradingAttempt.objects.get(lease_token=first.token).outcome == GradingOutcome.ABANDONED
    # Each lease carries the attempt it counts, on the take and on the take-over alike.
    assert (first.attempt, second.attempt) == (1, 2)
    numbers = GradingAttempt.objects.order_by("number").values_list("lease_token", "number")
    assert list(numbers) == [(first.token, 1), (second.token, 2)]


def test_max_attempts_ends_in_failed_with_reason(user: User, settings: Any) -> None:
    settings.GRADING_MAX_ATTEMPTS = 2
    submission = make_stored_submission(user)
    job = make_job(submission)
    moment = timezone.now()
    step = dt.timedelta(seconds=grading_lease_seconds() + 1)
    with time_machine.travel(moment, tick=False) as traveller:
        assert grading_lease_acquire(job_id=job.pk) is not None
        traveller.shift(step)
        assert grading_lease_acquire(job_id=job.pk) is not None
        traveller.shift(step)
        assert grading_lease_acquire(job_id=job.pk) is None

    submission = _fresh(submission)
    job.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert "2 attempts" in submission.status_reason
    assert "GRADING_MAX_ATTEMPTS" in submission.status_reason
    assert submission.attempts == 2
    assert job.status == JobStatus.FAILED
    assert job.error == submission.status_reason


def test_cancel_during_grading_makes_the_worker_lose_its_write(user: User) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission)
    lease = grading_lease_acquire(job_id=job.pk)
    assert lease is not None
    # The jobs API's cancel: job → cancelled, submission → failed, lease cleared.
    job_cancel(job_id=job.pk)

    assert not grading_result_record(lease=lease, result=GradingResult("completed", score=1))

    submission = _fresh(submission)
    job.refresh_from_db()
    assert (submission.status, submission.score) == (SubmissionStatus.FAILED, None)
    assert job.status == JobStatus.CANCELLED


def test_cancelled_job_is_not_graded(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, status=JobStatus.CANCELLED)

    assert grade_job(job.pk) == "skipped"

    assert _fresh(submission).status == SubmissionStatus.PENDING
    assert invocations(grader_log) == []


def test_unknown_job_is_skipped(db: None) -> None:
    assert grade_job("0" * 32) == "skipped"


@pytest.mark.parametrize(
    "status", [SubmissionStatus.COMPLETED, SubmissionStatus.FAILED, SubmissionStatus.REVIEW_PENDING]
)
def test_finished_submission_is_skipped_and_its_stray_job_closed(
    user: User, grader_log: Path, status: str
) -> None:
    submission = make_stored_submission(user, status=status)
    job = make_job(submission)

    assert grade_job(job.pk) == "skipped"

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert _fresh(submission).status == status
    assert invocations(grader_log) == []


def test_reaper_reenqueues_expired_leases_and_stale_pending_jobs(
    user: User, other_user: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    stuck = make_stored_submission(user)
    stuck_job = make_job(stuck)
    lease = grading_lease_acquire(job_id=stuck_job.pk)
    assert lease is not None
    pending = make_stored_submission(other_user)
    pending_job = make_job(pending)
    fresh = make_stored_submission(other_user, question_id="q2")
    later = timezone.now() + dt.timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    Job.objects.filter(pk=make_job(fresh).pk).update(created_at=later)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        reaped = grading_reap_expired(now=later)

    assert sorted(reaped) == sorted([stuck_job.pk, pending_job.pk])
    assert len(callbacks) == 2
    assert grading_reap_expired(now=timezone.now()) == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicate_deliveries_grade_once(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"sleep": 0.3, "score": 5})

    outcomes = run_concurrently(lambda _i: grade_job(job.pk), 6)

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    values = sorted(o.value for o in outcomes)
    assert values == ["completed"] + ["skipped"] * 5
    assert len(invocations(grader_log)) == 1
    submission = _fresh(submission)
    job.refresh_from_db()
    assert (submission.status, submission.score, submission.attempts) == ("completed", 5, 1)
    assert job.status == JobStatus.COMPLETED
    assert GradingAttempt.objects.filter(submission=submission).count() == 1

    assert grade_job(job.pk) == "skipped"
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED
    assert len(invocations(grader_log)) == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_takeover_of_expired_lease_has_one_winner(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"score": 2})
    first = grading_lease_acquire(job_id=job.pk)
    assert first is not None

    with time_machine.travel(first.expires_at + dt.timedelta(seconds=1)):
        outcomes = run_concurrently(lambda _i: grade_job(job.pk), 5)

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sorted(o.value for o in outcomes) == ["completed"] + ["skipped"] * 4
    assert len(invocations(grader_log)) == 1
    assert _fresh(submission).attempts == 2
    assert not grading_result_record(lease=first, result=GradingResult("failed", reason="old"))
    assert _fresh(submission).status == SubmissionStatus.COMPLETED


def test_regraded_submission_is_graded_again_with_fresh_attempts(
    user: User, staff_user: User, grader_log: Path
) -> None:
    from apps.review.services import submission_regrade

    submission = make_stored_submission(user)
    grade_job(make_job(submission, config={"score": 1}).pk)

    result = submission_regrade(user=staff_user, submission_id=submission.pk)
    assert grade_job(result.job.pk) == "completed"

    submission = _fresh(submission)
    assert (submission.status, submission.attempts) == (SubmissionStatus.COMPLETED, 1)
    assert len(invocations(grader_log)) == 2
    assert Job.objects.get(pk=result.job.pk).config == {"score": 1}


def test_grader_with_unknown_outcome_fails_the_attempt(user: User, grader_log: Path) -> None:
    submission = make_stored_submission(user)
    job = make_job(submission, config={"outcome": "excellent"})

    assert grade_job(job.pk) == "failed"
    assert "unknown outcome" in _fresh(submission).status_reason


def test_review_pending_submission_reaches_the_queue_and_a_verdict(
    user: User, reviewer: User, grader_log: Path, client_for: Any
) -> None:
    submission = make_stored_submission(user)
    grade_job(make_job(submission, config={"outcome": "review_pending", "score": 0.2}).pk)
    client = client_for(reviewer)

    queue = client.get("/api/review/queue/").json()
    assert [row["id"] for row in queue] == [submission.pk]
    assert queue[0]["score"] == 0.2
    assert client.post(f"/api/review/submissions/{submission.pk}/claim/").status_code == 200
    body = client.post(
        f"/api/review/submissions/{submission.pk}/complete/",
        {"verdict": "approve", "score": 0.7},
        format="json",
    ).json()

    assert (body["status"], body["score"]) == ("completed", 0.7)
    assert client.get("/api/review/queue/").json() == []


@pytest.mark.django_db(transaction=True)
def test_a_live_worker_keeps_its_lease_past_the_lease_length(
    user: User, grader_log: Path, settings: Any
) -> None:
    """The lease is renewed while the grader runs, so a redelivery after the original lease
    length finds it live and does not start a second grading."""
    import threading
    import time

    settings.GRADING_TIMEOUT = 0.5  # lease 1.5 s, renewed every 0.5 s
    submission = make_stored_submission(user)
    job = make_job(submission, config={"sleep": 2.5, "score": 4})
    outcome: list[str] = []

    def first() -> None:
        try:
            outcome.append(grade_job(job.pk))
        finally:
            from django.db import connections

            connections.close_all()

    worker = threading.Thread(target=first)
    worker.start()
    time.sleep(2.0)
    assert grade_job(job.pk) == "skipped"
    worker.join(10)

    assert outcome == ["completed"]
    assert len(invocations(grader_log)) == 1
    assert _fresh(submission).attempts == 1


def test_periodic_reaper_task_runs(user: User) -> None:
    from apps.grading.tasks import reap_expired_leases

    make_stored_submission(user)
    assert reap_expired_leases() == []
