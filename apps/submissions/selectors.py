"""Reads of submissions and their files."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, QuerySet, Sum

from apps.core.selectors import owned_get
from apps.quotas.selectors import quota_limits, quota_policy_get
from apps.submissions.models import (
    ResumableUpload,
    Submission,
    SubmissionFile,
    SubmissionKind,
    SubmissionStatus,
    filename_fold,
)


def submission_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Submission]:
    return Submission.objects.filter(owner_id=user.pk)


def submission_get(
    *,
    submission_id: str,
    user: AbstractBaseUser | AnonymousUser | None = None,
    for_update: bool = False,
) -> Submission:
    """The submission, owned by `user` when given (404 unknown, 403 someone else's).

    With `for_update` the row is locked (call inside `transaction.atomic()`): every write to a
    submission and to its file list serializes on this lock.
    """
    return owned_get(
        Submission.objects.all(),
        lookup={"pk": submission_id},
        user=user,
        label="Submission",
        for_update=for_update,
    )


def submission_file_list(*, submission: Submission) -> QuerySet[SubmissionFile]:
    """Files in upload order."""
    return SubmissionFile.objects.filter(submission=submission).order_by("uploaded_at", "id")


def submission_file_names(*, submission: Submission) -> set[str]:
    return set(
        SubmissionFile.objects.filter(submission=submission).values_list("filename", flat=True)
    )


def submission_missing_files(*, submission: Submission) -> list[str]:
    """The required files (entrypoint, config file) not uploaded yet, in that order. A
    predictions submission requires neither (its files are what is scored)."""
    if submission.kind == SubmissionKind.PREDICTIONS:
        return []
    names = submission_file_names(submission=submission)
    required = [submission.entrypoint, submission.config_file]
    return [name for name in dict.fromkeys(required) if name not in names]


def submission_list_with_files(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Submission]:
    """The user's submissions, newest first, with their files prefetched in upload order."""
    files = SubmissionFile.objects.order_by("uploaded_at", "id")
    return (
        submission_list(user=user)
        .order_by("-created_at", "id")
        .prefetch_related(Prefetch("files", queryset=files))
    )


def submission_file_get_by_name(*, submission: Submission, filename: str) -> SubmissionFile | None:
    """The file whose name is `filename` under `filename_fold` (the rule of the unique
    constraint on `name_folded`)."""
    return SubmissionFile.objects.filter(
        submission=submission, name_folded=filename_fold(filename)
    ).first()


def submission_file_count(*, submission: Submission) -> int:
    return SubmissionFile.objects.filter(submission=submission).count()


def submission_stale_draft_ids(*, older_than: dt.datetime) -> list[str]:
    """Ids of drafts created before `older_than`, oldest first."""
    return list(
        Submission.objects.filter(status=SubmissionStatus.DRAFT, created_at__lt=older_than)
        .order_by("created_at", "id")
        .values_list("id", flat=True)
    )


def submission_storage_bytes(*, user_id: int) -> int:
    """Bytes of every file of the user's submissions (drafts and sealed), as recorded, plus
    the bytes stored so far by their resumable uploads not attached yet (SPEC §11.5)."""
    total = SubmissionFile.objects.filter(submission__owner_id=user_id).aggregate(
        total=Sum("size")
    )["total"]
    pending = ResumableUpload.objects.filter(owner_id=user_id, attached_at__isnull=True).aggregate(
        total=Sum("offset")
    )["total"]
    return int(total or 0) + int(pending or 0)


@dataclass(frozen=True)
class StorageStatus:
    used: int
    limit: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


def storage_status(*, user: AbstractBaseUser | AnonymousUser) -> StorageStatus:
    """Bytes the user stores now (files of all their submissions, drafts and sealed) and their
    limit. No lock: for fast refusals and display; `storage_admit` decides under the lock."""
    limits = quota_limits(policy=quota_policy_get(user=user))
    return StorageStatus(
        used=submission_storage_bytes(user_id=int(cast(int, user.pk))),
        limit=limits.max_storage_bytes,
    )
