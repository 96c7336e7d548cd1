"""Writes to jobs: idempotent submission, cancellation and status transitions.

A job's status changes only through `JOB_TRANSITIONS` (`job_transition` for a loaded job,
`job_finish` for an active one by id); jobs are created `queued`.

Idempotency keys (per user) are claimed before any work, in a short transaction of their own:
concurrent requests with one key then see the claim and get 409
`idempotency_request_in_progress` instead of racing. The request that holds the claim creates
the job and binds the key to it in one transaction, so a key either names its one job or names
nothing. A request that fails releases its claim (no error is cached: a retry runs every check
again); a request that died leaves a claim that another request takes over after
`IDEMPOTENCY_LOCK_TIMEOUT`, and the dead one, should it wake up, can no longer bind the key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import InvalidRequest, InvalidTransition
from apps.core.logcontext import current_request_id, log_bind
from apps.core.models_utils import new_hex_id
from apps.core.queue import GRADE_JOB, enqueue_on_commit
from apps.core.validation import contains_nul
from apps.jobs.exceptions import (
    DuplicateInFlight,
    IdempotencyKeyMismatch,
    IdempotencyKeyReused,
    IdempotencyRequestInProgress,
    InvalidIdempotencyKey,
    MissingFiles,
)
from apps.jobs.metrics import (
    IDEMPOTENCY_TAKEOVERS,
    counts_submission_refusals,
    job_finished,
    job_submission_counted,
)
from apps.jobs.models import (
    FINISHED_JOB_STATUSES,
    JOB_TRANSITIONS,
    IdempotencyKey,
    Job,
    JobStatus,
)
from apps.jobs.selectors import idempotency_key_lookup, job_get
from apps.quotas.services import quota_admit_job, reservation_consume
from apps.submissions.models import IN_FLIGHT_STATUSES, SubmissionStatus
from apps.submissions.selectors import submission_get, submission_missing_files
from apps.submissions.services import submission_seal_ready, submission_transition

logger = logging.getLogger(__name__)

MAX_KEY_LENGTH = 256


def job_transition(*, job: Job, to: JobStatus, **fields: Any) -> Job:
    """Move a job to `to` (InvalidTransition unless the table allows it).

    Compare-and-set on the status the caller read, so a late or duplicate caller never
    overwrites a newer state. Sets `started_at` on running and `finished_at` on a finished
    status. A finished job stops counting against the concurrent-job quota at once, because
    quota counts are computed from job statuses.
    """
    now = timezone.now()
    values: dict[str, Any] = dict(fields)
    if to == JobStatus.RUNNING and "started_at" not in fields:
        values["started_at"] = now
    if to in FINISHED_JOB_STATUSES and "finished_at" not in fields:
        values["finished_at"] = now
    JOB_TRANSITIONS.move_one(job, to=to, **values)
    if to in FINISHED_JOB_STATUSES:
        transaction.on_commit(partial(job_finished, status=to))
    return job


def job_finish(*, job_id: str, to: JobStatus, **fields: Any) -> bool:
    """Move an active job to the finished status `to` in one compare-and-set UPDATE, from
    whichever active status the transition table allows (`finished_at` set). False, writing
    nothing, when the job is already finished or cannot go to `to` from its status."""
    if to not in FINISHED_JOB_STATUSES:
        raise ValueError(f"{to} is not a finished status")
    values: dict[str, Any] = {**fields}
    values.setdefault("finished_at", timezone.now())
    jobs = Job.objects.filter(pk=job_id)
    # From every status the table allows to reach `to`: only active ones do.
    finished = JOB_TRANSITIONS.move(jobs, to=to, **values) == 1
    if finished:
        transaction.on_commit(partial(job_finished, status=to))
    return finished


def job_logs_progress(*, job_id: str, logs: str) -> bool:
    """Show a running job's output so far (`GET /api/jobs/{id}/logs/` while it runs): one
    conditional UPDATE, only while the job is `running`, so it never touches a finished job's
    final logs (written by `job_finish`). False when the job is not running."""
    return Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(logs=logs) == 1


# --- Idempotency keys --------------------------------------------------------------------------


@counts_submission_refusals
def idempotency_key_resolve(*, body_key: str | None, header_key: str | None) -> str | None:
    """The request's key from the body or the `Idempotency-Key` header (None: no key).

    Raises IdempotencyKeyMismatch when both are given and differ, InvalidIdempotencyKey unless
    the key is 1-256 printable ASCII characters without whitespace.
    """
    if body_key is not None and header_key is not None and body_key != header_key:
        raise IdempotencyKeyMismatch()
    key = body_key if body_key is not None else header_key
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_LENGTH or any(not "!" <= ch <= "~" for ch in key):
        raise InvalidIdempotencyKey()
    if "," in key:
        # HTTP servers join repeated header lines with commas: `k1,k2` is two keys, never one.
        raise InvalidIdempotencyKey(
            "An idempotency key cannot contain a comma (two Idempotency-Key header lines are "
            "joined by a comma): send exactly one key."
        )
    return key


def idempotency_retry_after(*, locked_at: dt.datetime | None, now: dt.datetime) -> int:
    """Seconds a client should wait before retrying a key that another request holds.

    The holder usually finishes within a second or two, so the hint is a short poll
    (IDEMPOTENCY_LOCK_TIMEOUT / 30, at least 1 s: 2 s by default), never later than the moment
    the claim could be taken over (`locked_at` + IDEMPOTENCY_LOCK_TIMEOUT), when a retry is
    sure to get an answer.
    """
    timeout = float(settings.IDEMPOTENCY_LOCK_TIMEOUT)
    poll = max(1, math.ceil(timeout / 30))
    if locked_at is None:
        return poll
    remaining = math.ceil((locked_at + dt.timedelta(seconds=timeout) - now).total_seconds())
    return max(1, min(poll, remaining))


def idempotency_fingerprint(
    *, submission_id: str, config: dict[str, Any], reservation_id: str | None
) -> str:
    """sha256 of the canonical JSON of the payload a key is bound to."""
    canonical = json.dumps(
        {
            "submission_id": submission_id,
            "config": config,
            "reservation_id": reservation_id or None,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class IdempotencyClaim:
    """Either the job a finished key names (`replay`) or a claim this request now holds."""

    key_id: int = 0
    token: str = ""
    replay: Job | None = None


def _claim_or_replay(
    row: IdempotencyKey, *, fingerprint: str, token: str, now: dt.datetime, expires: dt.datetime
) -> IdempotencyClaim:
    """Decide on an existing (locked) key row: replay, refuse, or take it over."""
    if row.expires_at <= now:
        # Past its TTL the key is free: the same key now makes a new job.
        IdempotencyKey.objects.filter(pk=row.pk).update(
            fingerprint=fingerprint,
            job=None,
            lock_token=token,
            locked_at=now,
            created_at=now,
            expires_at=expires,
        )
        return IdempotencyClaim(key_id=row.pk, token=token)
    if row.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    if row.job is not None:
        return IdempotencyClaim(replay=row.job)
    lock_timeout = dt.timedelta(seconds=float(settings.IDEMPOTENCY_LOCK_TIMEOUT))
    if row.locked_at is not None and row.locked_at > now - lock_timeout:
        raise IdempotencyRequestInProgress(
            retry_after=idempotency_retry_after(locked_at=row.locked_at, now=now)
        )
    # The claim's request died (or overran the lock timeout): take it over. Compare-and-set on
    # the old token, so of two requests taking over one dead claim only one succeeds.
    taken = IdempotencyKey.objects.filter(
        pk=row.pk, lock_token=row.lock_token, job__isnull=True
    ).update(lock_token=token, locked_at=now, expires_at=expires)
    if taken != 1:
        # Another request took it over a moment ago: its claim is fresh.
        raise IdempotencyRequestInProgress(
            retry_after=idempotency_retry_after(locked_at=now, now=now)
        )
    logger.warning("idempotency key %s of user %s: stale claim taken over", row.pk, row.user_id)
    IDEMPOTENCY_TAKEOVERS.inc()
    return IdempotencyClaim(key_id=row.pk, token=token)


def idempotency_claim(
    *, user: AbstractBaseUser, key: str, fingerprint: str, ttl_hours: float
) -> IdempotencyClaim:
    """Claim `key` for this request, or return the job it already names.

    Must not be called inside another transaction: the claim is committed before any work
    starts, so concurrent requests with the key see it. A new key is claimed by one INSERT
    (the (user, key) unique constraint decides between racing requests); a finished key is
    answered from a plain read, so replays never queue on a lock; everything else (a live or
    dead claim, an expired key, a lost insert race) is decided on the locked key row. Raises
    IdempotencyKeyReused (the key names another payload) or IdempotencyRequestInProgress (a
    live claim holds it).
    """
    now = timezone.now()
    token = new_hex_id()
    expires = now + dt.timedelta(hours=ttl_hours)
    existing = idempotency_key_lookup(user_id=int(user.pk), key=key, now=now)
    if existing is not None:
        if existing.job is not None and existing.live:
            if existing.fingerprint != fingerprint:
                raise IdempotencyKeyReused()
            return IdempotencyClaim(replay=existing.job)
        return _idempotency_claim_locked(
            user=user, key=key, fingerprint=fingerprint, token=token, now=now, expires=expires
        )
    try:
        return _idempotency_claim_insert(
            user=user, key=key, fingerprint=fingerprint, token=token, now=now, expires=expires
        )
    except IntegrityError:
        # Another request inserted the key first: decide on its row.
        return _idempotency_claim_locked(
            user=user, key=key, fingerprint=fingerprint, token=token, now=now, expires=expires
        )


def _idempotency_claim_insert(
    *,
    user: AbstractBaseUser,
    key: str,
    fingerprint: str,
    token: str,
    now: dt.datetime,
    expires: dt.datetime,
) -> IdempotencyClaim:
    """The one INSERT of a new claim; IntegrityError (in its own savepoint when inside a
    transaction) when the (user, key) row exists already."""
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        created = IdempotencyKey.objects.create(
            user_id=user.pk,
            key=key,
            fingerprint=fingerprint,
            lock_token=token,
            locked_at=now,
            created_at=now,
            expires_at=expires,
        )
    return IdempotencyClaim(key_id=int(created.pk), token=token)


def _idempotency_claim_locked(
    *,
    user: AbstractBaseUser,
    key: str,
    fingerprint: str,
    token: str,
    now: dt.datetime,
    expires: dt.datetime,
) -> IdempotencyClaim:
    with transaction.atomic():
        row = (
            IdempotencyKey.objects.select_for_update(of=("self",))
            .select_related("job")
            .filter(user_id=user.pk, key=key)
            .first()
        )
        if row is not None:
            return _claim_or_replay(
                row, fingerprint=fingerprint, token=token, now=now, expires=expires
            )
        # The row we saw was released (its request failed) meanwhile: claim it afresh.
        try:
            return _idempotency_claim_insert(
                user=user, key=key, fingerprint=fingerprint, token=token, now=now, expires=expires
            )
        except IntegrityError as exc:
            raise IdempotencyRequestInProgress(
                retry_after=idempotency_retry_after(locked_at=now, now=now)
            ) from exc


def idempotency_bind(*, claim: IdempotencyClaim, job: Job, ttl_hours: float) -> None:
    """Bind the claimed key to `job`, in the job's transaction, only while still holding it.

    If the claim was taken over (this request overran `IDEMPOTENCY_LOCK_TIMEOUT`), raises
    IdempotencyRequestInProgress, which rolls the job back: a key never names two jobs.
    """
    expires = timezone.now() + dt.timedelta(hours=ttl_hours)
    # Raw SQL on purpose (once per new job): the ORM spent several times longer compiling this
    # compare-and-set than the database spent running it.
    table = connection.ops.quote_name(IdempotencyKey._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET job_id = %s, lock_token = '', locked_at = NULL, expires_at = %s"  # noqa: S608
            " WHERE id = %s AND lock_token = %s AND job_id IS NULL",
            [job.pk, connection.ops.adapt_datetimefield_value(expires), claim.key_id, claim.token],
        )
        bound = cursor.rowcount
    if bound != 1:
        raise IdempotencyRequestInProgress(
            "This request took too long and another request with the same idempotency key "
            "took over; retry to get its result.",
            retry_after=idempotency_retry_after(locked_at=None, now=expires),
        )


def idempotency_release(*, claim: IdempotencyClaim) -> None:
    """Give up a claim this request still holds, so a retry with the key runs again."""
    IdempotencyKey.objects.filter(
        pk=claim.key_id, lock_token=claim.token, job__isnull=True
    ).delete()


# --- Submission ------------------------------------------------------------------------------


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


@counts_submission_refusals
def job_submit(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    config: dict[str, Any] | None = None,
    reservation_id: str | None = None,
    idempotency_key: str | None = None,
    idempotency_ttl_hours: float | None = None,
) -> SubmitResult:
    """Enqueue a job for a draft submission, exactly once per idempotency key.

    Order of checks (SPEC §3): idempotency lookup (a finished key replays its job: no other
    check can refuse a replay) → submission exists and is the user's (NotFound /
    PermissionDenied) → completeness (MissingFiles) → draft status (InvalidTransition) →
    in-flight dedup (DuplicateInFlight, from the partial unique constraint when the submission
    moves to `pending`) → rate, cost and concurrent quota under the user's policy lock
    (RateLimited, CostLimitExceeded, QuotaExceeded, ReservationNotActive) → create the job,
    consume the reservation, bind the key — one transaction — → enqueue `grade_job` after
    commit. Locks, in order: idempotency key row (own short transaction), then submission row
    → policy row → reservation row. Must not be called inside a transaction.
    """
    config = {} if config is None else config
    resource_class, cost = job_config_cost(config=config)
    ttl_hours = float(
        settings.IDEMPOTENCY_KEY_TTL_HOURS
        if idempotency_ttl_hours is None
        else idempotency_ttl_hours
    )

    claim: IdempotencyClaim | None = None
    if idempotency_key is not None:
        claim = idempotency_claim(
            user=user,
            key=idempotency_key,
            fingerprint=idempotency_fingerprint(
                submission_id=submission_id, config=config, reservation_id=reservation_id
            ),
            ttl_hours=ttl_hours,
        )
        if claim.replay is not None:
            log_bind(job_id=claim.replay.pk)
            job_submission_counted(created=False)
            return SubmitResult(job=claim.replay, created=False)

    try:
        try:
            with transaction.atomic():
                result = _job_create(
                    user=user,
                    submission_id=submission_id,
                    config=config,
                    resource_class=resource_class,
                    cost=cost,
                    reservation_id=reservation_id,
                )
                if claim is not None:
                    idempotency_bind(claim=claim, job=result.job, ttl_hours=ttl_hours)
                enqueue_on_commit(GRADE_JOB, result.job.pk)
        except _InFlightConflict as conflict:
            raise _duplicate_in_flight(submission_id=submission_id) from conflict.__cause__
    except BaseException:
        if claim is not None:
            idempotency_release(claim=claim)
        raise
    log_bind(job_id=result.job.pk, submission_id=submission_id)
    job_submission_counted(created=True)
    logger.info("job %s created for submission %s", result.job.pk, submission_id)
    return result


class _InFlightConflict(Exception):
    """The in-flight constraint refused the fast path's UPDATE (the transaction is aborted)."""


def _duplicate_in_flight(*, submission_id: str) -> DuplicateInFlight:
    """The error for a submission whose (user, question, skill) already has one in flight.

    Read after the refused transaction rolled back: on PostgreSQL nothing can be read inside it.
    """
    submission = submission_get(submission_id=submission_id)
    return DuplicateInFlight(
        "A submission for this question and skill is already pending or processing.",
        extra={"question_id": submission.question_id, "skill": submission.skill},
    )


def _submission_seal(*, user: AbstractBaseUser, submission_id: str) -> None:
    """Move the user's complete draft to `pending`, or raise the SPEC's first failing check.

    One conditional UPDATE when everything holds (the usual case); otherwise the submission is
    locked and checked in order: exists (NotFound) and is the user's (PermissionDenied) →
    completeness (MissingFiles) → draft (InvalidTransition) → in-flight dedup (DuplicateInFlight,
    from the partial unique constraint).
    """
    try:
        if submission_seal_ready(submission_id=submission_id, user_id=int(user.pk)):
            return
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
        raise DuplicateInFlight(
            "A submission for this question and skill is already pending or processing.",
            extra={"question_id": submission.question_id, "skill": submission.skill},
        ) from exc


def _job_create(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    config: dict[str, Any],
    resource_class: str,
    cost: float,
    reservation_id: str | None,
) -> SubmitResult:
    _submission_seal(user=user, submission_id=submission_id)

    now = timezone.now()
    admission = quota_admit_job(user=user, cost=cost, reservation_id=reservation_id, now=now)
    job = Job.objects.create(
        id=new_hex_id(),
        owner_id=user.pk,
        submission_id=submission_id,
        config=config,
        resource_class=resource_class,
        cost=cost,
        request_id=current_request_id(),
    )
    if admission.reservation is not None:
        reservation_consume(reservation=admission.reservation, job_id=job.pk, now=now)
    return SubmitResult(
        job=job,
        created=True,
        quota_warnings=admission.quota_warnings,
        cost_limit_warning=admission.cost_limit_warning,
    )


def job_cancel(*, job_id: str, user: AbstractBaseUser | None = None) -> Job:
    """Cancel a queued or running job; its slot is free at once. Idempotent for cancelled jobs.

    `user` restricts it to the owner (NotFound / PermissionDenied; None = staff). Locks the
    submission row, then the job row (the grading worker's order). The job's submission, if
    `pending` or `processing`, becomes `failed` ("job cancelled") and its processing lease is
    cleared, so a grading worker still running loses the lease and cannot write a result.
    A finished job raises InvalidTransition.
    """
    found = job_get(job_id=job_id, user=user)
    with transaction.atomic():
        submission = submission_get(submission_id=found.submission_id, for_update=True)
        job = job_get(job_id=job_id, for_update=True)
        if job.status == JobStatus.CANCELLED:
            return job
        if job.status in FINISHED_JOB_STATUSES:
            raise InvalidTransition(
                f"Job {job.pk} is {job.status}; a finished job cannot be cancelled.",
                extra={"from_status": job.status, "to_status": JobStatus.CANCELLED.value},
            )
        job_transition(job=job, to=JobStatus.CANCELLED, error="cancelled")
        if submission.status in IN_FLIGHT_STATUSES:
            submission_transition(
                submission=submission,
                to=SubmissionStatus.FAILED,
                status_reason="job cancelled",
                lease_token="",
                lease_expires_at=None,
            )
    return job


def idempotency_keys_purge(*, now: dt.datetime, dry_run: bool = False) -> CleanupReport:
    """Cleanup kind `keys`: delete idempotency keys past their TTL and claims older than
    IDEMPOTENCY_LOCK_TIMEOUT that never bound a job (their request died).

    An expired key is ignored at lookup; a dead claim would be taken over by the next request:
    removing either changes no answer. A dead request that wakes up after its claim was
    removed cannot bind the key (its token is gone) and rolls back. The DELETE repeats the
    condition, so a key renewed meanwhile is kept. `dry_run` lists and deletes nothing.
    """
    lock_timeout = dt.timedelta(seconds=float(settings.IDEMPOTENCY_LOCK_TIMEOUT))
    stale_q = Q(expires_at__lte=now) | Q(job__isnull=True, locked_at__lte=now - lock_timeout)
    rows = list(IdempotencyKey.objects.filter(stale_q).values_list("pk", "user_id", "key"))
    if not dry_run:
        IdempotencyKey.objects.filter(stale_q, pk__in=[pk for pk, _, _ in rows]).delete()
    items = [f"user {user_id}: {key}" for _, user_id, key in rows]
    return CleanupReport(kind="keys", count=len(items), items=items)
