"""A draft whose first file is a finished resumable upload (SPEC §11.5):
`submission_create_from_upload`.

A file over MAX_UPLOAD_FILE_SIZE cannot be sent whole, so a submission whose only (or every)
file is that large is created from an upload. Every rule of creation (the phase context, names,
extensions, archives, the fields) and of attach (ownership, `upload_incomplete`,
`upload_attached`) applies. The draft row, the phase's entry, the files sent whole and the
upload's file row are inserted in ONE transaction that also marks the upload attached with a
compare-and-set: a refusal at any step rolls everything back, so no draft remains and the
upload stays unattached and may be used again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from apps.core.archives import archive_kind
from apps.submissions.contexts import SubmissionContext, submission_context_resolve
from apps.submissions.exceptions import UploadAttached, UploadIncomplete
from apps.submissions.metrics import counts_upload_refusals, upload_created
from apps.submissions.models import ResumableUpload, Submission
from apps.submissions.resumable import store
from apps.submissions.resumable.selectors import upload_get
from apps.submissions.services.attach import _attach_insert, _stored_name
from apps.submissions.services.drafts import (
    _create_checksum_check,
    _create_fields_check,
    _create_names_check,
    _create_size_check,
    _create_store_and_insert,
    draft_new,
)
from apps.submissions.services.storage import stored_delete
from apps.submissions.uploads import IncomingFile
from apps.submissions.validation import validate_archive, validate_name


def _finished_upload(*, user: AbstractBaseUser, upload_id: str) -> ResumableUpload:
    """The user's finished, unattached, unexpired upload. Raises NotFound (unknown, someone
    else's, expired), UploadAttached, UploadIncomplete."""
    upload = upload_get(upload_id=upload_id, user=user, live_only=False)
    if upload.attached_at is not None:
        raise UploadAttached(f"Upload {upload.pk} already became a file or a bundle.")
    upload = upload_get(upload_id=upload_id, user=user)
    if not upload.complete:
        raise UploadIncomplete(
            f"Upload {upload.pk} holds {upload.offset} of "
            f"{upload.length if upload.length is not None else 'an unknown number of'} bytes.",
            extra={"offset": upload.offset, "length": upload.length},
        )
    return upload


def _names_check(
    *, filename: str, uploads: Sequence[IncomingFile], context: SubmissionContext
) -> None:
    """The rules of creation (count, names, extensions, duplicates) for the upload's name and
    the files sent whole, together."""
    named: list[Any] = [_NameOnly(filename), *uploads]
    _create_names_check(named, context.file_types)


@dataclasses.dataclass(frozen=True)
class _NameOnly:
    """Stands for the upload in the name checks of creation (they read `raw_name` only)."""

    raw_name: str


@counts_upload_refusals
def submission_create_from_upload(
    *,
    user: AbstractBaseUser,
    upload_id: str,
    filename: str,
    uploads: Sequence[IncomingFile] = (),
    entrypoint: str = "main.py",
    config_file: str = "config.yaml",
    metadata: dict[str, Any] | None = None,
    question_id: str = "",
    skill: str = "",
    challenge: str = "",
    phase: str = "",
    expected_sha256: str | None = None,
) -> Submission:
    """Create a draft owned by `user` whose first file is the user's finished upload
    `upload_id`, named `filename`, besides any files sent whole (`uploads`).

    Checks as `submission_create` (context first: NotFound, `not_participant`,
    `phase_closed`; then InvalidRequest, InvalidFilename, InvalidExtension, DuplicateFilename,
    TooManyFiles, ChecksumMismatch for the files sent whole, RequestTooLarge,
    StorageQuotaExceeded, InvalidArchive, UnsafeArchive) and as `submission_file_attach`
    (NotFound for an unknown, foreign or expired upload, UploadAttached, UploadIncomplete).
    The upload's bytes already count against the storage limit, so only the files sent whole
    are admitted. All inserts and the upload's compare-and-set share one transaction: on any
    refusal no draft, entry or file row remains and the upload is untouched.
    """
    metadata = metadata if metadata is not None else {}
    validate_name(filename)
    context = submission_context_resolve(
        user=user, challenge=challenge, phase=phase, question_id=question_id, skill=skill
    )
    if not context.needs_program:
        entrypoint = config_file = ""
    _create_fields_check(
        uploads=uploads,
        program=(entrypoint, config_file) if context.needs_program else None,
        metadata=metadata,
        files_required=False,
    )
    _names_check(filename=filename, uploads=uploads, context=context)
    _create_checksum_check(uploads, expected_sha256)
    total = _create_size_check(user=user, uploads=uploads)
    upload = _finished_upload(user=user, upload_id=upload_id)
    store.finish(upload.storage_key)
    if archive_kind(filename) is not None:
        validate_archive(path=store.readable_path(upload.storage_key), filename=filename)
    for incoming in uploads:
        validate_archive(path=Path(incoming.temporary_file_path()), filename=incoming.raw_name)
    draft = draft_new(
        user=user,
        context=context,
        entrypoint=entrypoint,
        config_file=config_file,
        metadata=metadata,
        question_id=question_id,
        skill=skill,
    )
    stored = _stored_name(submission_id=draft.pk, upload=upload, filename=filename)
    created = context.on_created

    def attach_then_created(submission: Submission) -> object:
        # Inside the transaction that inserts the draft: the upload's row, then the entry.
        _attach_insert(
            user=user, submission=submission, upload=upload, stored=stored, filename=filename
        )
        return created(submission)

    try:
        _create_store_and_insert(
            user=user,
            draft=draft,
            uploads=uploads,
            total=total,
            context=dataclasses.replace(context, on_created=attach_then_created),
        )
    except BaseException:
        if stored != upload.storage_key:
            stored_delete([stored])
        raise
    upload_created(sizes=[int(upload.offset), *(incoming.size or 0 for incoming in uploads)])
    return draft
