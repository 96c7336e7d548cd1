"""The answers of the commands other than `submit` (tokens, logs, quota, the leaderboard,
review, schedules), as dataclasses read as `yoyaku_client.models` reads its own. Defined on
their first use through `yoyaku_client.models` (`models.Life`, `from yoyaku_client.models
import Life`), so that a submission does not build them: each dataclass costs its methods'
compilation when its class statement runs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from yoyaku_client.decode import ApiModel, api
from yoyaku_client.models import User, as_given

__all__ = [
    "ApiToken",
    "Claim",
    "ClaimRelease",
    "JobLogs",
    "LeaderboardQuestion",
    "LeaderboardRow",
    "Life",
    "Plan",
    "PlanAttempt",
    "Quota",
    "Regrade",
    "ReviewOutcome",
    "ReviewQueueEntry",
    "ReviewRecord",
    "TaskRun",
]


@dataclass(frozen=True, eq=False, repr=False)
class JobLogs(ApiModel):
    """`GET /api/jobs/{id}/logs/`: the grader's captured output so far."""

    job_id: str
    status: str
    logs: str
    error: str


@dataclass(frozen=True, eq=False, repr=False)
class Quota(ApiModel):
    """`GET /api/quotas/me/`: your limits and what you use of them."""

    max_concurrent_jobs: int
    active_jobs: int
    active_reservations: int
    available_slots: int
    max_jobs_per_day: int
    jobs_last_24h: int
    monthly_cost_limit: float | None
    cost_this_month: float
    storage_bytes: int | None
    max_storage_bytes: int | None
    warnings: list[str]


@dataclass(frozen=True, eq=False, repr=False)
class ApiToken(ApiModel):
    """An API token of yours. `token` (the secret) is set only in the answer that created it:
    the server keeps a hash and can never show it again."""

    id: str
    name: str
    scopes: list[str]
    expires_at: dt.datetime | None
    created_at: dt.datetime | None = None
    last_used_at: dt.datetime | None = None
    token: str | None = field(default=None, metadata=api(decode=as_given))


@dataclass(frozen=True, eq=False, repr=False)
class LeaderboardRow(ApiModel):
    """One row of a leaderboard."""

    rank: int
    user: User
    score: float
    submission_id: str
    completed_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class LeaderboardQuestion(ApiModel):
    """A question that has a leaderboard: its skills, how many users are ranked, the best
    score. `question_id` is empty for submissions sent without one."""

    question_id: str
    skills: list[str]
    users: int
    best_score: float


@dataclass(frozen=True, eq=False, repr=False)
class ReviewQueueEntry(ApiModel):
    """A submission awaiting a human review."""

    submission_id: str = field(metadata=api(key="id"))
    owner: User | None
    question_id: str
    skill: str
    score: float | None
    created_at: dt.datetime | None
    claimed_by: User | None
    claim_expires_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class Claim(ApiModel):
    """A reviewer's claim on a submission."""

    submission_id: str
    claimed_by: User | None
    claim_expires_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class ClaimRelease(ApiModel):
    """The answer to releasing a review claim."""

    submission_id: str
    released: bool


@dataclass(frozen=True, eq=False, repr=False)
class ReviewRecord(ApiModel):
    """A human review of a submission."""

    id: str
    verdict: str
    score: float | None
    comment: str
    reviewer: User | None
    created_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class ReviewOutcome(ApiModel):
    """The answer to completing a review."""

    submission_id: str
    status: str
    score: float | None
    review: ReviewRecord


@dataclass(frozen=True, eq=False, repr=False)
class Regrade(ApiModel):
    """The answer to asking for a regrade."""

    submission_id: str
    status: str
    job_id: str


@dataclass(frozen=True, eq=False, repr=False)
class PlanAttempt(ApiModel):
    """One delivery attempt of a plan."""

    number: int
    started_at: dt.datetime | None
    status_code: int | None
    duration_ms: float | None
    error: str
    response_excerpt: str


@dataclass(frozen=True, eq=False, repr=False)
class Plan(ApiModel):
    """One plan of a Life (its birth or its death): when it is due and how its action went."""

    kind: str
    time: dt.datetime | None
    due_at: dt.datetime | None
    state: str
    attempts_count: int
    webhook_id: str
    action: dict[str, Any]
    attempts: list[PlanAttempt]


@dataclass(frozen=True, eq=False, repr=False)
class Life(ApiModel):
    """A schedule booking: a point Life has a birth plan, a term Life a birth and a
    death plan."""

    life_uuid: str
    schedule_type: str
    resource_id: str
    state: str
    birth_time: dt.datetime | None
    death_time: dt.datetime | None
    birth_action: dict[str, Any] | None
    death_action: dict[str, Any] | None
    owner: User | None
    plans: list[Plan]
    created_at: dt.datetime | None
    updated_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class TaskRun(ApiModel):
    """A task run by the task queue."""

    task_id: str
    topic: str
    state: str
