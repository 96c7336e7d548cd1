"""A finished resumable upload becomes a submission file (SPEC §11.5): `submission_file_attach`.

The bytes are not copied on local storage nor on S3: the file row names the upload's stored
object (on S3 the completed multipart upload). On another storage without local paths they are
streamed to the submission's key first. The upload
is marked attached in the transaction that inserts the file row, so its bytes stop counting as
an upload exactly when they start counting as the file (the storage sum never sees both).
"""

from __future__ import annotations

from functools import partial

from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.archives import archive_kind
from apps.core.models_utils import new_hex_id
from apps.submissions.exceptions import DuplicateFilename, UploadAttached, UploadIncomplete
from apps.submissions.metrics import counts_upload_refusals, upload_created, upload_safe_retry
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from apps.submissions.resumable import s3parts, store
from apps.submissions.resumable.selectors import upload_get
from apps.submissions.selectors import submission_file_get_by_name, submission_get
from apps.submissions.services.drafts import (
    FileAddResult,
    _assert_open,
    _assert_room,
    submission_assert_open_for_upload,
)
from apps.submissions.services.storage import UPLOAD_PREFIX, stored_delete
from apps.submissions.validation import validate_archive, validate_extension, validate_name


def _same_or_duplicate(existing: SubmissionFile, upload: ResumableUpload) -> FileAddResult:
    if existing.sha256 == upload.sha256:
        return FileAddResult(file=existing, created=False)
    raise DuplicateFilename(
        f"'{existing.filename}' is already in submission {existing.submission_id} with "
        "different content (names are compared case-insensitively).",
        extra={"filename": existing.filename, "existing_filename": existing.filename},
    )


@counts_upload_refusals
def submission_file_attach(
    *, user: AbstractBaseUser, submission_id: str, upload_id: str, filename: str
) -> FileAddResult:
    """Attach the user's finished upload to their draft as the file `filename`.

    Every rule of a sent file applies (name, extension, archive checks, duplicate_filename
    with the same safe retry: the same name with the same sha256 answers the stored file,
    too_many_files, submission_sealed), except the per-request size: the upload is bounded
    by MAX_RESUMABLE_UPLOAD_SIZE and by the storage limit, which its bytes passed as they
    arrived. Locks the submission row (as `submission_file_add`), then marks the upload
    attached with a compare-and-set, so an upload becomes at most one file. Raises NotFound,
    PermissionDenied, SubmissionSealed, InvalidFilename, InvalidExtension, UploadIncomplete,
    UploadAttached, DuplicateFilename, TooManyFiles, InvalidArchive, UnsafeArchive.
    """
    validate_name(filename)
    submission = submission_assert_open_for_upload(user=user, submission_id=submission_id)
    validate_extension(filename, submission.file_types)
    upload = upload_get(upload_id=upload_id, user=user, live_only=False)
    existing = submission_file_get_by_name(submission=submission, filename=filename)
    if upload.attached_at is not None:
        if existing is not None and existing.sha256 == upload.sha256:
            upload_safe_retry()
            return FileAddResult(file=existing, created=False)
        raise UploadAttached(f"Upload {upload.pk} already became a file or a bundle.")
    upload = upload_get(upload_id=upload_id, user=user)
    if not upload.complete:
        raise UploadIncomplete(
            f"Upload {upload.pk} holds {upload.offset} of "
            f"{upload.length if upload.length is not None else 'an unknown number of'} bytes.",
            extra={"offset": upload.offset, "length": upload.length},
        )
    if existing is not None:
        result = _same_or_duplicate(existing, upload)
        upload_safe_retry()
        return result
    _assert_room(submission)
    store.finish(upload.storage_key)
    if archive_kind(filename) is not None:
        validate_archive(path=store.readable_path(upload.storage_key), filename=filename)
    stored = _stored_name(submission_id=submission.pk, upload=upload, filename=filename)
    try:
        result = _attach_insert(
            user=user, submission=submission, upload=upload, stored=stored, filename=filename
        )
    except BaseException:
        if stored != upload.storage_key:
            stored_delete([stored])
        raise
    upload_created(sizes=[int(result.file.size)])
    return result


def _stored_name(*, submission_id: str, upload: ResumableUpload, filename: str) -> str:
    """The upload's own object where storage has local paths or is S3 (the completed
    multipart upload is the object); else a copy streamed to the submission's key."""
    if store.storage_has_paths() or s3parts.is_s3():
        return upload.storage_key
    path = store.local_path(upload.storage_key)
    key = f"{UPLOAD_PREFIX}/{submission_id}/{new_hex_id()}/{filename}"
    with path.open("rb") as handle:
        return storages["default"].save(key, File(handle))


def _attach_insert(
    *,
    user: AbstractBaseUser,
    submission: Submission,
    upload: ResumableUpload,
    stored: str,
    filename: str,
) -> FileAddResult:
    with transaction.atomic():
        locked = submission_get(submission_id=submission.pk, user=user, for_update=True)
        _assert_open(locked)
        existing = submission_file_get_by_name(submission=locked, filename=filename)
        if existing is not None:
            return _same_or_duplicate(existing, upload)
        _assert_room(locked)
        rows = ResumableUpload.objects.filter(
            pk=upload.pk, attached_at__isnull=True, complete=True
        ).update(attached_at=timezone.now())
        if rows != 1:
            raise UploadAttached(f"Upload {upload.pk} already became a file or a bundle.")
        try:
            with transaction.atomic():
                row = SubmissionFile.objects.create(
                    submission=locked,
                    filename=filename,
                    size=upload.offset,
                    sha256=upload.sha256,
                    storage_name=stored,
                )
        except IntegrityError as exc:
            raise DuplicateFilename(
                f"'{filename}' is already in submission {locked.pk}.",
                extra={"filename": filename},
            ) from exc
        if stored != upload.storage_key:
            transaction.on_commit(partial(store.remove, upload.storage_key))
        elif s3parts.is_s3():
            transaction.on_commit(partial(store.remove_local, upload.storage_key))
    return FileAddResult(file=row, created=True)
