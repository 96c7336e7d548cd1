"""Claims under real concurrency: exactly one winner; expiry and take-over."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.review.exceptions import AlreadyClaimed, NotClaimHolder
from apps.review.models import ReviewClaim, ReviewRecord
from apps.review.services import review_claim, review_complete
from apps.submissions.models import SubmissionStatus
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_stored_submission
from tests.factories.tokens import make_token


@pytest.mark.django_db(transaction=True)
def test_ten_threads_two_reviewers_exactly_one_claim_wins(
    user: User, reviewer: User, other_reviewer: User
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    reviewers = [reviewer, other_reviewer]

    outcomes = run_concurrently(
        lambda i: review_claim(user=reviewers[i % 2], submission_id=submission.pk), 10
    )

    winners = {o.value.claimed_by.pk for o in outcomes if o.ok}
    errors = [o.error for o in outcomes if not o.ok]
    assert len(winners) == 1
    assert all(isinstance(e, AlreadyClaimed) for e in errors), errors
    # The winner's own duplicate requests re-claim (extend); the loser's all get 409.
    assert len(errors) == 5
    claim = ReviewClaim.objects.get(submission=submission)
    assert claim.reviewer_id in winners


@pytest.mark.django_db(transaction=True)
def test_ten_threads_through_the_api_exactly_one_200_per_reviewer_pair(
    user: User, reviewer: User, other_reviewer: User, live_server: Any
) -> None:
    import httpx

    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    tokens = [make_token(u) for u in (reviewer, other_reviewer)]
    url = f"{live_server.url}/api/review/submissions/{submission.pk}/claim/"

    def claim(i: int) -> tuple[int, int]:
        response = httpx.post(url, headers={"Authorization": f"Bearer {tokens[i % 2]}"}, timeout=30)
        return i % 2, response.status_code

    outcomes = run_concurrently(claim, 10)

    results = [o.value for o in outcomes]
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    ok_sides = {side for side, status in results if status == HTTPStatus.OK}
    assert len(ok_sides) == 1
    loser = 1 - ok_sides.pop()
    assert [s for side, s in results if side == loser] == [HTTPStatus.CONFLICT] * 5


@pytest.mark.django_db(transaction=True)
def test_expired_claim_is_taken_over_and_old_claimer_cannot_complete(
    user: User, reviewer: User, other_reviewer: User, settings: Any
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)
    with pytest.raises(AlreadyClaimed):
        review_claim(user=other_reviewer, submission_id=submission.pk)

    later = timezone.now() + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL + 1)
    with time_machine.travel(later):
        state = review_claim(user=other_reviewer, submission_id=submission.pk)
        assert state.claimed_by == other_reviewer

        with pytest.raises(NotClaimHolder):
            review_complete(user=reviewer, submission_id=submission.pk, verdict="approve")
        record = review_complete(user=other_reviewer, submission_id=submission.pk, verdict="reject")

    assert record.reviewer_id == other_reviewer.pk
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert ReviewRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_completes_record_one_review(user: User, reviewer: User) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)

    outcomes = run_concurrently(
        lambda i: review_complete(
            user=reviewer, submission_id=submission.pk, verdict=["approve", "reject"][i % 2]
        ),
        6,
    )

    assert sum(o.ok for o in outcomes) == 1
    assert ReviewRecord.objects.count() == 1
    codes = {getattr(o.error, "code", None) for o in outcomes if not o.ok}
    assert codes <= {"invalid_transition", "not_claim_holder"}
