"""What the API answers, as dataclasses. Each `from_api` reads the documented fields by their
declared types (`yoyaku_client.decode`) and ignores any others, so a newer server does not
break an older client; a field whose reading differs from its type's says so in `api(...)`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yoyaku_client.decode import ApiModel, api, decode, parse_time, to_jsonable

__all__ = [
    "Claim",
    "ClaimRelease",
    "FileInfo",
    "Job",
    "JobLogs",
    "JobSubmission",
    "LeaderboardQuestion",
    "LeaderboardRow",
    "Life",
    "Me",
    "Plan",
    "PlanAttempt",
    "Quota",
    "Regrade",
    "Reservation",
    "ReviewOutcome",
    "ReviewQueueEntry",
    "ReviewRecord",
    "Submission",
    "SubmissionPage",
    "TaskRun",
    "UploadedFile",
    "User",
    "parse_time",
    "to_jsonable",
]

FINISHED_JOB_STATUSES = frozenset({"completed", "failed", "cancelled"})


def lowercase(value: Any) -> str:
    """A hex digest as the server may case it → lower case ("" when missing)."""
    return "" if value is None else str(value).lower()


def nonempty(value: Any) -> Any:
    """As given, but an empty value (none to report) reads as None."""
    return value or None


def as_given(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class User(ApiModel):
    """A user as the API names one."""

    id: int
    username: str


@dataclass(frozen=True)
class Me(User):
    """`GET /api/me/`: the token's user."""

    is_staff: bool = False
    is_reviewer: bool = False


@dataclass(frozen=True)
class FileInfo(ApiModel):
    """A file of a submission."""

    filename: str
    size: int
    sha256: str = field(metadata=api(decode=lowercase))
    uploaded_at: dt.datetime | None


@dataclass(frozen=True)
class UploadedFile(FileInfo):
    """A file upload's answer; `created` is False when the server already had the same name
    with the same content (a safe retry, answered 200)."""

    created: bool = field(default=True, metadata=api(skip=True))

    @classmethod
    def from_answer(cls, data: Any, *, status_code: int) -> UploadedFile:
        """The answer to a file's upload or attach: the file as `FileInfo` reads it, `created`
        when it was answered 201."""
        info = FileInfo.from_api(data)
        return cls(
            filename=info.filename,
            size=info.size,
            sha256=info.sha256,
            uploaded_at=info.uploaded_at,
            created=status_code == 201,
        )


@dataclass(frozen=True)
class Submission(ApiModel):
    """A submission: a draft while its files arrive, sealed once its job exists."""

    submission_id: str
    user_id: int
    status: str
    entrypoint: str = field(metadata=api(missing="main.py"))
    config_file: str = field(metadata=api(missing="config.yaml"))
    metadata: dict[str, Any]
    question_id: str
    skill: str
    score: float | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    files: list[FileInfo]


@dataclass(frozen=True)
class SubmissionPage:
    """A page of `GET /api/submissions/`."""

    count: int
    next_offset: int | None
    results: list[Submission]


@dataclass(frozen=True)
class JobSubmission:
    """The answer of `POST /api/jobs/`. `idempotent_hit` is True when the key already named a
    job; `attempts` > 1 means the client sent it again (a lost answer, a 5xx, a key in use),
    so a hit then is usually this call's own first attempt."""

    job_id: str
    status: str
    idempotent_hit: bool
    idempotency_key: str = field(metadata=api(skip=True))
    quota_warnings: list[str] = field(default_factory=list)
    cost_limit_warning: str | None = field(default=None, metadata=api(decode=nonempty))
    attempts: int = field(default=1, metadata=api(skip=True))

    @classmethod
    def from_api(cls, data: Mapping[str, Any], *, key: str, attempts: int) -> JobSubmission:
        return decode(cls, data, idempotency_key=key, attempts=attempts)


@dataclass(frozen=True)
class Job(ApiModel):
    """A job: one grading of a submission."""

    job_id: str
    submission_id: str
    status: str
    resource_class: str
    cost: float | None
    config: dict[str, Any]
    error: str
    created_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    #: The submission's status and score (`review_pending`: the score awaits a reviewer).
    submission_status: str = ""
    score: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_JOB_STATUSES

    @property
    def awaiting_review(self) -> bool:
        """The grading ran, and its score waits for a human verdict."""
        return self.submission_status == "review_pending"


@dataclass(frozen=True)
class JobLogs(ApiModel):
    """`GET /api/jobs/{id}/logs/`: the grader's captured output so far."""

    job_id: str
    status: str
    logs: str
    error: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Reservation(ApiModel):
    """A job slot held by `POST /api/quotas/reservations/` until used, released or expired."""

    reservation_id: str
    state: str
    created_at: dt.datetime | None
    expires_at: dt.datetime | None
    job_id: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class LeaderboardRow(ApiModel):
    """One row of a leaderboard."""

    rank: int
    user: User
    score: float
    submission_id: str
    completed_at: dt.datetime | None


@dataclass(frozen=True)
class LeaderboardQuestion(ApiModel):
    """A question that has a leaderboard: its skills, how many users are ranked, the best
    score. `question_id` is empty for submissions sent without one."""

    question_id: str
    skills: list[str]
    users: int
    best_score: float


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Claim(ApiModel):
    """A reviewer's claim on a submission."""

    submission_id: str
    claimed_by: User | None
    claim_expires_at: dt.datetime | None


@dataclass(frozen=True)
class ClaimRelease(ApiModel):
    """The answer to releasing a review claim."""

    submission_id: str
    released: bool


@dataclass(frozen=True)
class ReviewRecord(ApiModel):
    """A human review of a submission."""

    id: str
    verdict: str
    score: float | None
    comment: str
    reviewer: User | None
    created_at: dt.datetime | None


@dataclass(frozen=True)
class ReviewOutcome(ApiModel):
    """The answer to completing a review."""

    submission_id: str
    status: str
    score: float | None
    review: ReviewRecord


@dataclass(frozen=True)
class Regrade(ApiModel):
    """The answer to asking for a regrade."""

    submission_id: str
    status: str
    job_id: str


@dataclass(frozen=True)
class PlanAttempt(ApiModel):
    """One delivery attempt of a plan."""

    number: int
    started_at: dt.datetime | None
    status_code: int | None
    duration_ms: float | None
    error: str
    response_excerpt: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TaskRun(ApiModel):
    """A task run by the task queue."""

    task_id: str
    topic: str
    state: str
