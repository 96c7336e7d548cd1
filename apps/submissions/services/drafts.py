"""A draft and its files: `submission_create` (a new draft with its first files) and
`submission_file_add` (one more file).

Uploads follow one discipline: every byte is checked and stored OUTSIDE any transaction; then a
short transaction locks the submission row (the same lock the jobs app takes to seal it),
re-checks status, count and names, and inserts the row. Whatever is refused after storing has
its stored object deleted, so a failed upload leaves neither a row nor an object.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from apps.core.exceptions import InvalidRequest
from apps.core.models_utils import new_hex_id
from apps.core.validation import NUL_MESSAGE, contains_nul
from apps.quotas.services import storage_quota_error
from apps.submissions.contexts import SubmissionContext, submission_context_resolve
from apps.submissions.exceptions import (
    ChecksumMismatch,
    DuplicateFilename,
    RequestTooLarge,
    SubmissionSealed,
    TooManyFiles,
)
from apps.submissions.metrics import counts_upload_refusals, upload_created, upload_safe_retry
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus, filename_fold
from apps.submissions.selectors import (
    storage_status,
    submission_file_count,
    submission_file_get_by_name,
    submission_get,
)
from apps.submissions.services.storage import storage_admit, stored_delete, stored_save
from apps.submissions.uploads import IncomingFile
from apps.submissions.validation import (
    filename_problem,
    validate_archive,
    validate_extension,
    validate_filename,
    validate_name,
)

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True)
class FileAddResult:
    file: SubmissionFile
    created: bool


def _normalized_checksum(expected: str | None) -> str | None:
    if expected is None:
        return None
    value = expected.strip()
    if not _SHA256.match(value):
        raise InvalidRequest(
            "X-Content-SHA256 must be 64 hexadecimal characters.",
            fields={"X-Content-SHA256": ["Must be 64 hexadecimal characters."]},
        )
    return value.lower()


def _check_checksum(upload: IncomingFile, expected: str | None) -> None:
    if expected is not None and upload.sha256 != expected:
        raise ChecksumMismatch(
            f"'{upload.raw_name}' has SHA-256 {upload.sha256}, not {expected}; nothing was kept.",
            extra={"filename": upload.raw_name, "sha256": upload.sha256, "expected": expected},
        )


def _assert_open(submission: Submission) -> None:
    if submission.status != SubmissionStatus.DRAFT:
        raise SubmissionSealed(
            f"Submission {submission.pk} is {submission.status}: its files can no longer change.",
            extra={"status": submission.status},
        )


def _assert_room(submission: Submission, adding: int = 1) -> None:
    limit = int(settings.MAX_FILES_PER_SUBMISSION)
    if submission_file_count(submission=submission) + adding > limit:
        raise TooManyFiles(
            f"Submission {submission.pk} already holds the maximum of {limit} files.",
            extra={"max_files": limit},
        )


def _assert_storage_room(user: AbstractBaseUser, adding: int) -> None:
    """A fast refusal before anything is stored (no lock; `storage_admit` decides later)."""
    status = storage_status(user=user)
    if status.used + adding > status.limit:
        raise storage_quota_error(used=status.used, limit=status.limit, adding=adding)


def _same_or_duplicate(existing: SubmissionFile, upload: IncomingFile) -> FileAddResult:
    if existing.sha256 == upload.sha256:
        return FileAddResult(file=existing, created=False)
    raise DuplicateFilename(
        f"'{existing.filename}' is already in submission {existing.submission_id} with "
        "different content (names are compared case-insensitively).",
        extra={"filename": upload.raw_name, "existing_filename": existing.filename},
    )


def _file_row_create(
    *, submission: Submission, upload: IncomingFile, stored: str
) -> SubmissionFile:
    return SubmissionFile.objects.create(
        submission=submission,
        filename=upload.raw_name,
        size=upload.size or 0,
        sha256=upload.sha256,
        storage_name=stored,
    )


@counts_upload_refusals
def submission_assert_open_for_upload(*, user: AbstractBaseUser, submission_id: str) -> Submission:
    """The user's submission if it still accepts files (no lock: a fast refusal before the
    body is read). Raises NotFound, PermissionDenied, SubmissionSealed."""
    submission = submission_get(submission_id=submission_id, user=user)
    _assert_open(submission)
    return submission


@counts_upload_refusals
def submission_file_add(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    upload: IncomingFile,
    expected_sha256: str | None = None,
) -> FileAddResult:
    """Add one received file to the user's draft submission.

    Idempotent: re-sending a name with the same content (same sha256) returns the stored file
    with `created=False` and stores nothing. Locks the submission row (after storing, for the
    insert only), so sealing, `MAX_FILES_PER_SUBMISSION` and the case-insensitive unique name
    hold under concurrent uploads; the unique constraint is the last line of defence. Then
    the user's quota policy row (`storage_admit`), so the per-user storage limit holds under
    concurrent uploads too. Raises NotFound, PermissionDenied, SubmissionSealed,
    InvalidFilename, InvalidExtension, ChecksumMismatch, DuplicateFilename, TooManyFiles,
    StorageQuotaExceeded, InvalidArchive, UnsafeArchive, InvalidRequest (malformed
    checksum). A refusal leaves no row and no stored object. Counted on
    `yoyaku_uploads_total` (created, safe_retry or the refusal's code).
    """
    result = _file_add(
        user=user, submission_id=submission_id, upload=upload, expected_sha256=expected_sha256
    )
    if result.created:
        upload_created(sizes=[int(result.file.size)])
    else:
        upload_safe_retry()
    return result


def _file_add(
    *,
    user: AbstractBaseUser,
    submission_id: str,
    upload: IncomingFile,
    expected_sha256: str | None,
) -> FileAddResult:
    validate_name(upload.raw_name)
    # Cheap refusals before anything is stored; all re-checked under the lock below.
    submission = submission_assert_open_for_upload(user=user, submission_id=submission_id)
    validate_extension(upload.raw_name, submission.file_types)
    _check_checksum(upload, _normalized_checksum(expected_sha256))
    existing = submission_file_get_by_name(submission=submission, filename=upload.raw_name)
    if existing is not None:
        return _same_or_duplicate(existing, upload)
    _assert_room(submission)
    _assert_storage_room(user, upload.size or 0)
    validate_archive(path=Path(upload.temporary_file_path()), filename=upload.raw_name)

    stored = stored_save(submission_id=submission.pk, upload=upload)
    try:
        result = _file_insert(user=user, submission_id=submission_id, upload=upload, stored=stored)
    except BaseException:
        stored_delete([stored])
        raise
    if not result.created:
        stored_delete([stored])
    return result


def _file_insert(
    *, user: AbstractBaseUser, submission_id: str, upload: IncomingFile, stored: str
) -> FileAddResult:
    """The locked half of `_file_add`: re-check under the submission's row lock, then insert."""
    with transaction.atomic():
        submission = submission_get(submission_id=submission_id, user=user, for_update=True)
        _assert_open(submission)
        existing = submission_file_get_by_name(submission=submission, filename=upload.raw_name)
        if existing is not None:
            return _same_or_duplicate(existing, upload)
        _assert_room(submission)
        # Lock order: submission row, then the user's quota policy (as job submission).
        storage_admit(user=user, adding_bytes=upload.size or 0)
        try:
            with transaction.atomic():
                row = _file_row_create(submission=submission, upload=upload, stored=stored)
        except IntegrityError as exc:
            raise DuplicateFilename(
                f"'{upload.raw_name}' is already in submission {submission.pk}.",
                extra={"filename": upload.raw_name},
            ) from exc
    return FileAddResult(file=row, created=True)


@counts_upload_refusals
def submission_create(
    *,
    user: AbstractBaseUser,
    uploads: Sequence[IncomingFile],
    entrypoint: str = "main.py",
    config_file: str = "config.yaml",
    metadata: dict[str, Any] | None = None,
    question_id: str = "",
    skill: str = "",
    challenge: str = "",
    phase: str = "",
    expected_sha256: str | None = None,
) -> Submission:
    """Create a draft submission owned by `user` with its first file(s) (bulk mode: several).

    With `challenge` and `phase` (slugs, both or neither) it is a phase submission (SPEC
    §11.2): the registered resolver (`apps.submissions.contexts`) decides first whether the
    user may submit there (its refusals: NotFound, `not_participant`, `phase_closed`) and
    what the submission is; a predictions submission has no entrypoint or config file, and
    its files take the phase's extensions instead of `ALLOWED_UPLOAD_EXTENSIONS`.

    All files are checked, then stored outside any transaction, then the submission and its
    file rows are inserted in one transaction (with the context's `on_created`, the phase's
    entry); any refusal deletes what was stored. Not idempotent (each call is a new
    submission). `expected_sha256` applies to a single file. Raises InvalidRequest,
    InvalidFilename, InvalidExtension, DuplicateFilename (two files of one name),
    TooManyFiles, ChecksumMismatch, InvalidArchive, UnsafeArchive, RequestTooLarge (more than
    `MAX_SUBMISSION_REQUEST_SIZE` bytes of files), StorageQuotaExceeded (decided under the
    user's quota policy lock, so concurrent creates never pass the limit).
    """
    metadata = metadata if metadata is not None else {}
    context = submission_context_resolve(
        user=user, challenge=challenge, phase=phase, question_id=question_id, skill=skill
    )
    if not context.needs_program:
        entrypoint = config_file = ""
    _create_fields_check(
        uploads=uploads,
        program=(entrypoint, config_file) if context.needs_program else None,
        metadata=metadata,
    )
    _create_names_check(uploads, context.file_types)
    _create_checksum_check(uploads, expected_sha256)
    total = _create_size_check(user=user, uploads=uploads)
    for upload in uploads:
        validate_archive(path=Path(upload.temporary_file_path()), filename=upload.raw_name)
    draft = draft_new(
        user=user,
        context=context,
        entrypoint=entrypoint,
        config_file=config_file,
        metadata=metadata,
        question_id=question_id,
        skill=skill,
    )
    _create_store_and_insert(user=user, draft=draft, uploads=uploads, total=total, context=context)
    upload_created(sizes=[upload.size or 0 for upload in uploads])
    return draft


def draft_new(
    *,
    user: AbstractBaseUser,
    context: SubmissionContext,
    entrypoint: str,
    config_file: str,
    metadata: dict[str, Any],
    question_id: str,
    skill: str,
) -> Submission:
    """The unsaved draft row a create inserts (with its files, in `_create_store_and_insert`)."""
    return Submission(
        id=new_hex_id(),
        owner_id=user.pk,
        entrypoint=entrypoint,
        config_file=config_file,
        metadata=metadata,
        question_id=question_id,
        skill=skill,
        kind=context.kind,
        file_types=list(context.file_types),
    )


def _create_fields_check(
    *,
    uploads: Sequence[IncomingFile],
    program: tuple[str, str] | None,
    metadata: Any,
    files_required: bool = True,
) -> None:
    """InvalidRequest naming every bad field: no file (unless `files_required` is False), a bad
    entrypoint or config file name (`program`, None when the submission has neither), NUL in
    the metadata."""
    fields: dict[str, list[str]] = {}
    if files_required and not uploads:
        fields["files"] = ["At least one file is required."]
    for field_name, value in zip(("entrypoint", "config_file"), program or (), strict=False):
        problem = filename_problem(value)
        if problem:
            fields[field_name] = [problem]
    if contains_nul(metadata):
        fields["metadata"] = [NUL_MESSAGE]
    if fields:
        raise InvalidRequest("; ".join(f"{k}: {v[0]}" for k, v in fields.items()), fields=fields)


def _create_names_check(uploads: Sequence[IncomingFile], file_types: Sequence[str]) -> None:
    """TooManyFiles, InvalidFilename, InvalidExtension (against `file_types`, empty:
    `ALLOWED_UPLOAD_EXTENSIONS`), or DuplicateFilename for two files whose names fold alike."""
    limit = int(settings.MAX_FILES_PER_SUBMISSION)
    if len(uploads) > limit:
        raise TooManyFiles(f"A submission holds at most {limit} files.", extra={"max_files": limit})
    seen: dict[str, str] = {}
    for upload in uploads:
        validate_filename(upload.raw_name, file_types)
        folded = filename_fold(upload.raw_name)
        if folded in seen:
            raise DuplicateFilename(
                f"'{upload.raw_name}' and '{seen[folded]}' are the same name "
                "(names are compared case-insensitively).",
                extra={"filename": upload.raw_name, "existing_filename": seen[folded]},
            )
        seen[folded] = upload.raw_name


def _create_checksum_check(uploads: Sequence[IncomingFile], expected_sha256: str | None) -> None:
    expected = _normalized_checksum(expected_sha256)
    if expected is None:
        return
    if len(uploads) != 1:
        raise InvalidRequest(
            "X-Content-SHA256 applies to a request with exactly one file.",
            fields={"X-Content-SHA256": ["Send it with exactly one file."]},
        )
    _check_checksum(uploads[0], expected)


def _create_size_check(*, user: AbstractBaseUser, uploads: Sequence[IncomingFile]) -> int:
    """The request's total bytes, or RequestTooLarge / StorageQuotaExceeded (a fast refusal;
    `storage_admit` decides under the lock)."""
    total = sum(upload.size or 0 for upload in uploads)
    request_limit = int(settings.MAX_SUBMISSION_REQUEST_SIZE)
    if total > request_limit:
        raise RequestTooLarge(
            f"These files hold {total} bytes; one request may carry at most {request_limit}. "
            "Create the submission with the first file and add the others one by one.",
            extra={"max_request_size": request_limit},
        )
    _assert_storage_room(user, total)
    return total


def _create_store_and_insert(
    *,
    user: AbstractBaseUser,
    draft: Submission,
    uploads: Sequence[IncomingFile],
    total: int,
    context: SubmissionContext,
) -> None:
    """Store every file (outside any transaction), then insert the draft and its file rows in
    one transaction under the user's quota policy lock, and run the context's `on_created`
    in it; any failure deletes what was stored."""
    stored: list[str] = []
    try:
        for upload in uploads:
            # One at a time: what was stored before a failure must be deleted.
            stored.append(stored_save(submission_id=draft.pk, upload=upload))  # noqa: PERF401
        with transaction.atomic():
            storage_admit(user=user, adding_bytes=total)
            draft.save(force_insert=True)
            try:
                with transaction.atomic():
                    for upload, name in zip(uploads, stored, strict=True):
                        _file_row_create(submission=draft, upload=upload, stored=name)
            except IntegrityError as exc:
                raise DuplicateFilename(
                    "Two files have the same name (compared case-insensitively)."
                ) from exc
            context.on_created(draft)
    except BaseException:
        stored_delete(stored)
        raise
