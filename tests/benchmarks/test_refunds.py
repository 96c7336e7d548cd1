"""Refunds (SPEC §11.4): a phase submission stops counting when it failed through no fault of
the participant — its queued job cancelled, the worker lost GRADING_MAX_ATTEMPTS times, the
scorer failed (a real sandbox scoring NaN), the grader could not run it — and a new one is
admitted; a participant's own failure (a program that exits 1, invalid predictions) counts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.benchmarks.models import Challenge, Entry, Phase
from apps.benchmarks.team_exceptions import PhaseLimitExceeded
from apps.grading.leases import grading_lease_acquire, grading_lease_seconds
from apps.grading.results import GradingResult
from apps.jobs.models import Job, JobStatus
from apps.jobs.services import job_cancel
from apps.jobs.services.submission import job_submit
from apps.submissions.models import Submission, SubmissionKind
from tests.benchmarks.phases import phase_limits
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_draft,
    phase_of,
    predictions_csv,
    program,
    scorer_replaced,
)
from tests.factories.submissions import add_file
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.metrics import scrape

pytestmark = pytest.mark.django_db(transaction=True)

NAN_SCORER = """
import json
with open("/scores/scores.json", "w") as out:
    out.write('{"public": {"accuracy": NaN, "errors": 0}, "private": {"accuracy": 1, "errors": 0}}')
"""
INVALID_SCORER = """
import json
with open("/scores/scores.json", "w") as out:
    json.dump({"invalid": "line 2: no label"}, out)
"""
PREDICTIONS = {"predictions.csv": predictions_csv()}


class RaisingGrader:
    """A grader that cannot run anything (the platform's fault)."""

    def grade(self, request: Any) -> GradingResult:
        raise RuntimeError("the runtime is gone")


def _challenge(*, extra: dict[str, bytes] | None = None) -> Challenge:
    """The example with each phase limited to one submission in total per team."""

    def limited(document: dict[str, Any]) -> None:
        for phase in document["phases"]:
            phase_limits(phase["slug"], total=1)(document)

    return apply_bundle(host_user(), extra=extra, change=limited)


def _draft(user: User, phase: Phase, files: dict[str, bytes]) -> Submission:
    """A draft phase submission of the phase's kind, with its entry (a team of one)."""
    submission = phase_draft(user, phase, {})
    kind = SubmissionKind.CODE if phase.kind == "code" else SubmissionKind.PREDICTIONS
    Submission.objects.filter(pk=submission.pk).update(kind=kind)
    for filename, content in files.items():
        add_file(submission, filename, content)
    return submission


def _enqueued(user: User, phase: Phase, files: dict[str, bytes]) -> tuple[Submission, Job]:
    """A phase submission enqueued through the jobs service (the phase check counts it)."""
    submission = _draft(user, phase, files)
    job = job_submit(user=user, submission_id=submission.pk).job
    assert Entry.objects.get(pk=submission.pk).counted
    return submission, job


def _entry(submission: Submission) -> tuple[bool, str]:
    entry = Entry.objects.get(pk=submission.pk)
    return entry.counted, entry.refund_reason


def _next_is_admitted(user: User, phase: Phase, files: dict[str, bytes]) -> None:
    _enqueued(user, phase, files)


def _next_is_refused(user: User, phase: Phase, files: dict[str, bytes]) -> None:
    submission = _draft(user, phase, files)
    with pytest.raises(PhaseLimitExceeded):
        job_submit(user=user, submission_id=submission.pk)


def test_a_cancelled_queued_job_is_refunded(user: User, settings: Any) -> None:
    before = scrape(settings).value("yoyaku_phase_refunds_total", reason="cancelled")
    phase = phase_of(_challenge(), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)
    _next_is_refused(user, phase, PREDICTIONS)

    job_cancel(job_id=job.pk, user=user)

    assert _entry(submission) == (False, "cancelled")
    _next_is_admitted(user, phase, PREDICTIONS)
    assert scrape(settings).value("yoyaku_phase_refunds_total", reason="cancelled") - before == 1
    job_cancel(job_id=job.pk, user=user)  # again: nothing more is refunded
    assert scrape(settings).value("yoyaku_phase_refunds_total", reason="cancelled") - before == 1


@pytest.mark.usefixtures("sandbox_settings")
def test_a_cancelled_regrade_of_a_graded_submission_is_not_refunded(user: User) -> None:
    """The attacker's loop: staff regrade a scored phase submission; its owner, having seen the
    public score, cancels the queued regrade to get the slot back. The earlier outcome stands:
    the entry still counts and the next submission is refused."""
    from apps.benchmarks.models import Score
    from apps.review.services import submission_regrade

    staff = User.objects.create_user("regrader", password="x", is_staff=True)
    phase = phase_of(_challenge(), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)
    _, _, entry = graded(submission, job)
    assert Score.objects.filter(entry=entry).exists()

    regrade = submission_regrade(user=staff, submission_id=submission.pk).job
    job_cancel(job_id=regrade.pk, user=user)

    assert Job.objects.get(pk=regrade.pk).status == JobStatus.CANCELLED
    assert _entry(submission) == (True, "")
    assert Score.objects.filter(entry=entry).exists()
    _next_is_refused(user, phase, PREDICTIONS)


def test_a_job_cancelled_while_grading_still_counts(user: User) -> None:
    phase = phase_of(_challenge(), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)
    assert grading_lease_acquire(job_id=job.pk) is not None  # grading started

    job_cancel(job_id=job.pk, user=user)

    assert _entry(submission) == (True, "")
    _next_is_refused(user, phase, PREDICTIONS)


def test_a_worker_lost_past_max_attempts_is_refunded(user: User, settings: Any) -> None:
    settings.GRADING_MAX_ATTEMPTS = 2
    phase = phase_of(_challenge(), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)
    step = dt.timedelta(seconds=grading_lease_seconds() + 1)
    with time_machine.travel(timezone.now(), tick=False) as traveller:
        assert grading_lease_acquire(job_id=job.pk) is not None
        traveller.shift(step)
        assert grading_lease_acquire(job_id=job.pk) is not None
        traveller.shift(step)
        assert grading_lease_acquire(job_id=job.pk) is None  # exhausted

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert _entry(submission) == (False, "worker_lost")
    _next_is_admitted(user, phase, PREDICTIONS)


def test_a_grader_that_cannot_run_it_is_refunded(user: User, settings: Any) -> None:
    settings.GRADER = f"{__name__}.RaisingGrader"
    phase = phase_of(_challenge(), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)

    submission, job, entry = graded(submission, job)

    assert entry.failure == "scoring_failed"
    assert "the runtime is gone" in entry.scoring_logs
    assert "the runtime is gone" not in submission.status_reason
    assert _entry(submission) == (False, "scoring_failed")
    _next_is_admitted(user, phase, PREDICTIONS)


@pytest.mark.usefixtures("sandbox_settings")
def test_a_scorer_writing_nan_is_refunded_in_a_real_sandbox(user: User) -> None:
    phase = phase_of(_challenge(extra=scorer_replaced(NAN_SCORER)), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)

    submission, job, entry = graded(submission, job)

    assert (submission.status, entry.failure) == ("failed", "scoring_failed")
    assert _entry(submission) == (False, "scoring_failed")
    _next_is_admitted(user, phase, PREDICTIONS)


@pytest.mark.usefixtures("sandbox_settings")
def test_invalid_predictions_count_in_a_real_sandbox(user: User) -> None:
    phase = phase_of(_challenge(extra=scorer_replaced(INVALID_SCORER)), "dev")
    submission, job = _enqueued(user, phase, PREDICTIONS)

    submission, job, entry = graded(submission, job)

    assert entry.failure == "invalid_predictions"
    assert _entry(submission) == (True, "")
    _next_is_refused(user, phase, PREDICTIONS)


@pytest.mark.usefixtures("sandbox_settings")
def test_a_participant_program_that_exits_1_counts_in_a_real_sandbox(user: User) -> None:
    phase = phase_of(_challenge(), "code")
    crash = program("import sys\nprint('oops')\nsys.exit(1)\n")
    submission, job = _enqueued(user, phase, crash)

    submission, job, entry = graded(submission, job)

    assert submission.status == "failed"
    assert entry.failure == ""
    assert _entry(submission) == (True, "")
    _next_is_refused(user, phase, crash)
