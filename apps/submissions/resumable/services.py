"""Writes of resumable uploads: create, append, delete, and the cleanup kind `uploads`.

An append never holds a transaction while it reads the body or writes the disk. It claims the
upload first (a compare-and-set on the saved offset and a free or lapsed claim: of two
concurrent appends at one offset, one claims and the other is refused with the offset), then
writes, and at each checkpoint (every `UPLOAD_CHECKPOINT_BYTES`, at the end, or when the body
breaks off) fsyncs and saves the new offset and digest state in one short transaction that also
admits the bytes against the user's storage limit under their quota lock. So the offset a
client is told always names bytes that are on disk, and the digest state always matches them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.models_utils import new_hex_id
from apps.quotas.exceptions import StorageQuotaExceeded
from apps.quotas.services import quota_policy_lock, storage_quota_error
from apps.submissions.exceptions import (
    TooManyUploads,
    UploadAttached,
    UploadChecksumMismatch,
    UploadCompleted,
    UploadLengthMismatch,
    UploadOffsetMismatch,
    UploadTooLarge,
)
from apps.submissions.metrics import RESUMABLE_BYTES, RESUMABLE_EXPIRIES, RESUMABLE_RESUMES
from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from apps.submissions.resumable.digest import ResumableSha256, empty_state
from apps.submissions.resumable.selectors import (
    upload_expired_ids,
    upload_get,
    upload_open_count,
)
from apps.submissions.selectors import storage_status
from apps.submissions.services.storage import storage_admit

READ_CHUNK = 1024 * 1024


def _expiry(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(hours=float(settings.UPLOAD_EXPIRY_HOURS))


def _lease(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(seconds=float(settings.UPLOAD_WRITE_LEASE_SECONDS))


def max_upload_size() -> int:
    return int(settings.MAX_RESUMABLE_UPLOAD_SIZE)


def _check_length(length: int | None) -> None:
    limit = max_upload_size()
    if length is not None and length > limit:
        raise UploadTooLarge(
            f"Upload-Length {length} is larger than MAX_RESUMABLE_UPLOAD_SIZE ({limit} bytes).",
            extra={"max_size": limit},
        )


def upload_create(
    *, user: AbstractBaseUser, length: int | None, metadata: dict[str, str] | None = None
) -> ResumableUpload:
    """A new, empty upload owned by `user`. Raises UploadTooLarge (over
    MAX_RESUMABLE_UPLOAD_SIZE), StorageQuotaExceeded (a stated length that cannot fit in the
    user's remaining storage; a fast refusal, each append is admitted under the lock) and
    TooManyUploads (UPLOAD_MAX_OPEN_PER_USER open already: counted under the user's quota
    lock, so racing creations never pass it)."""
    _check_length(length)
    if length is not None:
        status = storage_status(user=user)
        if status.used + length > status.limit:
            raise storage_quota_error(used=status.used, limit=status.limit, adding=length)
    upload_id = new_hex_id()
    now = timezone.now()
    limit = int(settings.UPLOAD_MAX_OPEN_PER_USER)
    with transaction.atomic():
        quota_policy_lock(user=user)
        if upload_open_count(user_id=int(user.pk), now=now) >= limit:
            raise TooManyUploads(
                f"You hold {limit} open uploads (UPLOAD_MAX_OPEN_PER_USER): finish, attach "
                "or cancel one, or wait until one expires.",
                extra={"max_open_uploads": limit},
            )
        return ResumableUpload.objects.create(
            id=upload_id,
            owner_id=user.pk,
            length=length,
            sha256_state=empty_state(),
            storage_key=store.upload_key(owner_id=int(user.pk), upload_id=upload_id),
            metadata=metadata or {},
            last_byte_at=now,
            expires_at=_expiry(now),
        )


def upload_start(
    *,
    user: AbstractBaseUser,
    length: int | None,
    metadata: dict[str, str] | None = None,
    first: AppendRequest | None = None,
) -> ResumableUpload:
    """Create an upload (`upload_create`) and, when the creation request brings bytes (or
    ends the upload, draft), append them (`upload_append`); the upload exists even when that
    append is refused or breaks off, so the client resumes it."""
    upload = upload_create(user=user, length=length, metadata=metadata)
    if first is not None:
        upload = upload_append(user=user, upload_id=upload.pk, request=first)
    return upload


@dataclass
class _Append:
    """One append in progress: the claim, the open file and what is saved so far."""

    upload: ResumableUpload
    user: AbstractBaseUser
    token: str
    handle: store.Sink
    digest: ResumableSha256
    saved: int  # the offset saved in the row
    written: int = 0  # bytes written past `saved`, not saved yet
    last_saved_at: float = 0.0

    def save(self, *, complete: bool = False) -> None:
        """Checkpoint: fsync, then save offset + digest state (admitting the bytes)."""
        self.handle.make_durable()
        now = timezone.now()
        new_offset = self.saved + self.written
        fields: dict[str, Any] = {
            "offset": new_offset,
            "sha256_state": self.digest.state(),
            "writer_until": _lease(now),
        }
        if self.written:
            fields.update(last_byte_at=now, expires_at=_expiry(now))
        if complete:
            fields.update(complete=True, sha256=self.digest.hexdigest(), length=new_offset)
        try:
            with transaction.atomic():
                if self.written:
                    storage_admit(user=self.user, adding_bytes=self.written)
                rows = ResumableUpload.objects.filter(
                    pk=self.upload.pk, writer=self.token, offset=self.saved
                ).update(**fields)
        except StorageQuotaExceeded:
            # Refused bytes leave the disk now: no offset covers them, so no limit counts
            # them, and they would stay until the upload expires (concurrent appends, each
            # within the room it measured at its start, pass the limit together).
            self.handle.cut_back(self.saved)
            raise
        if rows != 1:
            raise UploadOffsetMismatch(expected=self.saved, provided=self.saved, busy=True)
        RESUMABLE_BYTES.inc(self.written)
        self.saved, self.written = new_offset, 0
        self.last_saved_at = time.monotonic()
        for name, value in fields.items():
            setattr(self.upload, name, value)
        self.handle.after_save(complete=complete)

    def due(self) -> bool:
        lease = float(settings.UPLOAD_WRITE_LEASE_SECONDS)
        return (
            self.written >= int(settings.UPLOAD_CHECKPOINT_BYTES)
            or self.handle.part_ready()
            or time.monotonic() - self.last_saved_at > lease / 3
        )


def _claim(upload: ResumableUpload, offset: int) -> str:
    """Take the append claim at `offset`, or UploadOffsetMismatch (a wrong offset, or a live
    claim of another request)."""
    token = new_hex_id()
    now = timezone.now()
    rows = (
        ResumableUpload.objects.filter(pk=upload.pk, offset=offset, complete=False)
        .filter(Q(writer="") | Q(writer_until__lt=now))
        .update(writer=token, writer_until=_lease(now))
    )
    if rows != 1:
        current = ResumableUpload.objects.filter(pk=upload.pk).values_list("offset", flat=True)
        expected = current.first()
        if expected is None:
            raise UploadOffsetMismatch(expected=upload.offset, provided=offset, busy=True)
        raise UploadOffsetMismatch(expected=expected, provided=offset, busy=expected == offset)
    return token


def _release(upload_id: str, token: str) -> None:
    ResumableUpload.objects.filter(pk=upload_id, writer=token).update(writer="", writer_until=None)


def _final_length(upload: ResumableUpload, length: int | None, offset: int) -> int | None:
    """The length the upload will have: the one stated before, or the one this request
    states (they must agree, and not be below the stored bytes)."""
    if length is not None:
        _check_length(length)
        if (upload.length is not None and length != upload.length) or length < offset:
            raise UploadLengthMismatch(
                f"Upload-Length {length} contradicts the upload (length "
                f"{upload.length}, {offset} bytes stored).",
                extra={"length": upload.length, "offset": offset},
            )
        if upload.length is None:
            ResumableUpload.objects.filter(pk=upload.pk, length__isnull=True).update(length=length)
            upload.length = length
    return upload.length


class Body(Protocol):
    """A request body read as it arrives (Django's request, or any binary stream)."""

    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class AppendRequest:
    """What an append request says. `complete`: True ends the upload with this body (the
    draft's `Upload-Complete: ?1`), False leaves it open, None ends it when it reaches its
    length (tus). `checksum`: the body's expected sha256 digest (tus checksum extension)."""

    offset: int
    body: Body
    content_length: int | None
    complete: bool | None = None
    length: int | None = None
    checksum: bytes | None = None


def upload_append(
    *, user: AbstractBaseUser, upload_id: str, request: AppendRequest
) -> ResumableUpload:
    """Append the request's body at `request.offset` to the user's upload; return the upload
    as saved.

    Claims the upload (compare-and-set, no lock held while the body is read), writes the
    body in place, and checkpoints as it goes (see the module). A body that breaks off keeps
    what was saved up to its last full chunk, at most what arrived. With a checksum nothing
    is saved before the whole body is checked (a mismatch keeps none of it). Raises NotFound,
    UploadOffsetMismatch, UploadCompleted, UploadLengthMismatch, UploadTooLarge,
    UploadChecksumMismatch, StorageQuotaExceeded (bytes past the limit are dropped),
    UploadStorageUnavailable (S3 did not take a part; the saved offset still names stored
    bytes: the part waits in its local tail file for the next append).
    """
    upload = upload_get(upload_id=upload_id, user=user)
    if upload.complete or upload.attached_at is not None:
        raise UploadCompleted(
            f"Upload {upload.pk} is complete ({upload.offset} bytes).",
            extra={"offset": upload.offset},
        )
    if request.offset != upload.offset:
        raise UploadOffsetMismatch(expected=upload.offset, provided=request.offset)
    length = _final_length(upload, request.length, request.offset)
    if (
        length is not None
        and request.content_length is not None
        and request.offset + request.content_length > length
    ):
        raise UploadLengthMismatch(
            f"The body ({request.content_length} bytes at offset {request.offset}) goes past "
            f"the upload's length {length}.",
            extra={"length": length, "offset": request.offset},
        )
    if request.offset > 0:
        RESUMABLE_RESUMES.inc()
    token = _claim(upload, request.offset)
    try:
        with store.open_sink(upload.storage_key, request.offset) as handle:
            append = _Append(
                upload=upload,
                user=user,
                token=token,
                handle=handle,
                digest=ResumableSha256.from_state(bytes(upload.sha256_state)),
                saved=request.offset,
                last_saved_at=time.monotonic(),
            )
            _write_body(append, request, length)
    finally:
        _release(upload.pk, token)
    upload.writer, upload.writer_until = "", None
    return upload


def _write_body(append: _Append, request: AppendRequest, length: int | None) -> None:
    limit = length if length is not None else max_upload_size()
    budget = storage_status(user=append.user).remaining
    body_hash = hashlib.sha256() if request.checksum is not None else None
    left = request.content_length
    started = append.saved
    broke_off = False
    while left is None or left > 0:
        try:
            chunk = request.body.read(READ_CHUNK if left is None else min(READ_CHUNK, left))
        except OSError:
            chunk, broke_off = b"", True
        if not chunk:
            broke_off = broke_off or left is not None
            break
        total = append.saved + append.written + len(chunk)
        if total > limit:
            append.handle.cut_back(append.saved)
            if length is not None:
                raise UploadLengthMismatch(
                    f"The body goes past the upload's length {length}.",
                    extra={"length": length, "offset": append.saved},
                )
            _check_length(total)
        if total - started > budget:
            append.handle.cut_back(append.saved)
            status = storage_status(user=append.user)
            raise storage_quota_error(used=status.used, limit=status.limit, adding=total - started)
        append.handle.write(chunk)
        append.digest.update(chunk)
        if body_hash is not None:
            body_hash.update(chunk)
        append.written += len(chunk)
        if left is not None:
            left -= len(chunk)
        if append.due():
            _checkpoint_or_renew(append, checked=body_hash is None)
    _finish(append, request, length, body_hash, broke_off=broke_off, started=started)


def _checkpoint_or_renew(append: _Append, *, checked: bool) -> None:
    """Save what arrived; a body still to be checked only renews the claim."""
    if checked:
        append.save()
        return
    now = timezone.now()
    ResumableUpload.objects.filter(pk=append.upload.pk, writer=append.token).update(
        writer_until=_lease(now)
    )
    append.last_saved_at = time.monotonic()


def _finish(
    append: _Append,
    request: AppendRequest,
    length: int | None,
    body_hash: Any,
    *,
    broke_off: bool,
    started: int,
) -> None:
    if body_hash is not None and (broke_off or body_hash.digest() != request.checksum):
        append.handle.cut_back(started)
        if broke_off:
            return
        raise UploadChecksumMismatch(extra={"offset": started})
    end = append.saved + append.written
    if broke_off:
        append.save()
        return
    if request.complete is True and length is not None and end != length:
        append.handle.cut_back(append.saved)
        raise UploadLengthMismatch(
            f"The upload ends at {end} bytes, not at its length {length}.",
            extra={"length": length, "offset": append.saved},
        )
    completes = request.complete is True or (
        request.complete is None and length is not None and end == length
    )
    append.save(complete=completes)


def upload_delete(*, user: AbstractBaseUser, upload_id: str) -> None:
    """Cancel the user's upload: its row goes, then (after commit) its bytes. An attached
    upload's bytes are a file now: UploadAttached. Raises NotFound."""
    upload = upload_get(upload_id=upload_id, user=user, live_only=False)
    if upload.attached_at is not None:
        raise UploadAttached(f"Upload {upload.pk} became a file; delete the file instead.")
    with transaction.atomic():
        rows, _ = ResumableUpload.objects.filter(pk=upload.pk, attached_at__isnull=True).delete()
        if rows:
            transaction.on_commit(partial(store.remove, upload.storage_key))


def uploads_expired_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Cleanup kind `uploads`: uploads not attached within UPLOAD_EXPIRY_HOURS of their last
    byte lose their row and their bytes (each in its own short transaction)."""
    ids = upload_expired_ids(now=now)
    if dry_run:
        return CleanupReport(kind="uploads", count=len(ids), items=ids)
    removed: list[str] = []
    for upload_id in ids:
        if _expired_delete(upload_id, now, store.remove):
            removed.append(upload_id)
            RESUMABLE_EXPIRIES.inc()
    return CleanupReport(kind="uploads", count=len(removed), items=removed)


def _expired_delete(upload_id: str, now: dt.datetime, remove: Callable[[str], None]) -> bool:
    with transaction.atomic():
        upload = (
            ResumableUpload.objects.select_for_update()
            .filter(pk=upload_id, attached_at__isnull=True, expires_at__lte=now)
            .first()
        )
        if upload is None:
            return False
        upload.delete()
        transaction.on_commit(partial(remove, upload.storage_key))
    return True
