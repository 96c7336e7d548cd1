"""Writes to submissions. A status changes only through `SUBMISSION_TRANSITIONS`:
`submission_transition` / `submission_transition_where`, and the job submission's raw-SQL seal
(`submission_seal_ready`, draft → pending), which asks the same table first.

Uploads follow one discipline: every byte is checked and stored OUTSIDE any transaction; then a
short transaction locks the submission row (the same lock the jobs app takes to seal it),
re-checks status, count and names, and inserts the row. Whatever is refused after storing has
its stored object deleted, so a failed upload leaves neither a row nor an object.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import Storage, storages
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import InvalidRequest, NotFound
from apps.core.models_utils import new_hex_id
from apps.core.sql import SqlStatement
from apps.core.validation import NUL_MESSAGE, contains_nul
from apps.quotas.selectors import quota_limits
from apps.quotas.services import quota_policy_lock, storage_quota_error
from apps.submissions.exceptions import (
    ChecksumMismatch,
    DuplicateFilename,
    RequestTooLarge,
    SubmissionSealed,
    TooManyFiles,
)
from apps.submissions.metrics import counts_upload_refusals, upload_created, upload_safe_retry
from apps.submissions.models import (
    SUBMISSION_TRANSITIONS,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    filename_fold,
)
from apps.submissions.selectors import (
    storage_status,
    submission_file_count,
    submission_file_get_by_name,
    submission_get,
    submission_stale_draft_ids,
    submission_storage_bytes,
)
from apps.submissions.uploads import IncomingFile
from apps.submissions.validation import filename_problem, validate_archive, validate_filename

logger = logging.getLogger(__name__)

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def submission_transition(
    *, submission: Submission, to: SubmissionStatus, **fields: Any
) -> Submission:
    """Move a submission to `to` (raising InvalidTransition unless the table allows it).

    Compare-and-set: the row is updated only if it is still in the status the caller read, so
    a stale caller can never overwrite a newer state; a lost race raises InvalidTransition.
    Call it with the row locked (`submission_get(for_update=True)`) when other fields depend
    on what was read. `fields` are written in the same UPDATE.
    """
    values = _transition_values(to=to, fields=fields)
    return SUBMISSION_TRANSITIONS.move_one(submission, to=to, **values)


def _transition_values(*, to: SubmissionStatus, fields: dict[str, Any]) -> dict[str, Any]:
    now = timezone.now()
    values: dict[str, Any] = {"updated_at": now, **fields}
    if to == SubmissionStatus.COMPLETED and "completed_at" not in fields:
        values["completed_at"] = now
    return values


def submission_transition_where(
    *,
    submission_id: str,
    old: SubmissionStatus,
    to: SubmissionStatus,
    where: dict[str, Any],
    **fields: Any,
) -> bool:
    """`submission_transition` without reading the row first: one compare-and-set UPDATE that
    also matches `where` (e.g. the grading lease's token). False, writing nothing, when the row
    is no longer in `old` or no longer matches; InvalidTransition when the table forbids it."""
    values = _transition_values(to=to, fields=fields)
    rows = Submission.objects.filter(pk=submission_id, **where)
    return SUBMISSION_TRANSITIONS.move(rows, old=old, to=to, **values) == 1


# Raw SQL on purpose: the ORM spent several times longer compiling this UPDATE (two correlated
# EXISTS) than the database spent running it, on the hottest write path (docs/benchmarks.md).
_SEAL_READY = SqlStatement(
    "UPDATE {s} SET {s.status} = %s, {s.updated_at} = %s"
    " WHERE {s.id} = %s AND {s.owner} = %s AND {s.status} = %s"
    " AND EXISTS (SELECT 1 FROM {f} f WHERE f.{f.submission} = {s}.{s.id}"
    " AND f.{f.filename} = {s}.{s.entrypoint})"
    " AND EXISTS (SELECT 1 FROM {f} f WHERE f.{f.submission} = {s}.{s.id}"
    " AND f.{f.filename} = {s}.{s.config_file})",
    s=Submission,
    f=SubmissionFile,
)


def submission_seal_ready(*, submission_id: str, user_id: int) -> bool:
    """Move the user's complete draft `submission_id` to `pending` in one conditional UPDATE.

    The fast path of job submission: True when the row was the user's, a draft, and had its
    entrypoint and config file, and is now `pending` (row locked until the transaction ends).
    False changes nothing: the caller then runs the locked path (`submission_get(for_update)`,
    then the checks in the SPEC's order) to raise the right error. A concurrent upload can only
    add files, and entrypoint and config file never change, so a stale read here can only make
    it return False, never seal an incomplete submission. Raises IntegrityError when the
    in-flight constraint refuses the move (on PostgreSQL that aborts the transaction).
    """
    if contains_nul(submission_id):
        return False
    # The same table as every other status change: draft → pending.
    SUBMISSION_TRANSITIONS.assert_allowed(SubmissionStatus.DRAFT, SubmissionStatus.PENDING)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [SubmissionStatus.PENDING.value, now, submission_id, user_id]
    return _SEAL_READY.rowcount([*params, SubmissionStatus.DRAFT.value]) == 1


@dataclass(frozen=True)
class FileAddResult:
    file: SubmissionFile
    created: bool


def _storage() -> Storage:
    return storages["default"]


UPLOAD_PREFIX = "submissions"


def _store(*, submission_id: str, upload: IncomingFile) -> str:
    """Write the upload to storage under a key the server builds; return the stored name.

    The key is `submissions/<submission id>/<attempt id>/<file name>`: each attempt owns its
    object, so deleting a refused attempt's object can never remove another attempt's file,
    even on S3 where "create if absent" is not atomic. FileSystemStorage moves the temporary
    file into place (no copy); S3 streams it in multipart chunks.
    """
    key = f"{UPLOAD_PREFIX}/{submission_id}/{new_hex_id()}/{upload.raw_name}"
    upload.seek(0)
    return _storage().save(key, upload)


def _delete_stored(names: Sequence[str]) -> None:
    storage = _storage()
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            logger.exception("Could not delete stored upload %s", name)


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
    validate_filename(upload.raw_name)
    _check_checksum(upload, _normalized_checksum(expected_sha256))
    # Cheap refusals before anything is stored; all re-checked under the lock below.
    submission = submission_assert_open_for_upload(user=user, submission_id=submission_id)
    existing = submission_file_get_by_name(submission=submission, filename=upload.raw_name)
    if existing is not None:
        return _same_or_duplicate(existing, upload)
    _assert_room(submission)
    _assert_storage_room(user, upload.size or 0)
    validate_archive(path=Path(upload.temporary_file_path()), filename=upload.raw_name)

    stored = _store(submission_id=submission.pk, upload=upload)
    try:
        with transaction.atomic():
            submission = submission_get(submission_id=submission_id, user=user, for_update=True)
            _assert_open(submission)
            existing = submission_file_get_by_name(submission=submission, filename=upload.raw_name)
            if existing is not None:
                result = _same_or_duplicate(existing, upload)
            else:
                _assert_room(submission)
                # Lock order: submission row, then the user's quota policy (as job submission).
                storage_admit(user=user, adding_bytes=upload.size or 0)
                try:
                    with transaction.atomic():
                        row = SubmissionFile.objects.create(
                            submission=submission,
                            filename=upload.raw_name,
                            size=upload.size or 0,
                            sha256=upload.sha256,
                            storage_name=stored,
                        )
                except IntegrityError as exc:
                    raise DuplicateFilename(
                        f"'{upload.raw_name}' is already in submission {submission.pk}.",
                        extra={"filename": upload.raw_name},
                    ) from exc
                result = FileAddResult(file=row, created=True)
    except BaseException:
        _delete_stored([stored])
        raise
    if not result.created:
        _delete_stored([stored])
    return result


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
    expected_sha256: str | None = None,
) -> Submission:
    """Create a draft submission owned by `user` with its first file(s) (bulk mode: several).

    All files are checked, then stored outside any transaction, then the submission and its
    file rows are inserted in one transaction; any refusal deletes what was stored. Not
    idempotent (each call is a new submission). `expected_sha256` applies to a single file.
    Raises InvalidRequest, InvalidFilename, InvalidExtension, DuplicateFilename (two files of
    one name), TooManyFiles, ChecksumMismatch, InvalidArchive, UnsafeArchive, RequestTooLarge
    (more than `MAX_SUBMISSION_REQUEST_SIZE` bytes of files), StorageQuotaExceeded (decided
    under the user's quota policy lock, so concurrent creates never pass the limit).
    """
    metadata = metadata if metadata is not None else {}
    fields: dict[str, list[str]] = {}
    if not uploads:
        fields["files"] = ["At least one file is required."]
    for field_name, value in (("entrypoint", entrypoint), ("config_file", config_file)):
        problem = filename_problem(value)
        if problem:
            fields[field_name] = [problem]
    if contains_nul(metadata):
        fields["metadata"] = [NUL_MESSAGE]
    if fields:
        raise InvalidRequest("; ".join(f"{k}: {v[0]}" for k, v in fields.items()), fields=fields)

    limit = int(settings.MAX_FILES_PER_SUBMISSION)
    if len(uploads) > limit:
        raise TooManyFiles(f"A submission holds at most {limit} files.", extra={"max_files": limit})
    seen: dict[str, str] = {}
    for upload in uploads:
        validate_filename(upload.raw_name)
        folded = filename_fold(upload.raw_name)
        if folded in seen:
            raise DuplicateFilename(
                f"'{upload.raw_name}' and '{seen[folded]}' are the same name "
                "(names are compared case-insensitively).",
                extra={"filename": upload.raw_name, "existing_filename": seen[folded]},
            )
        seen[folded] = upload.raw_name
    expected = _normalized_checksum(expected_sha256)
    if expected is not None:
        if len(uploads) != 1:
            raise InvalidRequest(
                "X-Content-SHA256 applies to a request with exactly one file.",
                fields={"X-Content-SHA256": ["Send it with exactly one file."]},
            )
        _check_checksum(uploads[0], expected)
    total = sum(upload.size or 0 for upload in uploads)
    request_limit = int(settings.MAX_SUBMISSION_REQUEST_SIZE)
    if total > request_limit:
        raise RequestTooLarge(
            f"These files hold {total} bytes; one request may carry at most {request_limit}. "
            "Create the submission with the first file and add the others one by one.",
            extra={"max_request_size": request_limit},
        )
    _assert_storage_room(user, total)
    for upload in uploads:
        validate_archive(path=Path(upload.temporary_file_path()), filename=upload.raw_name)

    submission_id = new_hex_id()
    stored: list[str] = []
    try:
        for upload in uploads:
            # One at a time: what was stored before a failure must be deleted.
            stored.append(_store(submission_id=submission_id, upload=upload))  # noqa: PERF401
        with transaction.atomic():
            storage_admit(user=user, adding_bytes=total)
            submission = Submission.objects.create(
                id=submission_id,
                owner_id=user.pk,
                entrypoint=entrypoint,
                config_file=config_file,
                metadata=metadata,
                question_id=question_id,
                skill=skill,
            )
            try:
                with transaction.atomic():
                    for upload, name in zip(uploads, stored, strict=True):
                        SubmissionFile.objects.create(
                            submission=submission,
                            filename=upload.raw_name,
                            size=upload.size or 0,
                            sha256=upload.sha256,
                            storage_name=name,
                        )
            except IntegrityError as exc:
                raise DuplicateFilename(
                    "Two files have the same name (compared case-insensitively)."
                ) from exc
    except BaseException:
        _delete_stored(stored)
        raise
    upload_created(sizes=[upload.size or 0 for upload in uploads])
    return submission


def submission_delete(*, submission_id: str, drafts_only: bool = False) -> list[str] | None:
    """Delete a submission with its file rows (and jobs, by cascade), then, after commit, its
    stored objects.

    Locks the submission. Returns None and changes nothing when it no longer exists, or when
    `drafts_only` and it is not a draft any more (so it never races a job that is sealing it).
    Returns the stored names removed.
    """
    with transaction.atomic():
        try:
            submission = submission_get(submission_id=submission_id, for_update=True)
        except NotFound:
            return None
        if drafts_only and submission.status != SubmissionStatus.DRAFT:
            return None
        names = list(
            SubmissionFile.objects.filter(submission=submission).values_list(
                "storage_name", flat=True
            )
        )
        submission.delete()
        transaction.on_commit(partial(_delete_stored, names))
    return names


def submission_draft_delete(*, submission_id: str) -> list[str] | None:
    """`submission_delete` for a draft only (see there)."""
    return submission_delete(submission_id=submission_id, drafts_only=True)


def submission_drafts_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Cleanup kind `drafts`: drafts created more than `SUBMISSION_DRAFT_TTL_DAYS` ago are
    deleted with their stored files (each in its own short transaction). `dry_run` lists them."""
    older_than = now - dt.timedelta(days=float(settings.SUBMISSION_DRAFT_TTL_DAYS))
    ids = submission_stale_draft_ids(older_than=older_than)
    if dry_run:
        return CleanupReport(kind="drafts", count=len(ids), items=ids)
    removed: list[str] = []
    for submission_id in ids:
        names = submission_draft_delete(submission_id=submission_id)
        if names is not None:
            removed.append(f"{submission_id} ({len(names)} files)")
    return CleanupReport(kind="drafts", count=len(removed), items=removed)


# --- Grading lease -----------------------------------------------------------------------------
# The lease columns (`lease_token`, `lease_expires_at`, `attempts`) belong to the submission; the
# grading app takes, renews, releases and ends a lease only through these functions. Each is one
# compare-and-set UPDATE on (status, token), so a worker that lost its lease writes nothing.


def submission_lease_take(
    *, submission: Submission, token: str, expires_at: dt.datetime
) -> Submission:
    """pending → processing under a new lease (`token` until `expires_at`), attempts + 1.

    Call it with the row locked; raises InvalidTransition when the row changed since it was read.
    """
    return submission_transition(
        submission=submission,
        to=SubmissionStatus.PROCESSING,
        lease_token=token,
        lease_expires_at=expires_at,
        attempts=submission.attempts + 1,
        status_reason="",
    )


def submission_lease_take_over(
    *, submission_id: str, old_token: str, token: str, expires_at: dt.datetime
) -> bool:
    """Replace the expired lease `old_token` of a processing submission with a new one,
    attempts + 1. False, writing nothing, when the row is not processing under `old_token`."""
    return (
        Submission.objects.filter(
            pk=submission_id, status=SubmissionStatus.PROCESSING, lease_token=old_token
        ).update(
            lease_token=token,
            lease_expires_at=expires_at,
            attempts=F("attempts") + 1,
            updated_at=timezone.now(),
        )
        == 1
    )


def submission_lease_renew(*, submission_id: str, token: str, expires_at: dt.datetime) -> bool:
    """Push the expiry of the lease `token` to `expires_at` while it is still the submission's;
    False once it is not (taken over, cancelled, result written)."""
    return (
        Submission.objects.filter(
            pk=submission_id, status=SubmissionStatus.PROCESSING, lease_token=token
        ).update(lease_expires_at=expires_at)
        == 1
    )


def submission_lease_release(*, submission_id: str, token: str) -> bool:
    """Give the lease `token` back unfinished (its worker is stopping): it expires now, so the
    next delivery takes it over at once, and the attempt is not counted (attempts - 1). False,
    writing nothing, when the lease is no longer the submission's."""
    return (
        Submission.objects.filter(
            pk=submission_id,
            status=SubmissionStatus.PROCESSING,
            lease_token=token,
            attempts__gt=0,
        ).update(lease_expires_at=timezone.now(), attempts=F("attempts") - 1)
        == 1
    )


def submission_lease_end(
    *,
    submission_id: str,
    token: str,
    to: SubmissionStatus,
    score: float | None = None,
    reason: str = "",
) -> bool:
    """Write a grading's result under the lease `token`: processing → `to` (completed,
    review_pending or failed) with the score and reason, the lease cleared, in one
    compare-and-set UPDATE. False, writing nothing, when the lease is no longer the
    submission's (taken over after expiry, or cleared by a cancel)."""
    return submission_transition_where(
        submission_id=submission_id,
        old=SubmissionStatus.PROCESSING,
        to=to,
        where={"lease_token": token},
        score=score,
        status_reason=reason,
        lease_token="",
        lease_expires_at=None,
    )


def submission_lease_exhausted(*, submission: Submission, reason: str) -> Submission:
    """processing → failed with `reason` and the lease cleared: the last lease expired and no
    attempt is left. Call it with the row locked (InvalidTransition if it changed)."""
    return submission_transition(
        submission=submission,
        to=SubmissionStatus.FAILED,
        status_reason=reason,
        lease_token="",
        lease_expires_at=None,
    )


def storage_admit(*, user: AbstractBaseUser, adding_bytes: int) -> None:
    """Admit `adding_bytes` more stored bytes for `user`, or raise StorageQuotaExceeded.

    Must run inside the transaction that inserts the file rows (the caller inserts them right
    after). Locks the user's policy row (`quota_policy_lock`, the same lock as job admission),
    then sums the user's stored file sizes in a statement of its own, so two concurrent
    uploads are decided one after the other and never overshoot. Reaching the limit exactly
    is allowed. Not idempotent on its own: the caller's insert is what uses the bytes.
    """
    policy = quota_policy_lock(user=user)
    limit = quota_limits(policy=policy).max_storage_bytes
    used = submission_storage_bytes(user_id=int(user.pk))
    if used + adding_bytes > limit:
        raise storage_quota_error(used=used, limit=limit, adding=adding_bytes)


def _stored_names(storage: Storage, folder: str) -> list[str]:
    """Every stored name under `folder` (walked with the storage API: local or S3)."""
    try:
        folders, files = storage.listdir(folder)
    except FileNotFoundError:
        return []
    names = [f"{folder}/{name}" for name in files]
    for sub in folders:
        names.extend(_stored_names(storage, f"{folder}/{sub}"))
    return names


def stored_orphans_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Cleanup kind `orphan_files`: stored uploads that no file row names, older than
    `STORED_ORPHAN_GRACE_MINUTES`. An upload is stored before its row is inserted; a refusal
    or an error deletes the object, but a web process killed in between cannot, and leaves
    it. The grace keeps uploads still in flight. Walks every object under the upload prefix,
    one submission folder at a time."""
    storage = _storage()
    cutoff = now - dt.timedelta(minutes=float(settings.STORED_ORPHAN_GRACE_MINUTES))
    try:
        submission_ids, _ = storage.listdir(UPLOAD_PREFIX)
    except FileNotFoundError:
        submission_ids = []
    orphans: list[str] = []
    for submission_id in submission_ids:
        folder = f"{UPLOAD_PREFIX}/{submission_id}"
        known = set(
            SubmissionFile.objects.filter(submission_id=submission_id).values_list(
                "storage_name", flat=True
            )
        )
        orphans.extend(
            name
            for name in _stored_names(storage, folder)
            if name not in known and storage.get_modified_time(name) <= cutoff
        )
    if not dry_run:
        _delete_stored(orphans)
    return CleanupReport(kind="orphan_files", count=len(orphans), items=orphans)
