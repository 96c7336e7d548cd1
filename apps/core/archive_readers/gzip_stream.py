"""Forward-only reading of a gzip file's decompressed bytes.

`tarfile`'s own gzip stream and `gzip.GzipFile` read a gzip header's file name and comment
one byte per Python call, so a 100 MB upload that is all file name costs a minute of CPU.
Here zlib (C) parses the header, and no call returns more than was asked for, whatever the
compression ratio.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

from apps.core.archive_readers.errors import INVALID, ArchiveError

CHUNK = 64 * 1024
OUTPUT = 1024 * 1024
_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class GzipStream:
    """The decompressed bytes of `raw`, members of a multi-member gzip file one after the
    other; bytes after the last member that do not start another member are ignored. Holds at
    most `OUTPUT` decompressed and `CHUNK` compressed bytes at a time."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=_GZIP_WBITS)
        self._pending = b""
        self._output = b""
        self._at = 0
        self._finished = False

    def read(self, size: int = -1, /) -> bytes:
        if size < 0:
            raise ValueError("GzipStream reads a bounded number of bytes at a time.")
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            if self._at >= len(self._output):
                if self._finished:
                    break
                self._output, self._at = self._inflate_some(), 0
                continue
            part = self._output[self._at : self._at + wanted]
            self._at += len(part)
            wanted -= len(part)
            parts.append(part)
        return b"".join(parts)

    def _inflate_some(self) -> bytes:
        source = self._inflate.unconsumed_tail or self._pending or self._raw.read(CHUNK)
        self._pending = b""
        if not source:
            if not self._inflate.eof:
                raise ArchiveError("The archive is truncated.", kind=INVALID)
            self._finished = True
            return b""
        try:
            data = self._inflate.decompress(source, OUTPUT)
        except zlib.error as exc:
            raise ArchiveError(f"The archive is not readable gzip ({exc}).", kind=INVALID) from exc
        if self._inflate.eof:
            self._next_member()
        return data

    def _next_member(self) -> None:
        rest = self._inflate.unused_data
        if len(rest) < len(_MAGIC):
            rest += self._raw.read(CHUNK)
        if rest.startswith(_MAGIC):
            self._inflate = zlib.decompressobj(wbits=_GZIP_WBITS)
            self._pending = rest
        else:
            self._finished = True
