"""An upload's bytes on local disk: appended in place, made durable (fsync) before the offset
that covers them is saved, and cut back to the saved offset before the next append (a writer
killed mid-append leaves bytes no offset covers).

The file lives at the storage key under the default storage's folder when that storage has
local paths (FileSystemStorage: attaching then names the same object, no copy), else under
`MEDIA_ROOT`. On S3 (`s3parts`) the bytes go to an S3 multipart upload as they arrive, and
only the tail that does not fill a part yet waits under `MEDIA_ROOT`.

An append writes through a sink (`open_sink`): `write`, `make_durable` (before the offset is
saved), `cut_back`, `part_ready` (a checkpoint is due), `after_save` (after the offset is saved),
`close` (on S3 it waits for the part in flight and raises its failure, unless `report` is
False: an error is already on its way).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

from django.conf import settings
from django.core.files.storage import storages

from apps.submissions.resumable import s3parts

UPLOAD_PREFIX = "uploads"


def upload_key(*, owner_id: int, upload_id: str) -> str:
    return f"{UPLOAD_PREFIX}/{owner_id}/{upload_id}.part"


def storage_has_paths() -> bool:
    try:
        storages["default"].path(UPLOAD_PREFIX)
    except NotImplementedError:
        return False
    return True


def local_path(key: str) -> Path:
    """Where the bytes of the upload stored under `key` are on this machine."""
    try:
        return Path(storages["default"].path(key))
    except NotImplementedError:
        return Path(settings.MEDIA_ROOT) / key


def open_for_append(key: str, offset: int) -> IO[bytes]:
    """The file opened for writing at `offset`, anything past it dropped (it was never
    covered by a saved offset). Creates the file (and its folder) when absent."""
    path = local_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("r+b") if path.exists() else path.open("w+b")
    handle.truncate(offset)
    handle.seek(offset)
    return handle


def make_durable(handle: IO[bytes]) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def cut_back(handle: IO[bytes], offset: int) -> None:
    """Drop what was written past `offset` (refused bytes)."""
    handle.flush()
    handle.truncate(offset)
    handle.seek(offset)


def remove(key: str) -> None:
    """The upload's bytes go (on S3: its multipart upload is aborted, its object deleted)."""
    if s3parts.is_s3():
        s3parts.remove(key)
    remove_local(key)


def remove_local(key: str) -> None:
    """The upload's local file goes (its bytes, or on S3 a downloaded copy)."""
    with contextlib.suppress(FileNotFoundError):
        local_path(key).unlink()


class Sink(Protocol):
    def write(self, data: bytes, /) -> None: ...
    def make_durable(self) -> None: ...
    def cut_back(self, offset: int, /) -> None: ...
    def part_ready(self) -> bool: ...
    def after_save(self, *, complete: bool) -> None: ...
    def close(self, *, report: bool = True) -> None: ...


class LocalSink:
    """The upload's file, appended in place."""

    def __init__(self, key: str, offset: int) -> None:
        self.handle = open_for_append(key, offset)

    def write(self, data: bytes, /) -> None:
        self.handle.write(data)

    def make_durable(self) -> None:
        make_durable(self.handle)

    def cut_back(self, offset: int, /) -> None:
        cut_back(self.handle, offset)

    def part_ready(self) -> bool:
        return False

    def after_save(self, *, complete: bool) -> None:
        return None

    def close(self, *, report: bool = True) -> None:
        self.handle.close()


@contextlib.contextmanager
def open_sink(key: str, offset: int) -> Iterator[Sink]:
    """Where an append at `offset` writes: the local file, or the S3 multipart upload."""
    sink: Sink = s3parts.S3Sink(key, offset) if s3parts.is_s3() else LocalSink(key, offset)
    try:
        yield sink
    except BaseException:
        sink.close(report=False)
        raise
    sink.close()


def finish(key: str) -> None:
    """Make sure a complete upload's object is whole (S3: completes a pending multipart
    upload that a killed process left); nothing to do on local storage."""
    if s3parts.is_s3():
        s3parts.finish(key)


def readable_path(key: str) -> Path:
    """A local file holding the complete upload's bytes (on S3 a download under MEDIA_ROOT,
    removed with the upload by `remove`)."""
    path = local_path(key)
    if s3parts.is_s3() and not path.exists():
        finish(key)
        s3parts.download(key, path)
    return path
