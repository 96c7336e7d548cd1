"""Admin pages and actions, cleanup kind `claims`, the periodic reaper's registration."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.core.cleanup import cleanup_run
from apps.core.permissions import reviewer_permission
from apps.grading.models import GradingAttempt
from apps.jobs.models import Job
from apps.review.models import ReviewClaim, ReviewRecord
from apps.review.services import review_claim, review_complete
from apps.submissions.models import SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_graded_submission, make_stored_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(staff_user: User) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def test_admin_pages_render(
    admin_client: Client, user: User, reviewer: User, grader_log: Any
) -> None:
    from apps.grading.tasks import grade_job

    submission = make_stored_submission(user)
    grade_job(make_job(submission, config={"outcome": "review_pending"}).pk)
    review_claim(user=reviewer, submission_id=submission.pk)
    review_complete(user=reviewer, submission_id=submission.pk, verdict="approve")
    other = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING, question_id="x")
    review_claim(user=reviewer, submission_id=other.pk)

    for app, model in (
        ("review", "submissionunderreview"),
        ("review", "reviewclaim"),
        ("review", "reviewrecord"),
        ("grading", "gradingattempt"),
    ):
        url = f"/admin/{app}/{model}/"
        assert admin_client.get(url).status_code == HTTPStatus.OK, url
        assert admin_client.get(url, {"q": "alice"}).status_code == HTTPStatus.OK, url
    detail = f"/admin/review/submissionunderreview/{submission.pk}/change/"
    assert admin_client.get(detail).status_code == HTTPStatus.OK
    assert GradingAttempt.objects.count() == 1
    assert ReviewRecord.objects.count() == 1


def test_admin_regrade_action(
    admin_client: Client, user: User, django_capture_on_commit_callbacks: Any
) -> None:
    done = make_graded_submission(user, score=1)
    running = make_stored_submission(user, status=SubmissionStatus.PROCESSING, question_id="r")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(
            "/admin/review/submissionunderreview/",
            {"action": "regrade_submissions", "_selected_action": [done.pk, running.pk]},
            follow=True,
        )

    assert response.status_code == HTTPStatus.OK
    done.refresh_from_db()
    running.refresh_from_db()
    assert done.status == SubmissionStatus.PENDING
    assert running.status == SubmissionStatus.PROCESSING
    assert Job.objects.filter(submission=done).count() == 1
    assert len(callbacks) == 1


def test_admin_expire_claim_action_lets_another_reviewer_claim(
    admin_client: Client, user: User, reviewer: User, other_reviewer: User
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)

    admin_client.post(
        "/admin/review/reviewclaim/",
        {"action": "expire_claims", "_selected_action": [submission.pk]},
    )

    state = review_claim(user=other_reviewer, submission_id=submission.pk)
    assert state.claimed_by == other_reviewer


def test_cleanup_claims_removes_expired_and_orphaned_only(
    user: User, reviewer: User, settings: Any
) -> None:
    live = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING, question_id="a")
    stale = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING, question_id="b")
    review_claim(user=reviewer, submission_id=live.pk)
    review_claim(user=reviewer, submission_id=stale.pk)
    ReviewClaim.objects.filter(submission=stale).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )

    (dry,) = cleanup_run(only=["claims"], dry_run=True)
    assert (dry.count, dry.items) == (1, [stale.pk])
    assert ReviewClaim.objects.count() == 2

    (report,) = cleanup_run(only=["claims"])
    assert report.count == 1
    assert list(ReviewClaim.objects.values_list("submission_id", flat=True)) == [live.pk]


def test_cleanup_command_accepts_claims(capsys: Any) -> None:
    call_command("cleanup", "--only", "claims")
    assert "claims" in capsys.readouterr().out


def test_reviewer_permission_exists() -> None:
    assert reviewer_permission() is not None


def test_periodic_reaper_task_runs(user: User) -> None:
    from apps.grading.tasks import reap_expired_leases

    make_stored_submission(user)
    assert reap_expired_leases() == []
