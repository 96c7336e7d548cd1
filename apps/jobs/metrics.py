"""Metrics of the jobs app: job submissions with their idempotency keys (SPEC §3)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from apps.core.metrics import count_refusals, counter

P = ParamSpec("P")
R = TypeVar("R")

# Every refusal POST /api/jobs/ can get from the service (SPEC §3, §10, §11.2).
SUBMISSION_REFUSAL_CODES = (
    "invalid_request",
    "invalid_idempotency_key",
    "idempotency_key_mismatch",
    "idempotency_key_reused",
    "idempotency_request_in_progress",
    "not_found",
    "permission_denied",
    "missing_files",
    "invalid_transition",
    "duplicate_in_flight",
    "phase_closed",
    "rate_limited",
    "cost_limit_exceeded",
    "quota_exceeded",
    "reservation_not_active",
)

JOB_SUBMISSIONS = counter(
    "yoyaku_job_submissions_total",
    "Job submissions by outcome: created, replay (a live idempotency key answered with its "
    "job) or the refusal's error code (idempotency_request_in_progress is the in-progress "
    "conflict: another request holds the key).",
    ["outcome"],
    initial=[(code,) for code in ("created", "replay", *SUBMISSION_REFUSAL_CODES)],
)
IDEMPOTENCY_TAKEOVERS = counter(
    "yoyaku_idempotency_takeovers_total",
    "Idempotency-key claims taken over after IDEMPOTENCY_LOCK_TIMEOUT (their request died or "
    "overran).",
)
JOBS_FINISHED = counter(
    "yoyaku_jobs_finished_total",
    "Jobs that reached a final status, by status.",
    ["status"],
    initial=[("completed",), ("failed",), ("cancelled",)],
)


def job_submission_counted(*, created: bool) -> None:
    JOB_SUBMISSIONS.labels("created" if created else "replay").inc()


def job_finished(*, status: str) -> None:
    JOBS_FINISHED.labels(status).inc()


def counts_submission_refusals(function: Callable[P, R]) -> Callable[P, R]:
    """Count a refusal leaving `function` on `yoyaku_job_submissions_total` (once)."""

    @wraps(function)
    def counted(*args: P.args, **kwargs: P.kwargs) -> R:
        with count_refusals(JOB_SUBMISSIONS):
            return function(*args, **kwargs)

    return counted
