"""Reads of stored files: one file of a submission, its bytes (streamed from storage) and, for
an archive, its members.

Storage is Django's storage API, so this works the same on the local filesystem and on S3: a
file is opened as a stream and never read whole into memory. Listing an archive's members
needs a seekable local file; on a storage without local paths (S3) the archive is copied to a
temporary file in chunks first. Members are cached by the file's sha256 (the same bytes have
the same members), so a page that is reloaded does not read the archive again.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.cache import cache
from django.core.files.storage import default_storage

from apps.core.archives import ArchiveError, ArchiveMember, archive_kind, archive_members
from apps.core.exceptions import NotFound
from apps.submissions.models import Submission, SubmissionFile

_CACHE_PREFIX = "submissions:archive-members:v1"
_CACHE_SECONDS = 24 * 3600
_COPY_CHUNK = 1024 * 1024


class StoredFileMissing(NotFound):
    default_message = "The file's bytes are no longer in storage."


def submission_file_get(*, submission: Submission, file_id: int) -> SubmissionFile:
    """The file `file_id` of `submission` (NotFound when it belongs to no file of it: an id of
    another submission's file is unknown here, never a way around the submission's check)."""
    file = SubmissionFile.objects.filter(submission=submission, pk=file_id).first()
    if file is None:
        raise NotFound(f"File {file_id} not found in submission {submission.pk}.")
    return file


def submission_file_open(*, file: SubmissionFile) -> IO[bytes]:
    """The stored bytes as an open binary stream (the caller closes it); StoredFileMissing
    when storage no longer has them."""
    try:
        handle: IO[bytes] = default_storage.open(file.storage_name, "rb")
    except (OSError, FileNotFoundError) as exc:
        raise StoredFileMissing() from exc
    return handle


@contextmanager
def _local_path(file: SubmissionFile) -> Iterator[Path]:
    try:
        yield Path(default_storage.path(file.storage_name))
        return
    except NotImplementedError:
        pass
    with tempfile.NamedTemporaryFile(suffix=".archive") as copy:
        with submission_file_open(file=file) as source:
            shutil.copyfileobj(source, copy, _COPY_CHUNK)
        copy.flush()
        yield Path(copy.name)


@dataclass(frozen=True)
class MemberListing:
    """An archive's members, or why they cannot be listed (`members` is then None)."""

    members: list[ArchiveMember] | None
    problem: str = ""


def submission_file_members(*, file: SubmissionFile) -> MemberListing | None:
    """The members of an archive file (None for a file that is no archive), read through the
    upload's archive checks, at most MAX_ARCHIVE_MEMBERS of them."""
    kind = archive_kind(file.filename)
    if kind is None:
        return None
    key = f"{_CACHE_PREFIX}:{kind}:{file.sha256}"
    cached = cache.get(key)
    if isinstance(cached, list):
        return MemberListing([ArchiveMember(*row) for row in cached])
    try:
        with _local_path(file) as path:
            members = archive_members(path, kind, max_members=int(settings.MAX_ARCHIVE_MEMBERS))
    except ArchiveError as exc:
        return MemberListing(None, str(exc))
    except (OSError, StoredFileMissing):
        return MemberListing(None, "The file's bytes are no longer in storage.")
    cache.set(key, [(m.name, m.size, m.kind) for m in members], _CACHE_SECONDS)
    return MemberListing(members)
