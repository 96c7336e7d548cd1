"""Job submission: `POST /api/jobs/` from the idempotency key to the queued job.

`job_submit` runs the SPEC's order of checks. The key protocol is in
`apps.jobs.services.idempotency`, the quota decision and the job's insert in
`apps.jobs.admission`; this module seals the submission and ties them into one transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError
from django.utils import timezone

from apps.core.exceptions import InvalidRequest, InvalidTransition
from apps.core.logcontext import log_bind
from apps.core.queue import GRADE_JOB, enqueue_in_transaction
from apps.core.validation import contains_nul
from apps.jobs.admission import job_admit
from apps.jobs.admission_checks import AdmissionCandidate, admission_checks_run
from apps.jobs.exceptions import DuplicateInFlight, MissingFiles
from apps.jobs.metrics import counts_submission_refusals, job_submission_counted
from apps.jobs.models import Job
from apps.jobs.services.idempotency import (
    IdempotentWork,
    idempotency_fingerprint,
    idempotency_key_resolve,
    idempotent_transaction,
)
from apps.submissions.models import Submission, SubmissionStatus
from apps.submissions.selectors import submission_get, submission_missing_files
from apps.submissions.services.transitions import (
    submission_seal_ready_kind,
    submission_transition,
)

logger = logging.getLogger(__name__)


def job_config_cost(*, config: dict[str, Any]) -> tuple[str, float]:
    """`(resource_class, cost)` of a job config (InvalidRequest on a bad config).

    `config.resource_class` defaults to `DEFAULT_RESOURCE_CLASS`; it must name a class of
    `RESOURCE_CLASS_COSTS`.
    """
    if contains_nul(config):
        raise InvalidRequest(
            "config: NUL characters are not allowed.",
            fields={"config": ["NUL characters are not allowed."]},
        )
    costs: dict[str, float] = settings.RESOURCE_CLASS_COSTS
    resource_class = config.get("resource_class", settings.DEFAULT_RESOURCE_CLASS)
    if not isinstance(resource_class, str) or resource_class not in costs:
        message = f"resource_class must be one of: {', '.join(sorted(costs))}."
        raise InvalidRequest(f"config: {message}", fields={"config": [message]})
    return resource_class, float(costs[resource_class])


@dataclass(frozen=True)
class SubmitResult:
    job: Job
    created: bool
    quota_warnings: list[str] = field(default_factory=list)
    cost_limit_warning: str | None = None
    # `grade_job` was enqueued with the job's INSERT (`job_admit`'s `task`).
    enqueued: bool = False


@counts_submission_refusals
def job_submit(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    config: dict[str, Any] | None = None,
    reservation_id: str | None = None,
    idempotency_key: str | None = None,
    idempotency_key_header: str | None = None,
    idempotency_ttl_hours: float | None = None,
) -> SubmitResult:
    """Enqueue a job for a draft submission, exactly once per idempotency key.

    The key is the body's `idempotency_key` or the `Idempotency-Key` header's
    (`idempotency_key_header`): both given and different is IdempotencyKeyMismatch, a
    malformed one InvalidIdempotencyKey (`idempotency_key_resolve`). Order of checks (SPEC
    §3): the key → the config (InvalidRequest) → idempotency lookup (a finished key replays
    its job: no other check can refuse a replay) → submission exists and is the user's
    (NotFound / PermissionDenied) → completeness (MissingFiles) → draft status
    (InvalidTransition) → in-flight dedup (DuplicateInFlight, from the partial unique
    constraint when the submission moves to `pending`) → the checks other apps registered for
    the submission's kind (`apps.jobs.admission_checks`: a phase's `phase_closed`, its team
    limits) → rate, cost and concurrent quota under
    the user's policy lock (RateLimited, CostLimitExceeded, QuotaExceeded,
    ReservationNotActive) → create the job, consume the reservation, bind the key, enqueue
    `grade_job` (the ORM broker's queue row; another broker's after commit) — one
    transaction (`idempotent_transaction`). Locks, in
    order: idempotency key row (own short transaction), then submission row → policy row →
    reservation row. Must not be called inside a transaction. On PostgreSQL with the ORM broker
    the queue row is written by the job's own INSERT statement (`job_admit`'s `task`).
    """
    key = idempotency_key_resolve(body_key=idempotency_key, header_key=idempotency_key_header)
    config = {} if config is None else config
    resource_class, cost = job_config_cost(config=config)
    ttl_hours = float(
        settings.IDEMPOTENCY_KEY_TTL_HOURS
        if idempotency_ttl_hours is None
        else idempotency_ttl_hours
    )
    fingerprint = idempotency_fingerprint(
        submission_id=submission_id, config=config, reservation_id=reservation_id
    )
    try:
        with idempotent_transaction(
            user=user, key=key, fingerprint=fingerprint, ttl_hours=ttl_hours
        ) as work:
            if work.replay is not None:
                log_bind(job_id=work.replay.pk)
                job_submission_counted(created=False)
                return SubmitResult(job=work.replay, created=False)
            result = _job_create(
                work,
                user=user,
                submission_id=submission_id,
                config=config,
                resource_class=resource_class,
                cost=cost,
                reservation_id=reservation_id,
            )
            if not result.enqueued:
                enqueue_in_transaction(GRADE_JOB, result.job.pk)
    except _InFlightConflict as conflict:
        submission = submission_get(submission_id=submission_id)
        raise _duplicate_in_flight(submission) from conflict.__cause__
    log_bind(job_id=result.job.pk, submission_id=submission_id)
    job_submission_counted(created=True)
    logger.info("job %s created for submission %s", result.job.pk, submission_id)
    return result


class _InFlightConflict(Exception):
    """The in-flight constraint refused the fast path's UPDATE (the transaction is aborted:
    on PostgreSQL nothing can be read inside it, so the error is described after rollback)."""


def _duplicate_in_flight(submission: Submission) -> DuplicateInFlight:
    """The error for a submission whose (user, question, skill) already has one in flight."""
    return DuplicateInFlight(
        "A submission for this question and skill is already pending or processing.",
        extra={"question_id": submission.question_id, "skill": submission.skill},
    )


def _submission_seal(*, user: AbstractBaseUser, submission_id: str) -> str:
    """Move the user's complete draft to `pending`, or raise the SPEC's first failing check;
    the submission's kind.

    One conditional UPDATE when everything holds (the usual case); otherwise the submission is
    locked and checked in order: exists (NotFound) and is the user's (PermissionDenied) →
    completeness (MissingFiles) → draft (InvalidTransition) → in-flight dedup (DuplicateInFlight,
    from the partial unique constraint).
    """
    try:
        kind = submission_seal_ready_kind(submission_id=submission_id, user_id=int(user.pk))
        if kind is not None:
            return kind
    except IntegrityError as exc:
        # Owner, completeness and draft status held (the UPDATE matched the row): only the
        # in-flight constraint can refuse it. Described once the transaction is rolled back.
        raise _InFlightConflict() from exc

    submission = submission_get(submission_id=submission_id, user=user, for_update=True)
    missing = submission_missing_files(submission=submission)
    if missing:
        labels = {submission.entrypoint: "entrypoint", submission.config_file: "config file"}
        raise MissingFiles(
            "; ".join(f"{labels.get(name, 'file')} not found: {name}" for name in missing),
            extra={"missing_files": missing},
        )

    if submission.status != SubmissionStatus.DRAFT:
        raise InvalidTransition(
            f"Submission {submission.pk} is {submission.status}: a job is enqueued only for a "
            "draft submission (a new attempt is a new submission).",
            extra={"from_status": submission.status, "to_status": SubmissionStatus.PENDING.value},
        )
    # No savepoint needed: a violation aborts the whole job transaction anyway.
    try:
        submission_transition(submission=submission, to=SubmissionStatus.PENDING)
    except IntegrityError as exc:
        raise _duplicate_in_flight(submission) from exc
    return submission.kind


def _job_create(
    work: IdempotentWork,
    *,
    user: AbstractBaseUser,
    submission_id: str,
    config: dict[str, Any],
    resource_class: str,
    cost: float,
    reservation_id: str | None,
) -> SubmitResult:
    kind = _submission_seal(user=user, submission_id=submission_id)
    admission_checks_run(
        AdmissionCandidate(user=user, submission_id=submission_id, kind=kind, now=timezone.now())
    )
    admitted = job_admit(
        user=user,
        submission_id=submission_id,
        config=config,
        resource_class=resource_class,
        cost=cost,
        reservation_id=reservation_id,
        insertion=work,
        task=GRADE_JOB,
    )
    return SubmitResult(
        job=admitted.job,
        created=True,
        quota_warnings=admitted.quota_warnings,
        cost_limit_warning=admitted.cost_limit_warning,
        enqueued=admitted.enqueued,
    )
