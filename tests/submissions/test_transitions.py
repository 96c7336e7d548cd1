"""Submission status changes through `SUBMISSION_TRANSITIONS` (service level, no HTTP),
including the job submission's raw-SQL seal."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from apps.core.exceptions import InvalidTransition
from apps.submissions.models import SUBMISSION_TRANSITIONS, Submission, SubmissionStatus
from apps.submissions.services.leases import submission_lease_end
from apps.submissions.services.transitions import submission_seal_ready, submission_transition
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_submission

S = SubmissionStatus


@pytest.mark.django_db
def test_the_whole_lifecycle_moves_through_the_table(user: User) -> None:
    submission = make_submission(owner=user)
    assert submission_seal_ready(submission_id=submission.pk, user_id=user.pk)
    submission.refresh_from_db()
    for to in (S.PROCESSING, S.REVIEW_PENDING, S.COMPLETED, S.PENDING, S.FAILED):
        submission_transition(submission=submission, to=to)
    row = Submission.objects.get(pk=submission.pk)
    assert row.status == S.FAILED
    assert row.completed_at is not None  # set on the way through completed


@pytest.mark.django_db
def test_an_illegal_move_raises_invalid_transition_and_leaves_the_row(user: User) -> None:
    submission = make_submission(owner=user)

    with pytest.raises(InvalidTransition) as caught:
        submission_transition(submission=submission, to=S.COMPLETED, score=1.0)

    assert caught.value.code == "invalid_transition"
    assert caught.value.extra == {"from_status": "draft", "to_status": "completed"}
    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score) == (S.DRAFT, None)


@pytest.mark.django_db
def test_a_transition_writes_score_and_reason_only_when_given(user: User) -> None:
    submission = make_submission(owner=user, status=S.REVIEW_PENDING)
    submission_transition(submission=submission, to=S.COMPLETED, status_reason="approved")
    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score, row.status_reason) == (S.COMPLETED, None, "approved")

    submission_transition(submission=row, to=S.PENDING, score=2.5)

    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score, row.status_reason) == (S.PENDING, 2.5, "approved")


@pytest.mark.django_db
def test_a_conditional_move_that_no_longer_matches_writes_nothing(user: User) -> None:
    submission = make_submission(owner=user, status=S.PROCESSING, lease_token="mine")

    moved = submission_lease_end(
        submission_id=submission.pk, token="someone-else", to=S.COMPLETED, score=5.0
    )

    assert moved is False
    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.score, row.lease_token) == (S.PROCESSING, None, "mine")


@pytest.mark.django_db
def test_a_conditional_move_the_table_forbids_raises_before_writing(user: User) -> None:
    submission = make_submission(owner=user, status=S.PROCESSING, lease_token="mine")

    with pytest.raises(InvalidTransition):
        submission_lease_end(submission_id=submission.pk, token="mine", to=S.PENDING)

    row = Submission.objects.get(pk=submission.pk)
    assert (row.status, row.lease_token) == (S.PROCESSING, "mine")


@pytest.mark.django_db
def test_the_seal_moves_only_a_complete_draft_of_its_owner(user: User, other_user: User) -> None:
    incomplete = make_submission(owner=user, files=("main.py",))
    complete = make_submission(owner=user)

    assert submission_seal_ready(submission_id=incomplete.pk, user_id=user.pk) is False
    assert submission_seal_ready(submission_id=complete.pk, user_id=other_user.pk) is False
    assert submission_seal_ready(submission_id="a\x00b", user_id=user.pk) is False
    assert submission_seal_ready(submission_id=complete.pk, user_id=user.pk) is True
    assert submission_seal_ready(submission_id=complete.pk, user_id=user.pk) is False

    assert Submission.objects.get(pk=incomplete.pk).status == S.DRAFT
    assert Submission.objects.get(pk=complete.pk).status == S.PENDING


@pytest.mark.django_db
def test_the_raw_sql_seal_obeys_the_transition_table(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    submission = make_submission(owner=user)
    # A table without draft → pending: the seal must refuse like every other writer.
    monkeypatch.setitem(SUBMISSION_TRANSITIONS.table, S.DRAFT, frozenset())

    with pytest.raises(InvalidTransition):
        submission_seal_ready(submission_id=submission.pk, user_id=user.pk)

    assert Submission.objects.get(pk=submission.pk).status == S.DRAFT


@pytest.mark.django_db(transaction=True)
def test_racing_seals_of_one_draft_seal_it_once(user: User) -> None:
    submission = make_submission(owner=user)

    outcomes = run_concurrently(
        lambda _: submission_seal_ready(submission_id=submission.pk, user_id=user.pk), 6
    )

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sorted(o.value for o in outcomes) == [False] * 5 + [True]
    assert Submission.objects.get(pk=submission.pk).status == S.PENDING
