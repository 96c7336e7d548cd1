"""A staff regrade's job is admitted like any other: the owner's concurrent limit holds; the
daily and cost limits do not apply (a regrade is the platform's decision and costs nothing)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.jobs.models import Job, JobStatus
from apps.quotas.exceptions import QuotaExceeded
from apps.review.services.review import submission_regrade
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.quotas import make_policy
from tests.factories.submissions import make_graded_submission

pytestmark = pytest.mark.django_db


def _regrade_url(submission: Submission) -> str:
    return f"/api/review/submissions/{submission.pk}/regrade/"


@pytest.fixture
def graded(user: User) -> Submission:
    return make_graded_submission(user, score=0.3)


def _fill_slots(user: User, limit: int) -> None:
    make_policy(user=user, max_concurrent_jobs=limit)
    for _ in range(limit):
        make_job(owner=user, status=JobStatus.RUNNING)


def test_a_regrade_is_refused_while_the_owner_is_at_the_concurrent_limit(
    user: User, staff_user: User, graded: Submission
) -> None:
    _fill_slots(user, 2)

    with pytest.raises(QuotaExceeded) as refused:
        submission_regrade(user=staff_user, submission_id=graded.pk)

    assert refused.value.code == "quota_exceeded"
    graded.refresh_from_db()
    assert graded.status == SubmissionStatus.COMPLETED
    assert graded.score == 0.3
    assert not Job.objects.filter(submission=graded).exists()


def test_a_regrade_goes_through_once_a_slot_frees(
    user: User, staff_user: User, graded: Submission
) -> None:
    _fill_slots(user, 1)
    Job.objects.filter(owner=user).update(status=JobStatus.COMPLETED)

    result = submission_regrade(user=staff_user, submission_id=graded.pk)

    assert (result.job.status, result.job.owner_id, result.job.cost) == ("queued", user.pk, 0)
    assert result.submission.status == SubmissionStatus.PENDING


def test_a_regrade_is_exempt_from_the_daily_and_cost_limits(
    user: User, staff_user: User, graded: Submission
) -> None:
    make_policy(user=user, max_jobs_per_day=1, monthly_cost_limit=1)
    make_job(owner=user, status=JobStatus.COMPLETED, cost=1)

    result = submission_regrade(user=staff_user, submission_id=graded.pk)

    assert result.job.status == JobStatus.QUEUED


def test_a_regrade_without_a_previous_job_uses_the_default_resource_class(
    user: User, staff_user: User, graded: Submission, settings: Any
) -> None:
    settings.DEFAULT_RESOURCE_CLASS = "small"

    result = submission_regrade(user=staff_user, submission_id=graded.pk)

    assert result.job.resource_class == "small"


def test_a_regrade_reruns_the_previous_jobs_config_and_class(
    user: User, staff_user: User, graded: Submission
) -> None:
    make_job(
        owner=user,
        submission=graded,
        status=JobStatus.COMPLETED,
        config={"resource_class": "large"},
        resource_class="large",
    )

    result = submission_regrade(user=staff_user, submission_id=graded.pk)

    assert (result.job.resource_class, result.job.config) == ("large", {"resource_class": "large"})


def test_the_regrade_api_answers_429_quota_exceeded_at_the_owners_limit(
    user: User, staff_client: APIClient, graded: Submission
) -> None:
    _fill_slots(user, 1)

    response = staff_client.post(_regrade_url(graded))

    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    body = response.json()
    assert (body["success"], body["code"]) == (False, "quota_exceeded")
    assert body["error"] == "Quota exceeded: Maximum 1 concurrent jobs allowed"
    graded.refresh_from_db()
    assert graded.status == SubmissionStatus.COMPLETED


@pytest.mark.parametrize("role", ["owner", "reviewer"])
def test_the_owner_or_a_reviewer_cannot_regrade_for_a_free_exempt_job(
    role: str, user: User, user_client: APIClient, reviewer_client: APIClient, graded: Submission
) -> None:
    # A regrade skips the daily and cost limits: only staff may ask for one.
    client = user_client if role == "owner" else reviewer_client
    response = client.post(_regrade_url(graded))
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    graded.refresh_from_db()
    assert graded.status == SubmissionStatus.COMPLETED
    assert graded.score == 0.3
    assert not Job.objects.filter(submission=graded).exists()
