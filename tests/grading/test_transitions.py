"""Grading attempt outcomes through `GRADING_ATTEMPT_TRANSITIONS` (service level, no HTTP):
every writer's move is in the table, and a finished attempt never changes its outcome."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth.models import User

from apps.core.exceptions import InvalidTransition
from apps.grading.grader import GradingResult
from apps.grading.leases import (
    grading_lease_acquire,
    grading_lease_give_back,
    grading_result_record,
)
from apps.grading.models import GRADING_ATTEMPT_TRANSITIONS, GradingAttempt, GradingOutcome
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission

pytestmark = pytest.mark.django_db
G = GradingOutcome


def _outcome(token: str) -> str:
    return GradingAttempt.objects.get(lease_token=token).outcome


def test_a_result_closes_the_running_attempt(user: User) -> None:
    lease = grading_lease_acquire(job_id=make_job(make_stored_submission(user)).pk)
    assert lease is not None

    assert grading_result_record(lease=lease, result=GradingResult(outcome="completed", score=1))

    assert _outcome(lease.token) == G.COMPLETED


def test_a_late_result_of_a_taken_over_attempt_is_recorded_as_lease_lost(user: User) -> None:
    job = make_job(make_stored_submission(user))
    first = grading_lease_acquire(job_id=job.pk)
    assert first is not None
    with time_machine.travel(first.expires_at + dt.timedelta(seconds=1)):
        second = grading_lease_acquire(job_id=job.pk)
    assert second is not None
    assert _outcome(first.token) == G.ABANDONED

    written = grading_result_record(lease=first, result=GradingResult(outcome="completed"))

    assert written is False
    assert _outcome(first.token) == G.LEASE_LOST
    assert _outcome(second.token) == G.RUNNING


def test_a_stopping_worker_abandons_its_attempt(user: User) -> None:
    lease = grading_lease_acquire(job_id=make_job(make_stored_submission(user)).pk)
    assert lease is not None

    assert grading_lease_give_back(lease=lease) is True

    assert _outcome(lease.token) == G.ABANDONED


def test_a_finished_attempt_cannot_change_its_outcome(user: User) -> None:
    lease = grading_lease_acquire(job_id=make_job(make_stored_submission(user)).pk)
    assert lease is not None
    grading_result_record(lease=lease, result=GradingResult(outcome="failed", reason="x"))
    attempts = GradingAttempt.objects.filter(lease_token=lease.token)

    with pytest.raises(InvalidTransition):
        GRADING_ATTEMPT_TRANSITIONS.move(attempts, old=G.FAILED, to=G.ABANDONED)
    moved = GRADING_ATTEMPT_TRANSITIONS.move(
        attempts, old=(G.RUNNING, G.ABANDONED), to=G.LEASE_LOST
    )
    late = grading_result_record(lease=lease, result=GradingResult(outcome="completed"))

    assert (moved, late) == (0, False)
    assert _outcome(lease.token) == G.FAILED
