"""A reviewer tries to judge their own work: claim, extend, complete with a perfect score, or
(as staff) regrade it through the API. Every one is 409 `own_submission` and changes nothing;
only the admin's regrade action may override it, and other reviewers are unaffected."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.review.models import ReviewClaim, ReviewRecord
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.submissions import make_graded_submission, make_stored_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def _url(submission: Submission, action: str) -> str:
    return f"/api/review/submissions/{submission.pk}/{action}/"


@pytest.fixture
def author(db: None) -> User:
    """A reviewer who is also staff (the strongest API rights) and submits work of their own."""
    return make_user(username="author", reviewer=True, is_staff=True)


@pytest.fixture
def author_client(author: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(author)


@pytest.fixture
def own_waiting(author: User) -> Submission:
    return make_stored_submission(author, status=SubmissionStatus.REVIEW_PENDING, score=0.1)


def _assert_own_submission(response: Any) -> None:
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "own_submission"


def test_reviewer_cannot_claim_own_submission(
    author_client: APIClient, own_waiting: Submission
) -> None:
    _assert_own_submission(author_client.post(_url(own_waiting, "claim")))
    assert not ReviewClaim.objects.filter(submission=own_waiting).exists()


def test_reviewer_cannot_complete_own_submission_even_holding_a_claim(
    author: User, author_client: APIClient, own_waiting: Submission
) -> None:
    # A claim that exists anyway (taken before this rule, or granted by an operator).
    ReviewClaim.objects.create(
        submission=own_waiting,
        reviewer=author,
        claimed_at=timezone.now(),
        expires_at=timezone.now() + dt.timedelta(minutes=10),
    )
    _assert_own_submission(author_client.post(_url(own_waiting, "extend")))
    response = author_client.post(
        _url(own_waiting, "complete"), {"verdict": "approve", "score": 100.0}, format="json"
    )
    _assert_own_submission(response)
    own_waiting.refresh_from_db()
    assert (own_waiting.status, own_waiting.score) == (SubmissionStatus.REVIEW_PENDING, 0.1)
    assert not ReviewRecord.objects.exists()


def test_staff_cannot_regrade_own_submission_through_the_api(
    author: User, author_client: APIClient
) -> None:
    failed = make_graded_submission(author, score=0.0, status=SubmissionStatus.FAILED)
    _assert_own_submission(author_client.post(_url(failed, "regrade")))
    failed.refresh_from_db()
    assert failed.status == SubmissionStatus.FAILED
    assert not Job.objects.exists()


def test_staff_can_override_in_the_admin(author: User) -> None:
    failed = make_graded_submission(author, score=0.0, status=SubmissionStatus.FAILED)
    admin = make_user(username="boss", is_staff=True, is_superuser=True)
    # The author themself, as a superuser in the admin: a deliberate override.
    author.is_superuser = True
    author.save(update_fields=["is_superuser"])
    for operator in (author, admin):
        Submission.objects.filter(pk=failed.pk).update(status=SubmissionStatus.FAILED)
        client = Client()
        client.force_login(operator)
        response = client.post(
            "/admin/review/submissionunderreview/",
            {"action": "regrade_submissions", "_selected_action": [failed.pk]},
        )
        assert response.status_code == HTTPStatus.FOUND
        failed.refresh_from_db()
        assert failed.status == SubmissionStatus.PENDING
        Job.objects.all().delete()


def test_another_reviewer_reviews_it_normally(
    own_waiting: Submission, reviewer: User, client_for: Callable[[User], APIClient]
) -> None:
    client = client_for(reviewer)
    assert client.post(_url(own_waiting, "claim")).status_code == HTTPStatus.OK
    response = client.post(
        _url(own_waiting, "complete"), {"verdict": "approve", "score": 0.9}, format="json"
    )
    assert response.status_code == HTTPStatus.OK
    own_waiting.refresh_from_db()
    assert (own_waiting.status, own_waiting.score) == (SubmissionStatus.COMPLETED, 0.9)
