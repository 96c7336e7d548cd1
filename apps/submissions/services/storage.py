"""Stored uploads and their cleanup: where an upload is stored, the per-user storage limit,
deleting a submission with its objects, and the cleanup kinds `drafts` and `orphan_files`.

Storage is Django's storage API (local files or S3). No storage I/O runs inside a transaction
that holds locks: objects are written before the rows are inserted, and deleted after commit.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from functools import partial

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import Storage, storages
from django.db import transaction

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import NotFound
from apps.core.models_utils import new_hex_id
from apps.quotas.selectors import quota_limits
from apps.quotas.services import quota_policy_lock, storage_quota_error
from apps.submissions.models import SubmissionFile, SubmissionStatus
from apps.submissions.selectors import (
    submission_get,
    submission_stale_draft_ids,
    submission_storage_bytes,
)
from apps.submissions.uploads import IncomingFile

logger = logging.getLogger(__name__)

UPLOAD_PREFIX = "submissions"


def _storage() -> Storage:
    return storages["default"]


def stored_save(*, submission_id: str, upload: IncomingFile) -> str:
    """Write the upload to storage under a key the server builds; return the stored name.

    The key is `submissions/<submission id>/<attempt id>/<file name>`: each attempt owns its
    object, so deleting a refused attempt's object can never remove another attempt's file,
    even on S3 where "create if absent" is not atomic. FileSystemStorage moves the temporary
    file into place (no copy); S3 streams it in multipart chunks.
    """
    key = f"{UPLOAD_PREFIX}/{submission_id}/{new_hex_id()}/{upload.raw_name}"
    upload.seek(0)
    return _storage().save(key, upload)


def stored_delete(names: Sequence[str]) -> None:
    """Delete stored objects; a failure is logged (the `orphan_files` cleanup retries it)."""
    storage = _storage()
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            logger.exception("Could not delete stored upload %s", name)


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
        transaction.on_commit(partial(stored_delete, names))
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
        stored_delete(orphans)
    return CleanupReport(kind="orphan_files", count=len(orphans), items=orphans)
