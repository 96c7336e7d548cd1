"""Reads of the review app: the review queue, claims, a submission as a reviewer sees it and
the leaderboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from apps.grading.models import GradingAttempt
from apps.grading.selectors import grading_attempt_list, grading_review_requested_at
from apps.jobs.models import Job
from apps.review.models import ReviewClaim
from apps.submissions.files import MemberListing, submission_file_members
from apps.submissions.models import (
    Submission,
    SubmissionFile,
    SubmissionKind,
    SubmissionStatus,
)
from apps.submissions.selectors import submission_file_list


def review_queue(*, now: datetime | None = None, limit: int = 100) -> QuerySet[Submission]:
    """review_pending submissions: unclaimed (or claim expired) first, then oldest first.

    Each row has `claim_live` and, when the claim is live, `claim_reviewer_id` and
    `claim_expires_at` — a claim's expiry is decided here, at query time.
    """
    moment = now or timezone.now()
    live = ReviewClaim.objects.filter(submission_id=OuterRef("pk"), expires_at__gt=moment)
    return (
        Submission.objects.filter(status=SubmissionStatus.REVIEW_PENDING)
        .select_related("owner")
        .annotate(
            claim_live=Exists(live),
            claim_reviewer_id=Subquery(live.values("reviewer_id")[:1], output_field=IntegerField()),
            claim_expires_at=Subquery(live.values("expires_at")[:1], output_field=DateTimeField()),
            claim_order=Case(
                When(claim_live=True, then=Value(1)), default=Value(0), output_field=IntegerField()
            ),
        )
        .order_by("claim_order", "created_at", "id")[:limit]
    )


def users_by_id(ids: set[int]) -> dict[int, Any]:
    user_model = get_user_model()
    return {u.pk: u for u in user_model.objects.filter(pk__in=ids)}


def _ranked() -> QuerySet[Submission]:
    """What the question/skill leaderboard ranks: completed, scored program submissions."""
    return Submission.objects.filter(
        status=SubmissionStatus.COMPLETED, score__isnull=False, kind=SubmissionKind.PROGRAM
    )


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    user: Any
    score: float
    submission_id: str
    completed_at: datetime


def leaderboard_best(
    *, question_id: str | None, skill: str | None, limit: int = 100
) -> QuerySet[Submission]:
    """Each user's best completed submission, best first (one SQL query, see `leaderboard`).
    Only program submissions: a phase submission is ranked by its phase (SPEC §11.3)."""
    rows = _ranked()
    if question_id is not None:
        rows = rows.filter(question_id=question_id)
    if skill is not None:
        rows = rows.filter(skill=skill)
    return (
        rows.annotate(
            best_rank=Window(
                RowNumber(),
                partition_by=[F("owner_id")],
                order_by=[F("score").desc(), F("completed_at").asc(), F("id").asc()],
            )
        )
        .filter(best_rank=1)
        .select_related("owner")
        .order_by("-score", "completed_at", "id")[:limit]
    )


def leaderboard(
    *, question_id: str | None, skill: str | None, limit: int = 100
) -> list[LeaderboardRow]:
    """Best completed score per user, ranked; ties go to the earlier completion.

    One query: a ROW_NUMBER() window per owner picks each user's best submission (the filter
    on question_id, skill, status is served by the `submissions_leaderboard` index), the outer
    query orders and limits. Ranks are 1..n in that order.
    """
    best = leaderboard_best(question_id=question_id, skill=skill, limit=limit)
    return [
        LeaderboardRow(
            rank=index,
            user=row.owner,
            score=float(row.score or 0.0),
            submission_id=row.pk,
            completed_at=row.completed_at or row.updated_at,
        )
        for index, row in enumerate(best, start=1)
    ]


@dataclass(frozen=True)
class LeaderboardQuestion:
    question_id: str
    skills: list[str]
    users: int
    best_score: float


def leaderboard_questions(*, limit: int = 1000) -> list[LeaderboardQuestion]:
    """The questions that have a leaderboard: those with at least one completed, scored
    submission, by question id. Only what the leaderboard itself shows is read (completed and
    scored), so a draft's or a failed submission's question id is never listed. Two queries,
    served by the `submissions_leaderboard` index."""
    ranked = _ranked()
    questions = list(
        ranked.values("question_id")
        .annotate(users=Count("owner_id", distinct=True), best=Max("score"))
        .order_by("question_id")[:limit]
    )
    skills: dict[str, list[str]] = {}
    names = [q["question_id"] for q in questions]
    pairs = (
        ranked.filter(question_id__in=names)
        .values_list("question_id", "skill")
        .distinct()
        .order_by("question_id", "skill")
    )
    for question_id, skill in pairs:
        skills.setdefault(question_id, []).append(skill)
    return [
        LeaderboardQuestion(
            question_id=q["question_id"],
            skills=skills.get(q["question_id"], []),
            users=int(q["users"]),
            best_score=float(q["best"] or 0.0),
        )
        for q in questions
    ]


def review_queue_stats() -> tuple[int, datetime | None]:
    """(submissions in review_pending, when the oldest entered it), one aggregate over the
    partial index `submissions_review_pending`."""
    row = Submission.objects.filter(status=SubmissionStatus.REVIEW_PENDING).aggregate(
        n=Count("pk"), oldest=Min("updated_at")
    )
    return int(row["n"] or 0), row["oldest"]


def review_entered_at(*, submission_id: str) -> datetime | None:
    """When the submission last entered review_pending: the end of its grading attempt that
    sent it there."""
    return grading_review_requested_at(submission_id=submission_id)


# Files a reviewer sees inline: text kinds up to this size; others by name, size and hash.
REVIEW_TEXT_SUFFIXES = (".py", ".yaml", ".yml", ".txt", ".json", ".md", ".cfg", ".toml")
REVIEW_TEXT_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class ReviewFile:
    id: int
    filename: str
    size: int
    sha256: str
    text: str | None  # the content of a small text file, else None
    members: MemberListing | None  # an archive's members, None for another file


@dataclass(frozen=True)
class ReviewDetail:
    """What a reviewer needs to give a verdict: the submission, its files (an archive's
    members listed), the grader's output and every grading attempt."""

    submission: Submission
    files: list[ReviewFile]
    job: Job | None  # the latest job: its logs and error
    attempts: list[GradingAttempt]


def _inline_text(file: SubmissionFile) -> str | None:
    if not file.filename.lower().endswith(REVIEW_TEXT_SUFFIXES):
        return None
    if file.size > REVIEW_TEXT_MAX_BYTES:
        return None
    try:
        with default_storage.open(file.storage_name, "rb") as handle:
            raw: bytes = handle.read(REVIEW_TEXT_MAX_BYTES + 1)
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def review_detail(*, submission: Submission) -> ReviewDetail:
    """Reads only (storage included, no transaction) of a submission the caller may read
    (`apps.review.access`)."""
    files = [
        ReviewFile(
            id=file.pk,
            filename=file.filename,
            size=file.size,
            sha256=file.sha256,
            text=_inline_text(file),
            members=submission_file_members(file=file),
        )
        for file in submission_file_list(submission=submission)
    ]
    job = Job.objects.filter(submission=submission).order_by("-created_at", "-id").first()
    attempts = grading_attempt_list(submission_id=submission.pk)
    return ReviewDetail(submission=submission, files=files, job=job, attempts=attempts)
