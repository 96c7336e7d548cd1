"""The part every streaming multipart handler shares: each file goes to a temporary file
chunk by chunk, counted and hashed on the way; `discard()` removes whatever was written.

Given the body's `SpooledParts` (apps/core/spooled_multipart.py), a file's data arrives as a
marker instead: the handler then checks, hashes and copies the marked range of the spool in
one step when the file completes."""

from __future__ import annotations

import hashlib
from typing import Any, Generic, TypeVar

from django.core.files.uploadedfile import TemporaryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler

from apps.core.spooled_multipart import NotAMarker, SpooledParts

CHUNK_SIZE = 1024 * 1024


class HashedTemporaryFile(TemporaryUploadedFile):
    """A received file on local disk with its size and sha256 (set once it is complete)."""

    sha256: str = ""


Incoming = TypeVar("Incoming", bound=HashedTemporaryFile)


class HashingUploadHandler(FileUploadHandler, Generic[Incoming]):
    """Subclasses decide in `new_file` whether a file may start (`_start` it) and in
    `_check_size` whether it may grow; this class writes, counts and hashes its bytes."""

    chunk_size = CHUNK_SIZE

    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.received: list[Incoming] = []
        self.current: Incoming | None = None
        self._hash: Any = None
        self._size = 0
        #: The body's spool when Django parses its skeleton: file data arrives as markers.
        self.spooled: SpooledParts | None = None
        self._marker = bytearray()

    def _start(self, incoming: Incoming) -> None:
        self.current = incoming
        self.received.append(incoming)
        self._hash = hashlib.sha256()
        self._size = 0
        self._marker.clear()

    def _check_size(self, received: int) -> None:
        """Raise a domain error when `received` more bytes make the file or request too large."""

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        assert self.current is not None  # noqa: S101 - new_file always runs first
        if self.spooled is not None:
            self._marker += raw_data
            if len(self._marker) > self.spooled.marker_size:
                raise NotAMarker
            return None
        self._size += len(raw_data)
        self._check_size(len(raw_data))
        self._hash.update(raw_data)
        self.current.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> Incoming | None:
        if self.current is None:
            return None
        if self.spooled is not None:
            self._receive_range(self.spooled, self.current)
        incoming, self.current = self.current, None
        incoming.seek(0)
        incoming.size = self._size
        incoming.sha256 = self._hash.hexdigest()
        return incoming

    def _receive_range(self, spooled: SpooledParts, incoming: Incoming) -> None:
        """The file's data from the spool: the size checked first (nothing is written for a
        file over a limit), then hashed from the mapping and copied in the kernel."""
        start, end = spooled.range_of(bytes(self._marker))
        self._size = end - start
        self._check_size(end - start)
        spooled.digest_into(self._hash, start, end)
        spooled.copy_to(incoming, start, end)

    def discard(self) -> None:
        """Close (and so delete) every temporary file this request wrote."""
        for incoming in self.received:
            incoming.close()
        self.received.clear()
        self.current = None
