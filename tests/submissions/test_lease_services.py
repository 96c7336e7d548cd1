"""The submissions app's grading lease (`apps.submissions.services.leases`): each step writes
only under the lease (and attempt count) it names, and the take steps return the attempt
number the row now holds."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.submissions.models import Submission, SubmissionStatus
from apps.submissions.services.leases import (
    submission_lease_cancel,
    submission_lease_end,
    submission_lease_exhausted,
    submission_lease_release,
    submission_lease_renew,
    submission_lease_reset,
    submission_lease_take,
    submission_lease_take_over,
)
from tests.concurrency import run_concurrently

pytestmark = pytest.mark.django_db
S = SubmissionStatus


def _later(seconds: float = 60) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)


def _row() -> Submission:
    return Submission.objects.get()


def _leased(user: User, token: str = "a" * 32) -> Submission:
    submission = Submission.objects.create(owner=user, status=S.PENDING)
    assert submission_lease_take(submission=submission, token=token, expires_at=_later()) == 1
    return _row()


def test_take_moves_pending_to_processing_and_returns_the_counted_attempt(user: User) -> None:
    submission = Submission.objects.create(owner=user, status=S.PENDING, attempts=2)

    attempt = submission_lease_take(submission=submission, token="a" * 32, expires_at=_later())

    assert attempt == 3
    row = _row()
    assert (row.status, row.lease_token, row.attempts) == ("processing", "a" * 32, 3)


def test_take_writes_nothing_when_the_row_changed_since_it_was_read(user: User) -> None:
    submission = Submission.objects.create(owner=user, status=S.PENDING)
    Submission.objects.filter(pk=submission.pk).update(status=S.FAILED)
    assert submission_lease_take(submission=submission, token="b" * 32, expires_at=_later()) is None

    # Same status, but another worker counted an attempt since the read.
    Submission.objects.filter(pk=submission.pk).update(status=S.PENDING, attempts=1)
    assert submission_lease_take(submission=submission, token="b" * 32, expires_at=_later()) is None
    row = _row()
    assert (row.status, row.lease_token, row.attempts) == ("pending", "", 1)


def test_only_the_holder_renews_and_a_take_over_needs_the_old_token(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_renew(
        submission_id=submission.pk, token="x" * 32, expires_at=_later(600)
    )
    stale = Submission.objects.get(pk=submission.pk)
    stale.lease_token = "x" * 32  # what a reader of another lease would hold
    assert submission_lease_take_over(submission=stale, token="c" * 32, expires_at=_later()) is None

    attempt = submission_lease_take_over(submission=submission, token="c" * 32, expires_at=_later())

    assert attempt == 2
    assert (_row().lease_token, _row().attempts) == ("c" * 32, 2)
    # The old holder's read is stale now: a second take-over from it writes nothing.
    assert (
        submission_lease_take_over(submission=submission, token="d" * 32, expires_at=_later())
        is None
    )


@pytest.mark.django_db(transaction=True)
def test_racing_take_overs_of_one_expired_lease_have_one_winner(user: User) -> None:
    submission = _leased(user)

    outcomes = run_concurrently(
        lambda i: submission_lease_take_over(
            submission=submission, token=f"{i:032d}", expires_at=_later()
        ),
        6,
    )

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    won = [(i, o.value) for i, o in enumerate(outcomes) if o.value is not None]
    assert len(won) == 1
    winner, attempt = won[0]
    row = _row()
    assert (attempt, row.attempts, row.lease_token) == (2, 2, f"{winner:032d}")


def test_release_expires_the_lease_now_and_does_not_count_the_attempt(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_release(submission_id=submission.pk, token="x" * 32)
    assert submission_lease_release(submission_id=submission.pk, token="a" * 32)
    row = _row()
    assert row.status == S.PROCESSING
    assert row.attempts == 0
    assert row.lease_expires_at is not None
    assert row.lease_expires_at <= timezone.now()


def test_end_writes_the_result_once_under_the_lease(user: User) -> None:
    submission = _leased(user)
    assert not submission_lease_end(
        submission_id=submission.pk, token="x" * 32, to=S.COMPLETED, score=1.0
    )
    assert submission_lease_end(
        submission_id=submission.pk, token="a" * 32, to=S.COMPLETED, score=0.5
    )
    assert not submission_lease_end(submission_id=submission.pk, token="a" * 32, to=S.FAILED)
    row = _row()
    assert (row.status, row.score, row.lease_token, row.lease_expires_at) == (
        "completed",
        0.5,
        "",
        None,
    )
    assert row.completed_at is not None


def test_exhausted_fails_the_submission_only_under_the_lease_it_read(user: User) -> None:
    submission = _leased(user)
    stale = Submission.objects.get(pk=submission.pk)
    assert submission_lease_take_over(submission=submission, token="c" * 32, expires_at=_later())

    with pytest.raises(InvalidTransition):
        submission_lease_exhausted(submission=stale, reason="no attempt left")
    assert (_row().status, _row().lease_token) == (S.PROCESSING, "c" * 32)

    submission_lease_exhausted(submission=_row(), reason="no attempt left")
    row = _row()
    assert (row.status, row.status_reason, row.lease_token, row.lease_expires_at) == (
        "failed",
        "no attempt left",
        "",
        None,
    )


def test_cancel_clears_the_lease_so_its_holder_cannot_write(user: User) -> None:
    submission = _leased(user)

    submission_lease_cancel(submission=submission, reason="job cancelled")

    assert not submission_lease_end(submission_id=submission.pk, token="a" * 32, to=S.COMPLETED)
    row = _row()
    assert (row.status, row.status_reason, row.lease_token) == ("failed", "job cancelled", "")


def test_reset_sends_a_finished_submission_back_with_no_attempt_counted(user: User) -> None:
    submission = _leased(user)
    submission_lease_end(submission_id=submission.pk, token="a" * 32, to=S.COMPLETED, score=3)

    reset = submission_lease_reset(submission=_row(), reason="regrade")

    row = _row()
    assert (reset.status, reset.attempts) == (S.PENDING, 0)
    assert (row.status, row.score, row.completed_at, row.attempts, row.lease_token) == (
        "pending",
        None,
        None,
        0,
        "",
    )
    with pytest.raises(InvalidTransition):
        submission_lease_reset(submission=_row(), reason="regrade")
