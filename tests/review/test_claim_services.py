"""Review claims at service level (no HTTP): one holder, re-claim extends, extend and release
only by the holder of a live claim, expiry checked at query time, staff release."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.review.exceptions import AlreadyClaimed, NotClaimHolder
from apps.review.models import ReviewClaim
from apps.review.services.review import (
    review_claim,
    review_claim_extend,
    review_claim_release,
)
from apps.submissions.models import SubmissionStatus
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_stored_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def _ttl(settings: Any) -> dt.timedelta:
    return dt.timedelta(seconds=float(settings.REVIEW_CLAIM_TTL))


def test_re_claiming_extends_the_holders_claim(user: User, reviewer: User, settings: Any) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    first = review_claim(user=reviewer, submission_id=submission.pk)

    with time_machine.travel(timezone.now() + dt.timedelta(minutes=5)):
        again = review_claim(user=reviewer, submission_id=submission.pk)

    assert again.claim_expires_at - first.claim_expires_at >= dt.timedelta(minutes=5)
    assert ReviewClaim.objects.get(submission=submission).expires_at == again.claim_expires_at


def test_a_live_claim_refuses_another_reviewer_with_its_holder(
    user: User, reviewer: User, other_reviewer: User
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    state = review_claim(user=reviewer, submission_id=submission.pk)

    with pytest.raises(AlreadyClaimed) as caught:
        review_claim(user=other_reviewer, submission_id=submission.pk)

    assert caught.value.code == "already_claimed"
    assert caught.value.extra["claimed_by"] == {"id": reviewer.pk, "username": "rita"}
    assert ReviewClaim.objects.get(submission=submission).expires_at == state.claim_expires_at


def test_a_claim_expires_at_query_time_and_the_old_holder_can_neither_extend_nor_release(
    user: User, reviewer: User, other_reviewer: User, settings: Any
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)

    with time_machine.travel(timezone.now() + _ttl(settings) + dt.timedelta(seconds=1)):
        with pytest.raises(NotClaimHolder):
            review_claim_extend(user=reviewer, submission_id=submission.pk)
        taken = review_claim(user=other_reviewer, submission_id=submission.pk)
        with pytest.raises(NotClaimHolder) as caught:
            review_claim_release(user=reviewer, submission_id=submission.pk)

    assert caught.value.code == "not_claim_holder"
    assert taken.claimed_by == other_reviewer
    assert ReviewClaim.objects.get(submission=submission).reviewer_id == other_reviewer.pk


def test_extend_renews_only_the_holders_live_claim(
    user: User, reviewer: User, other_reviewer: User, settings: Any
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)
    later = timezone.now() + dt.timedelta(minutes=10)

    with time_machine.travel(later):
        renewed = review_claim_extend(user=reviewer, submission_id=submission.pk)
        with pytest.raises(NotClaimHolder):
            review_claim_extend(user=other_reviewer, submission_id=submission.pk)

    assert renewed.claim_expires_at >= later + _ttl(settings) - dt.timedelta(seconds=1)
    assert ReviewClaim.objects.get(submission=submission).reviewer_id == reviewer.pk


def test_release_by_the_holder_frees_the_submission_for_another_reviewer(
    user: User, reviewer: User, other_reviewer: User
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)

    with pytest.raises(NotClaimHolder):
        review_claim_release(user=other_reviewer, submission_id=submission.pk)
    assert review_claim_release(user=reviewer, submission_id=submission.pk) is True
    taken = review_claim(user=other_reviewer, submission_id=submission.pk)

    assert taken.claimed_by == other_reviewer


def test_staff_release_any_claim_and_repeat_harmlessly(user: User, reviewer: User) -> None:
    staff = make_user(username="sam", is_staff=True)
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)

    assert review_claim_release(user=staff, submission_id=submission.pk) is True
    assert review_claim_release(user=staff, submission_id=submission.pk) is False
    assert not ReviewClaim.objects.filter(submission=submission).exists()


def test_only_a_submission_awaiting_review_can_be_claimed(user: User, reviewer: User) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.COMPLETED)

    with pytest.raises(InvalidTransition):
        review_claim(user=reviewer, submission_id=submission.pk)

    assert not ReviewClaim.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_racing_claimers_of_an_expired_claim_one_takes_it_over(
    user: User, reviewer: User, settings: Any
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)
    claimers = [make_user(username=f"r{i}", reviewer=True) for i in range(6)]
    later = timezone.now() + _ttl(settings) + dt.timedelta(seconds=1)

    with time_machine.travel(later):
        outcomes = run_concurrently(
            lambda i: review_claim(user=claimers[i], submission_id=submission.pk), 6
        )

    winners = [o.value.claimed_by.pk for o in outcomes if o.ok]
    assert len(winners) == 1
    assert all(isinstance(o.error, AlreadyClaimed) for o in outcomes if not o.ok)
    assert ReviewClaim.objects.get(submission=submission).reviewer_id == winners[0]
