"""An upload's bytes on local disk: appended in place, made durable (fsync) before the offset
that covers them is saved, and cut back to the saved offset before the next append (a writer
killed mid-append leaves bytes no offset covers).

The file lives at the storage key under the default storage's folder when that storage has
local paths (FileSystemStorage: attaching then names the same object, no copy), else under
`MEDIA_ROOT` (with S3, attaching streams it to the bucket).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files.storage import storages

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
    with contextlib.suppress(FileNotFoundError):
        local_path(key).unlink()
