"""Admission: the one place that takes a user's concurrent-job slot.

A slot is held by a queued or running job or by an active reservation. Everything that takes
one runs the same locked count-then-insert, here and nowhere else:

- `job_admit` — job submission (`job_submit`, with or without a reservation to consume) and
  the staff regrade (`submission_regrade`, exempt from the daily and cost limits);
- `reservation_reserve` — `POST /api/quotas/reservations/`.

Each runs inside one transaction that (1) locks the user's quota policy row
(`apps.quotas.services.quota_policy_lock`), (2) counts the user's jobs and reservations in a
statement of its own issued after the lock is granted (`apps.jobs.selectors.quota_usage`) and
(3) inserts the job or reservation (and consumes the reservation) before the lock is
released at commit. Counting and inserting are thus serialized per user: no concurrency can
push a user past a limit, on PostgreSQL (row lock) or SQLite (IMMEDIATE transactions).

Quotas own the policies, the limits and the reservation rows; they do not know jobs exist.
This module depends on them, never the other way round.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from apps.core.logcontext import current_request_id
from apps.core.models_utils import new_hex_id
from apps.core.queue import queue_row
from apps.core.sql import ModelInsert
from apps.jobs.admission_function import admit_plain
from apps.jobs.models import Job
from apps.jobs.selectors import QuotaUsage, quota_usage, rate_limit_retry_after
from apps.quotas.exceptions import CostLimitExceeded, RateLimited
from apps.quotas.metrics import quota_denied
from apps.quotas.models import Reservation
from apps.quotas.selectors import (
    QuotaLimits,
    cost_warning,
    format_number,
    quota_limits,
    quota_warnings,
)
from apps.quotas.services import (
    quota_exceeded_error,
    quota_policy_lock,
    reservation_active_lock,
    reservation_consume,
    reservation_create,
)

# The job's INSERT without compiling it every time (every admission runs it).
_JOB_INSERT = ModelInsert(Job)


@dataclass(frozen=True)
class Admitted:
    """A job admission: the new (queued) job and the warnings for its response."""

    job: Job
    quota_warnings: list[str] = field(default_factory=list)
    cost_limit_warning: str | None = None
    # The job's `task` was enqueued by the job's INSERT (its queue row in the same statement).
    enqueued: bool = False


def job_admit(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    config: dict[str, Any],
    resource_class: str,
    cost: float,
    reservation_id: str | None = None,
    exempt_from_daily_and_cost: bool = False,
    insertion: JobInsertion | None = None,
    task: str | None = None,
) -> Admitted:
    """Admit one more job of `user` and insert it (`queued`), or raise the first refusal.

    Must run inside the transaction that creates the job (the caller's `transaction.atomic()`,
    which already holds the submission row): the policy lock is held until it commits. Checks,
    in the SPEC's order: rate limit over the rolling 24 h (RateLimited with `Retry-After`),
    monthly cost (CostLimitExceeded; reaching the limit exactly is allowed), then the
    concurrent slot. With `reservation_id` the reservation must be the user's and active
    (locked; ReservationNotActive otherwise): its slot becomes the job's and it is consumed in
    this transaction, so nothing is counted twice. Without one, active reservations plus
    queued/running jobs must be below the limit (QuotaExceeded).

    `exempt_from_daily_and_cost` (a staff regrade: the platform's decision, not the owner's)
    skips the rate and cost checks; the concurrent limit always holds. Locks, in order: the
    user's policy row, then the reservation row. Not idempotent: each call inserts a job (the
    idempotency key protocol sits in front of it: `insertion`, given, inserts the job and
    binds the key in the same statement where it can).

    On PostgreSQL, for a job without a reservation nor exemption, the lock, the usage's
    count and the job's insert (and the key's bind) are one round trip (`_admit_plain`, a
    function of the database): the insert happens only if the counts are under every limit,
    and the checks run on the counts it read only when it did not. `task` (an
    `apps.core.queue` task taking the job's id): the function also inserts the task's queue
    row when `enqueue_in_transaction` would insert it now (`apps.core.queue.queue_row`), and
    `Admitted.enqueued` says so; otherwise the caller enqueues it.
    """
    now = timezone.now()
    job = Job(
        id=new_hex_id(),
        owner_id=user.pk,
        submission_id=submission_id,
        config=config,
        resource_class=resource_class,
        cost=cost,
        request_id=current_request_id(),
    )
    if (
        insertion is not None
        and reservation_id is None
        and not exempt_from_daily_and_cost
        and connection.vendor == "postgresql"
    ):
        admitted = _admit_plain(user=user, job=job, now=now, insertion=insertion, task=task)
        if admitted is not None:
            return admitted

    limits = quota_limits(policy=quota_policy_lock(user=user))
    usage = quota_usage(user_id=int(user.pk), now=now)
    if not exempt_from_daily_and_cost:
        _check_rate(user=user, limits=limits, usage=usage, now=now)
        _check_cost(limits=limits, usage=usage, cost=cost)

    reservation: Reservation | None = None
    if reservation_id:
        reservation = reservation_active_lock(user=user, reservation_id=reservation_id, now=now)
        concurrent_after = usage.concurrent
    else:
        if usage.concurrent >= limits.max_concurrent_jobs:
            raise quota_exceeded_error(limits.max_concurrent_jobs)
        concurrent_after = usage.concurrent + 1

    if insertion is None:
        _JOB_INSERT.save(job)
    else:
        insertion.job_insert(job, _JOB_INSERT)
    if reservation is not None:
        reservation_consume(reservation=reservation, job_id=job.pk, now=now)
    return _admitted(job, limits=limits, usage=usage, concurrent_after=concurrent_after)


def _admitted(
    job: Job, *, limits: QuotaLimits, usage: QuotaUsage, concurrent_after: int
) -> Admitted:
    cost_after = usage.cost_this_month + job.cost
    return Admitted(
        job=job,
        quota_warnings=quota_warnings(
            limits=limits,
            concurrent=concurrent_after,
            jobs_last_24h=usage.jobs_last_24h + 1,
            cost=cost_after,
        ),
        cost_limit_warning=cost_warning(used=cost_after, limit=limits.monthly_cost_limit),
    )


class JobInsertion(Protocol):
    """How the idempotency protocol inserts the new job (`IdempotentWork`): with the key's
    bind in the same statement where it can."""

    def key_bind(self, job: Job) -> tuple[str, list[Any]] | None: ...

    def job_inserted(self, job: Job, bound: int | None) -> None: ...

    def job_insert(self, job: Job, insert: ModelInsert) -> None: ...


def _admit_plain(
    *, user: AbstractBaseUser, job: Job, now: dt.datetime, insertion: JobInsertion, task: str | None
) -> Admitted | None:
    """PostgreSQL, a job without a reservation nor exemption: lock the policy, count the usage
    and insert `job` only if it is under the rate, cost and concurrent limits, binding the key
    and inserting `task`'s queue row with it, in one round trip
    (`apps.jobs.admission_function`); the refusal, raised from the counts it read, when it
    did not insert. None when the user has no policy row yet (nothing done: the general path
    creates it)."""
    bind = insertion.key_bind(job)
    # `key_bind`'s parameters are `_BIND`'s: the job's id, the key's expiry, its id, its token.
    key = None if bind is None else (bind[1][2], bind[1][3], bind[1][1])
    queued = None if task is None else queue_row(task, job.pk)
    answer = admit_plain(job, now=now, key=key, queued=queued)
    if answer is None:
        return None
    policy, usage, inserted, bound = answer
    limits = quota_limits(policy=policy)
    if not inserted:
        _check_rate(user=user, limits=limits, usage=usage, now=now)
        _check_cost(limits=limits, usage=usage, cost=job.cost)
        if usage.concurrent >= limits.max_concurrent_jobs:
            raise quota_exceeded_error(limits.max_concurrent_jobs)
        # The function decides with the same limits (tests/jobs/test_admission_function.py).
        raise RuntimeError(
            "the admission function refused a job under every limit"
        )  # pragma: no cover
    insertion.job_inserted(job, None if bound is None else int(bound))
    admitted = _admitted(job, limits=limits, usage=usage, concurrent_after=usage.concurrent + 1)
    return replace(admitted, enqueued=queued is not None)


def _check_rate(
    *, user: AbstractBaseUser, limits: QuotaLimits, usage: QuotaUsage, now: dt.datetime
) -> None:
    if usage.jobs_last_24h < limits.max_jobs_per_day:
        return
    retry_after = rate_limit_retry_after(
        user_id=int(user.pk), limit=limits.max_jobs_per_day, now=now
    )
    quota_denied(kind="rate")
    raise RateLimited(
        f"Rate limit exceeded: maximum {limits.max_jobs_per_day} jobs per 24 hours; "
        f"retry in {retry_after} s.",
        extra={"retry_after": retry_after, "max_jobs_per_day": limits.max_jobs_per_day},
        headers={"Retry-After": str(retry_after)},
    )


def _check_cost(*, limits: QuotaLimits, usage: QuotaUsage, cost: float) -> None:
    cost_after = usage.cost_this_month + cost
    if limits.monthly_cost_limit is None or cost_after <= limits.monthly_cost_limit:
        return
    quota_denied(kind="cost")
    raise CostLimitExceeded(
        f"Cost limit exceeded: this job costs {format_number(cost)}, "
        f"{format_number(usage.cost_this_month)} of "
        f"{format_number(limits.monthly_cost_limit)} cost units are used this month.",
        extra={
            "monthly_cost_limit": limits.monthly_cost_limit,
            "cost_this_month": usage.cost_this_month,
            "job_cost": cost,
        },
    )


def reservation_reserve(*, user: AbstractBaseUser, ttl_seconds: float | None = None) -> Reservation:
    """Hold one concurrent-job slot for `ttl_seconds` (default `QUOTA_RESERVATION_TTL`).

    One transaction: locks the user's policy row, counts active reservations + queued/running
    jobs and inserts the reservation only if that count is below the limit (QuotaExceeded
    otherwise). Not idempotent: each call holds a new slot. Must not be called inside a
    transaction that already counted this user's slots.
    """
    ttl = float(settings.QUOTA_RESERVATION_TTL if ttl_seconds is None else ttl_seconds)
    with transaction.atomic():
        limits = quota_limits(policy=quota_policy_lock(user=user))
        now = timezone.now()
        usage = quota_usage(user_id=int(user.pk), now=now)
        if usage.concurrent >= limits.max_concurrent_jobs:
            raise quota_exceeded_error(limits.max_concurrent_jobs)
        return reservation_create(user=user, now=now, ttl_seconds=ttl)
