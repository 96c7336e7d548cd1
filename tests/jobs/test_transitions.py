"""Job status changes through `JOB_TRANSITIONS` (service level, no HTTP): every writer's move
is in the table, an illegal or stale move raises and writes nothing, and of racing movers one
wins."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from apps.core.exceptions import InvalidTransition
from apps.jobs.models import Job, JobStatus
from apps.jobs.services import job_cancel, job_finish, job_transition
from tests.concurrency import run_concurrently
from tests.factories.jobs import make_job


@pytest.mark.django_db
def test_every_writer_move_is_allowed_by_the_table(user: User) -> None:
    # The grading worker: queued → running → completed; cancel: queued → cancelled;
    # job_finish: queued → failed (a submission already finished), running → failed.
    running = make_job(owner=user)
    job_transition(job=running, to=JobStatus.RUNNING)
    assert job_finish(job_id=running.pk, to=JobStatus.COMPLETED, logs="ok")
    cancelled = job_cancel(job_id=make_job(owner=user).pk, user=user)
    failed = make_job(owner=user)
    assert job_finish(job_id=failed.pk, to=JobStatus.FAILED, error="x")
    running_failed = make_job(owner=user, status=JobStatus.RUNNING)
    assert job_finish(job_id=running_failed.pk, to=JobStatus.FAILED)

    statuses = dict(Job.objects.values_list("pk", "status"))
    assert statuses == {
        running.pk: JobStatus.COMPLETED,
        cancelled.pk: JobStatus.CANCELLED,
        failed.pk: JobStatus.FAILED,
        running_failed.pk: JobStatus.FAILED,
    }
    done = Job.objects.get(pk=running.pk)
    assert done.started_at is not None
    assert done.finished_at is not None
    assert done.logs == "ok"


@pytest.mark.django_db
def test_an_illegal_move_raises_invalid_transition_and_leaves_the_row(user: User) -> None:
    job = make_job(owner=user, status=JobStatus.COMPLETED)

    with pytest.raises(InvalidTransition) as caught:
        job_transition(job=job, to=JobStatus.RUNNING, logs="overwritten")

    assert caught.value.code == "invalid_transition"
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.logs, row.started_at) == (JobStatus.COMPLETED, "", None)


@pytest.mark.django_db
def test_a_stale_caller_cannot_overwrite_a_newer_status(user: User) -> None:
    job = make_job(owner=user)
    stale = Job.objects.get(pk=job.pk)
    job_transition(job=job, to=JobStatus.CANCELLED)

    with pytest.raises(InvalidTransition):
        job_transition(job=stale, to=JobStatus.RUNNING)

    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED


@pytest.mark.django_db
def test_finishing_a_queued_job_as_completed_is_refused_without_a_write(user: User) -> None:
    job = make_job(owner=user)

    assert job_finish(job_id=job.pk, to=JobStatus.COMPLETED, logs="x") is False

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.logs, row.finished_at) == (JobStatus.QUEUED, "", None)


@pytest.mark.django_db
def test_finishing_a_finished_job_writes_nothing(user: User) -> None:
    job = make_job(owner=user, status=JobStatus.CANCELLED)

    assert job_finish(job_id=job.pk, to=JobStatus.FAILED, error="late") is False

    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_racing_start_and_cancel_of_one_job_exactly_one_wins(user: User) -> None:
    job = make_job(owner=user)
    targets = [JobStatus.RUNNING, JobStatus.CANCELLED] * 4
    # Every mover read the job while it was queued.
    snapshots = [Job.objects.get(pk=job.pk) for _ in targets]

    outcomes = run_concurrently(
        lambda i: job_transition(job=snapshots[i], to=targets[i]), len(targets)
    )

    winners = [o.value.status for o in outcomes if o.ok]
    assert len(winners) == 1
    assert all(isinstance(o.error, InvalidTransition) for o in outcomes if not o.ok)
    assert Job.objects.get(pk=job.pk).status == winners[0]
