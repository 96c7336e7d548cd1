"""The submissions app's grading-lease functions: each writes only under the lease it names."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.submissions.models import Submission, SubmissionStatus
from apps.submissions.services import (
    submission_lease_end,
    submission_lease_release,
    submission_lease_renew,
    submission_lease_take,
    submission_lease_take_over,
)

pytestmark = pytest.mark.django_db


def _later(seconds: float = 60) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)


def _leased(user: User, token: str = "a" * 32) -> Submission:
    submission = Submission.objects.create(owner=user, status=SubmissionStatus.PENDING)
    return submission_lease_take(submission=submission, token=token, expires_at=_later())


def test_take_moves_pending_to_processing_and_counts_the_attempt(user: User) -> None:
    _leased(user)
    row = Submission.objects.get()
    assert (row.status, row.lease_token, row.attempts) == ("processing", "a" * 32, 1)


def test_take_refuses_a_row_that_changed_since_it_was_read(user: User) -> None:
    submission = Submission.objects.create(owner=user, status=SubmissionStatus.PENDING)
    Submission.objects.filter(pk=submission.pk).update(status=SubmissionStatus.FAILED)
    with pytest.raises(InvalidTransition):
        submission_lease_take(submission=submission, token="b" * 32, expires_at=_later())


def test_only_the_holder_renews_and_a_take_over_needs_the_old_token(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_renew(
        submission_id=submission.pk, token="x" * 32, expires_at=_later(600)
    )
    assert not submission_lease_take_over(
        submission_id=submission.pk, old_token="x" * 32, token="c" * 32, expires_at=_later()
    )
    assert submission_lease_take_over(
        submission_id=submission.pk, old_token="a" * 32, token="c" * 32, expires_at=_later()
    )
    row = Submission.objects.get()
    assert (row.lease_token, row.attempts) == ("c" * 32, 2)


def test_release_expires_the_lease_now_and_does_not_count_the_attempt(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_release(submission_id=submission.pk, token="x" * 32)
    assert submission_lease_release(submission_id=submission.pk, token="a" * 32)
    row = Submission.objects.get()
    assert row.status == SubmissionStatus.PROCESSING
    assert row.attempts == 0
    assert row.lease_expires_at is not None
    assert row.lease_expires_at <= timezone.now()


def test_end_writes_the_result_once_under_the_lease(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_end(
        submission_id=submission.pk, token="x" * 32, to=SubmissionStatus.COMPLETED, score=1.0
    )
    assert submission_lease_end(
        submission_id=submission.pk, token="a" * 32, to=SubmissionStatus.COMPLETED, score=0.5
    )
    assert not submission_lease_end(
        submission_id=submission.pk, token="a" * 32, to=SubmissionStatus.FAILED
    )
    row = Submission.objects.get()
    assert (row.status, row.score, row.lease_token, row.lease_expires_at) == (
        "completed",
        0.5,
        "",
        None,
    )
