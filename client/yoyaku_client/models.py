"""What the API answers, as dataclasses. Each `from_api` reads the documented fields by their
declared types (`yoyaku_client.decode`) and ignores any others, so a newer server does not
break an older client; a field whose reading differs from its type's says so in `api(...)`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

from yoyaku_client.decode import ApiModel, api, decode, parse_time, to_jsonable
from yoyaku_client.record import Record

if TYPE_CHECKING:
    from yoyaku_client.models_other import (
        Claim,
        ClaimRelease,
        JobLogs,
        LeaderboardQuestion,
        LeaderboardRow,
        Life,
        Plan,
        PlanAttempt,
        Quota,
        Regrade,
        ReviewOutcome,
        ReviewQueueEntry,
        ReviewRecord,
        TaskRun,
    )

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


@dataclass(frozen=True, eq=False, repr=False)
class User(ApiModel):
    """A user as the API names one."""

    id: int
    username: str


@dataclass(frozen=True, eq=False, repr=False)
class Me(User):
    """`GET /api/me/`: the token's user."""

    is_staff: bool = False
    is_reviewer: bool = False


@dataclass(frozen=True, eq=False, repr=False)
class FileInfo(ApiModel):
    """A file of a submission."""

    filename: str
    size: int
    sha256: str = field(metadata=api(decode=lowercase))
    uploaded_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
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


@dataclass(frozen=True, eq=False, repr=False)
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


@dataclass(frozen=True, eq=False, repr=False)
class SubmissionPage(Record):
    """A page of `GET /api/submissions/`."""

    count: int
    next_offset: int | None
    results: list[Submission]


@dataclass(frozen=True, eq=False, repr=False)
class JobSubmission(Record):
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


@dataclass(frozen=True, eq=False, repr=False)
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


@dataclass(frozen=True, eq=False, repr=False)
class Reservation(ApiModel):
    """A job slot held by `POST /api/quotas/reservations/` until used, released or expired."""

    reservation_id: str
    state: str
    created_at: dt.datetime | None
    expires_at: dt.datetime | None
    job_id: str


def __getattr__(name: str) -> Any:
    """The models of the other commands (`yoyaku_client.models_other`), defined on first use."""
    if name not in _OTHER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("yoyaku_client.models_other"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_OTHER})


_OTHER = frozenset(
    {
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
    }
)
