"""A finished upload read by another app (a bundle apply in the benchmarks app): where its
bytes are, and marking it consumed once they were taken (SPEC §11.5)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.submissions.exceptions import UploadAttached, UploadIncomplete
from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from apps.submissions.resumable.selectors import upload_get


@dataclass(frozen=True)
class UploadSource:
    upload_id: str
    path: Path
    size: int
    sha256: str


def upload_source(*, user: AbstractBaseUser, upload_id: str) -> UploadSource:
    """The user's finished upload as a local file to read (no lock; on S3 a download).
    Raises NotFound, UploadIncomplete, UploadAttached."""
    upload = upload_get(upload_id=upload_id, user=user)
    if upload.attached_at is not None:
        raise UploadAttached(f"Upload {upload.pk} already became a file or a bundle.")
    if not upload.complete:
        raise UploadIncomplete(
            f"Upload {upload.pk} holds {upload.offset} bytes and is not complete.",
            extra={"offset": upload.offset, "length": upload.length},
        )
    return UploadSource(
        upload_id=upload.pk,
        path=store.readable_path(upload.storage_key),
        size=upload.offset,
        sha256=upload.sha256,
    )


def upload_consume(*, user: AbstractBaseUser, upload_id: str) -> bool:
    """Mark the user's finished upload attached (its bytes were copied where they belong) and
    delete its bytes after commit. Compare-and-set: True for the call that consumed it, False
    when it was consumed already (idempotent)."""
    with transaction.atomic():
        upload = ResumableUpload.objects.filter(pk=upload_id, owner_id=user.pk).first()
        if upload is None:
            return False
        rows = ResumableUpload.objects.filter(
            pk=upload.pk, attached_at__isnull=True, complete=True
        ).update(attached_at=timezone.now())
        if rows == 1:
            transaction.on_commit(partial(store.remove, upload.storage_key))
    return rows == 1
