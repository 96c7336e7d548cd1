"""Who may read a submission — its files, their bytes, archive members and its jobs' logs.

One rule, asked by every view that shows a submission's content (the submissions API, the
review API, the job logs):

- its owner;
- staff;
- a reviewer (`apps.core.permissions.user_is_reviewer`) while the submission awaits review
  (`review_pending`: anyone who may claim it must be able to read it first), or at any time
  once they have held its claim or recorded a verdict on it (a reviewer can read again what
  they judged, not what other reviewers judged since).

Everyone else gets PermissionDenied (403 `permission_denied`), never the data. Reading is not
acting: a reviewer reads their own submission as its owner, and the rules that stop a reviewer
acting on their own submission (`own_submission`) are the review services', unchanged.

A token reads as the owner with `read`; as a reviewer or staff member (someone else's
submission) it also needs `review` (`READER_SCOPE`), checked by the views.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from apps.core.exceptions import PermissionDenied
from apps.core.permissions import user_is_reviewer
from apps.core.readers import READER_SCOPE
from apps.core.selectors import owned_get
from apps.jobs.models import Job
from apps.review.models import ReviewClaim, ReviewRecord
from apps.submissions.models import Submission, SubmissionStatus

__all__ = ["READER_SCOPE", "Readable", "Reader", "job_get_readable", "submission_get_readable"]


class Reader(enum.Enum):
    OWNER = "owner"
    STAFF = "staff"
    REVIEWER = "reviewer"


@dataclass(frozen=True)
class Readable:
    submission: Submission
    reader: Reader

    @property
    def as_owner(self) -> bool:
        return self.reader is Reader.OWNER


def submission_reader(*, submission: Submission, user: AbstractBaseUser) -> Reader | None:
    """How `user` may read `submission` (None: not at all). Reads only."""
    if submission.owner_id == user.pk:
        return Reader.OWNER
    if getattr(user, "is_staff", False):
        return Reader.STAFF
    if not user_is_reviewer(user):
        return None
    if submission.status == SubmissionStatus.REVIEW_PENDING:
        return Reader.REVIEWER
    judged = ReviewRecord.objects.filter(submission=submission, reviewer_id=user.pk).exists()
    if judged or ReviewClaim.objects.filter(submission=submission, reviewer_id=user.pk).exists():
        return Reader.REVIEWER
    return None


def submission_get_readable(*, submission_id: str, user: AbstractBaseUser) -> Readable:
    """The submission and how `user` reads it. NotFound (unknown id), PermissionDenied (403:
    `user` may not read it)."""
    submission = owned_get(
        Submission.objects.select_related("owner"),
        lookup={"pk": submission_id},
        user=None,
        label="Submission",
    )
    reader = submission_reader(submission=submission, user=user)
    if reader is None:
        raise PermissionDenied("This submission belongs to another user.")
    return Readable(submission, reader)


def job_get_readable(*, job_id: str, user: AbstractBaseUser) -> tuple[Job, Readable]:
    """The job and how `user` reads its submission (the job's logs are the submission's
    grading output). NotFound, PermissionDenied (403)."""
    job = owned_get(
        Job.objects.select_related("submission"), lookup={"pk": job_id}, user=None, label="Job"
    )
    if job.owner_id == user.pk:
        return job, Readable(job.submission, Reader.OWNER)
    reader = submission_reader(submission=job.submission, user=user)
    if reader is None:
        raise PermissionDenied("This job belongs to another user.")
    return job, Readable(job.submission, reader)
