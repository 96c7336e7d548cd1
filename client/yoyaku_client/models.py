"""What the API answers, as dataclasses. Each `from_api` reads the documented fields and
ignores any others, so a newer server does not break an older client."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    "to_jsonable",
]

FINISHED_JOB_STATUSES = frozenset({"completed", "failed", "cancelled"})


def parse_time(value: Any) -> dt.datetime | None:
    """ISO 8601 with offset (the API's format) → aware datetime; None stays None."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.endswith("Z"):  # fromisoformat reads "Z" only from Python 3.11 on
        text = text[:-1] + "+00:00"
    return dt.datetime.fromisoformat(text)


def _str(data: Mapping[str, Any], name: str, default: str = "") -> str:
    value = data.get(name)
    return default if value is None else str(value)


def _float(data: Mapping[str, Any], name: str) -> float | None:
    value = data.get(name)
    return None if value is None else float(value)


def _int(data: Mapping[str, Any], name: str, default: int = 0) -> int:
    value = data.get(name)
    return default if value is None else int(value)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, lists and dicts → JSON-ready values (what `--json` prints)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class User:
    id: int
    username: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> User:
        return cls(id=_int(data, "id"), username=_str(data, "username"))

    @classmethod
    def maybe(cls, data: Any) -> User | None:
        return cls.from_api(data) if isinstance(data, Mapping) else None


@dataclass(frozen=True)
class Me(User):
    is_staff: bool = False
    is_reviewer: bool = False

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Me:
        return cls(
            id=_int(data, "id"),
            username=_str(data, "username"),
            is_staff=bool(data.get("is_staff")),
            is_reviewer=bool(data.get("is_reviewer")),
        )


@dataclass(frozen=True)
class FileInfo:
    filename: str
    size: int
    sha256: str
    uploaded_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> FileInfo:
        return cls(
            filename=_str(data, "filename"),
            size=_int(data, "size"),
            sha256=_str(data, "sha256").lower(),
            uploaded_at=parse_time(data.get("uploaded_at")),
        )


@dataclass(frozen=True)
class UploadedFile(FileInfo):
    """A file upload's answer; `created` is False when the server already had the same name
    with the same content (a safe retry, answered 200)."""

    created: bool = True


@dataclass(frozen=True)
class Submission:
    submission_id: str
    user_id: int
    status: str
    entrypoint: str
    config_file: str
    metadata: dict[str, Any]
    question_id: str
    skill: str
    score: float | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    files: list[FileInfo]

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Submission:
        metadata = data.get("metadata")
        return cls(
            submission_id=_str(data, "submission_id"),
            user_id=_int(data, "user_id"),
            status=_str(data, "status"),
            entrypoint=_str(data, "entrypoint", "main.py"),
            config_file=_str(data, "config_file", "config.yaml"),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            question_id=_str(data, "question_id"),
            skill=_str(data, "skill"),
            score=_float(data, "score"),
            created_at=parse_time(data.get("created_at")),
            updated_at=parse_time(data.get("updated_at")),
            files=[FileInfo.from_api(f) for f in data.get("files") or []],
        )


@dataclass(frozen=True)
class SubmissionPage:
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
    idempotency_key: str
    quota_warnings: list[str] = field(default_factory=list)
    cost_limit_warning: str | None = None
    attempts: int = 1

    @classmethod
    def from_api(cls, data: Mapping[str, Any], *, key: str, attempts: int) -> JobSubmission:
        return cls(
            job_id=_str(data, "job_id"),
            status=_str(data, "status"),
            idempotent_hit=bool(data.get("idempotent_hit")),
            idempotency_key=key,
            quota_warnings=[str(w) for w in data.get("quota_warnings") or []],
            cost_limit_warning=data.get("cost_limit_warning") or None,
            attempts=attempts,
        )


@dataclass(frozen=True)
class Job:
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

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Job:
        config = data.get("config")
        return cls(
            job_id=_str(data, "job_id"),
            submission_id=_str(data, "submission_id"),
            status=_str(data, "status"),
            resource_class=_str(data, "resource_class"),
            cost=_float(data, "cost"),
            config=dict(config) if isinstance(config, Mapping) else {},
            error=_str(data, "error"),
            created_at=parse_time(data.get("created_at")),
            started_at=parse_time(data.get("started_at")),
            finished_at=parse_time(data.get("finished_at")),
            submission_status=_str(data, "submission_status"),
            score=_float(data, "score"),
        )


@dataclass(frozen=True)
class JobLogs:
    job_id: str
    status: str
    logs: str
    error: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> JobLogs:
        return cls(
            job_id=_str(data, "job_id"),
            status=_str(data, "status"),
            logs=_str(data, "logs"),
            error=_str(data, "error"),
        )


@dataclass(frozen=True)
class Quota:
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

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Quota:
        return cls(
            max_concurrent_jobs=_int(data, "max_concurrent_jobs"),
            active_jobs=_int(data, "active_jobs"),
            active_reservations=_int(data, "active_reservations"),
            available_slots=_int(data, "available_slots"),
            max_jobs_per_day=_int(data, "max_jobs_per_day"),
            jobs_last_24h=_int(data, "jobs_last_24h"),
            monthly_cost_limit=_float(data, "monthly_cost_limit"),
            cost_this_month=_float(data, "cost_this_month") or 0.0,
            storage_bytes=None
            if data.get("storage_bytes") is None
            else _int(data, "storage_bytes"),
            max_storage_bytes=(
                None if data.get("max_storage_bytes") is None else _int(data, "max_storage_bytes")
            ),
            warnings=[str(w) for w in data.get("warnings") or []],
        )


@dataclass(frozen=True)
class Reservation:
    reservation_id: str
    state: str
    created_at: dt.datetime | None
    expires_at: dt.datetime | None
    job_id: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Reservation:
        return cls(
            reservation_id=_str(data, "reservation_id"),
            state=_str(data, "state"),
            created_at=parse_time(data.get("created_at")),
            expires_at=parse_time(data.get("expires_at")),
            job_id=_str(data, "job_id"),
        )


@dataclass(frozen=True)
class ApiToken:
    """An API token of yours. `token` (the secret) is set only in the answer that created it:
    the server keeps a hash and can never show it again."""

    id: str
    name: str
    scopes: list[str]
    expires_at: dt.datetime | None
    created_at: dt.datetime | None = None
    last_used_at: dt.datetime | None = None
    token: str | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ApiToken:
        return cls(
            id=_str(data, "id"),
            name=_str(data, "name"),
            scopes=[str(s) for s in data.get("scopes") or []],
            expires_at=parse_time(data.get("expires_at")),
            created_at=parse_time(data.get("created_at")),
            last_used_at=parse_time(data.get("last_used_at")),
            token=data.get("token"),
        )


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    user: User
    score: float
    submission_id: str
    completed_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> LeaderboardRow:
        return cls(
            rank=_int(data, "rank"),
            user=User.from_api(data.get("user") or {}),
            score=_float(data, "score") or 0.0,
            submission_id=_str(data, "submission_id"),
            completed_at=parse_time(data.get("completed_at")),
        )


@dataclass(frozen=True)
class LeaderboardQuestion:
    """A question that has a leaderboard: its skills, how many users are ranked, the best
    score. `question_id` is empty for submissions sent without one."""

    question_id: str
    skills: list[str]
    users: int
    best_score: float

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> LeaderboardQuestion:
        return cls(
            question_id=_str(data, "question_id"),
            skills=[str(x) for x in data.get("skills") or []],
            users=_int(data, "users"),
            best_score=_float(data, "best_score") or 0.0,
        )


@dataclass(frozen=True)
class ReviewQueueEntry:
    submission_id: str
    owner: User | None
    question_id: str
    skill: str
    score: float | None
    created_at: dt.datetime | None
    claimed_by: User | None
    claim_expires_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ReviewQueueEntry:
        return cls(
            submission_id=_str(data, "id"),
            owner=User.maybe(data.get("owner")),
            question_id=_str(data, "question_id"),
            skill=_str(data, "skill"),
            score=_float(data, "score"),
            created_at=parse_time(data.get("created_at")),
            claimed_by=User.maybe(data.get("claimed_by")),
            claim_expires_at=parse_time(data.get("claim_expires_at")),
        )


@dataclass(frozen=True)
class Claim:
    submission_id: str
    claimed_by: User | None
    claim_expires_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Claim:
        return cls(
            submission_id=_str(data, "submission_id"),
            claimed_by=User.maybe(data.get("claimed_by")),
            claim_expires_at=parse_time(data.get("claim_expires_at")),
        )


@dataclass(frozen=True)
class ClaimRelease:
    submission_id: str
    released: bool

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ClaimRelease:
        return cls(submission_id=_str(data, "submission_id"), released=bool(data.get("released")))


@dataclass(frozen=True)
class ReviewRecord:
    id: str
    verdict: str
    score: float | None
    comment: str
    reviewer: User | None
    created_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ReviewRecord:
        return cls(
            id=_str(data, "id"),
            verdict=_str(data, "verdict"),
            score=_float(data, "score"),
            comment=_str(data, "comment"),
            reviewer=User.maybe(data.get("reviewer")),
            created_at=parse_time(data.get("created_at")),
        )


@dataclass(frozen=True)
class ReviewOutcome:
    submission_id: str
    status: str
    score: float | None
    review: ReviewRecord

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ReviewOutcome:
        return cls(
            submission_id=_str(data, "submission_id"),
            status=_str(data, "status"),
            score=_float(data, "score"),
            review=ReviewRecord.from_api(data.get("review") or {}),
        )


@dataclass(frozen=True)
class Regrade:
    submission_id: str
    status: str
    job_id: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Regrade:
        return cls(
            submission_id=_str(data, "submission_id"),
            status=_str(data, "status"),
            job_id=_str(data, "job_id"),
        )


@dataclass(frozen=True)
class PlanAttempt:
    number: int
    started_at: dt.datetime | None
    status_code: int | None
    duration_ms: float | None
    error: str
    response_excerpt: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> PlanAttempt:
        code = data.get("status_code")
        return cls(
            number=_int(data, "number"),
            started_at=parse_time(data.get("started_at")),
            status_code=None if code is None else int(code),
            duration_ms=_float(data, "duration_ms"),
            error=_str(data, "error"),
            response_excerpt=_str(data, "response_excerpt"),
        )


@dataclass(frozen=True)
class Plan:
    kind: str
    time: dt.datetime | None
    due_at: dt.datetime | None
    state: str
    attempts_count: int
    webhook_id: str
    action: dict[str, Any]
    attempts: list[PlanAttempt]

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Plan:
        action = data.get("action")
        return cls(
            kind=_str(data, "kind"),
            time=parse_time(data.get("time")),
            due_at=parse_time(data.get("due_at")),
            state=_str(data, "state"),
            attempts_count=_int(data, "attempts_count"),
            webhook_id=_str(data, "webhook_id"),
            action=dict(action) if isinstance(action, Mapping) else {},
            attempts=[PlanAttempt.from_api(a) for a in data.get("attempts") or []],
        )


@dataclass(frozen=True)
class Life:
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

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Life:
        birth, death = data.get("birth_action"), data.get("death_action")
        return cls(
            life_uuid=_str(data, "life_uuid"),
            schedule_type=_str(data, "schedule_type"),
            resource_id=_str(data, "resource_id"),
            state=_str(data, "state"),
            birth_time=parse_time(data.get("birth_time")),
            death_time=parse_time(data.get("death_time")),
            birth_action=dict(birth) if isinstance(birth, Mapping) else None,
            death_action=dict(death) if isinstance(death, Mapping) else None,
            owner=User.maybe(data.get("owner")),
            plans=[Plan.from_api(p) for p in data.get("plans") or []],
            created_at=parse_time(data.get("created_at")),
            updated_at=parse_time(data.get("updated_at")),
        )


@dataclass(frozen=True)
class TaskRun:
    task_id: str
    topic: str
    state: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> TaskRun:
        return cls(
            task_id=_str(data, "task_id"), topic=_str(data, "topic"), state=_str(data, "state")
        )
