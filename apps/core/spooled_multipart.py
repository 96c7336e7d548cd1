"""A multipart body already on local disk, parsed without passing its files' bytes through
Python.

The web server receives every body into a spooled file before the application runs
(config/server/body.py). Django's multipart parser would then read that file back in chunks,
search each chunk for the boundary, slice it several times and hand the pieces to the upload
handler, which hashes them and writes them to a second file: per uploaded byte a read, several
copies in memory and a write.

Here the spool is mapped into memory instead. The boundaries are found with one search each,
and the data of every file part is replaced by a short marker naming its byte range: what is
left (part heads, form fields, markers) is small and goes through Django's own parser, so every
rule about heads, fields, names and limits stays Django's. The upload handler, given a marker,
hashes the range straight from the mapping and copies it into its file in the kernel
(`copy_file_range`). A marker carries a random nonce: file bytes can never pass for one.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from typing import IO, Any

from django.http import multipartparser
from django.http.multipartparser import FILE, LazyStream
from django.utils.http import parse_header_parameters

#: Bytes Django reads to find a part's head (its MAX_TOTAL_HEADER_SIZE).
_HEAD_SIZE = 1024
#: Bodies smaller than this stay on Django's path (the spool is then mostly in memory anyway).
MIN_BODY = 1024 * 1024
_COPY_CHUNK = 8 * 1024 * 1024
_MARKER = re.compile(rb"\x00yoyaku-part-([0-9a-f]{32})-([0-9]{1,9})\x00\Z")


class NotAMarker(Exception):
    """A file part's data was not the marker it should have been: parse the body as sent."""


class SpooledParts:
    """The spool of one multipart body mapped, with the byte ranges of its file parts."""

    def __init__(self, fd: int, size: int, boundary: bytes) -> None:
        self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        self._fd = fd
        self._nonce = secrets.token_hex(16).encode()
        self._boundary = boundary
        self.ranges: list[tuple[int, int]] = []
        #: The longest a marker can be.
        self.marker_size = len(self._marker(999_999_999))

    def _marker(self, index: int) -> bytes:
        return b"\x00yoyaku-part-" + self._nonce + b"-" + str(index).encode() + b"\x00"

    def skeleton(self, max_kept: int) -> bytes | None:
        """The body with every file part's data replaced by its marker (the ranges recorded in
        `ranges`), or None when more than `max_kept` other bytes would be kept in memory.

        Parts are split where Django splits them: at every `--boundary`, the CRLF before it
        belonging to no part. A part is a file part when Django's own head parser says so
        and it declares no Content-Transfer-Encoding; a part without a boundary after it (a
        cut-off body) is kept as sent."""
        body, sep = self._map, b"--" + self._boundary
        size, start, copied, kept = len(body), 0, 0, 0
        pieces: list[bytes] = []
        while (index := body.find(sep, start)) >= 0:
            end = index
            if end - 1 >= start and body[end - 1] == 0x0A:
                end -= 1
            if end - 1 >= start and body[end - 1] == 0x0D:
                end -= 1
            data = _file_data_start(body[start : min(start + _HEAD_SIZE, end)])
            if data is not None:
                kept += start + data - copied
                if kept > max_kept:
                    return None
                pieces.append(body[copied : start + data])
                pieces.append(self._marker(len(self.ranges)))
                self.ranges.append((start + data, end))
                copied = end
            start = index + len(sep)
        if kept + size - copied > max_kept:
            return None
        pieces.append(body[copied:size])
        return b"".join(pieces)

    def range_of(self, marker: bytes) -> tuple[int, int]:
        """The byte range a marker stands for; NotAMarker for anything else."""
        found = _MARKER.match(marker)
        if found is None or found.group(1) != self._nonce:
            raise NotAMarker
        index = int(found.group(2))
        if index >= len(self.ranges):
            raise NotAMarker
        return self.ranges[index]

    def digest_into(self, hasher: Any, start: int, end: int) -> None:
        """Feed bytes `start`..`end` to `hasher` from the mapping (no copy)."""
        with memoryview(self._map) as view, view[start:end] as part:
            hasher.update(part)

    def copy_to(self, target: IO[Any], start: int, end: int) -> None:
        """Append bytes `start`..`end` to `target` at its position, in the kernel when it can."""
        target.flush()
        out = target.fileno()
        offset = start
        try:
            while offset < end:
                done = os.copy_file_range(self._fd, out, min(_COPY_CHUNK, end - offset), offset)
                if done <= 0:
                    break
                offset += done
        except OSError:
            pass  # another filesystem or kernel: the rest is written from the mapping
        with memoryview(self._map) as view:
            while offset < end:
                stop = min(offset + _COPY_CHUNK, end)
                with view[offset:stop] as piece:
                    offset += os.write(out, piece)

    def close(self) -> None:
        self._map.close()


def _file_data_start(head: bytes) -> int | None:
    """Where the data of a part starting with `head` begins, if Django treats it as a file
    part with plain (not transfer-encoded) data; None otherwise."""
    end = head.find(b"\r\n\r\n")
    if end < 0:
        return None
    # Django's own reading of a part's head (not in its stubs).
    read_head: Any = multipartparser.parse_boundary_stream  # type: ignore[attr-defined]
    stream = LazyStream(iter([head]))  # type: ignore[arg-type]  # any iterator of bytes
    kind, headers, _ = read_head(stream, _HEAD_SIZE)
    if kind != FILE or "content-transfer-encoding" in headers:
        return None
    return end + 4


def spooled_parts(meta: Mapping[str, Any]) -> SpooledParts | None:
    """The body of this request mapped from its spool file, when it is a multipart body of at
    least MIN_BODY bytes that nothing has read yet; None leaves the body to Django."""
    spool = meta.get("wsgi.input")
    if not isinstance(spool, tempfile.SpooledTemporaryFile) or not getattr(spool, "_rolled", False):
        return None
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
        content_type, params = parse_header_parameters(str(meta.get("CONTENT_TYPE") or ""))
        boundary = params.get("boundary", "").encode("ascii")
        if content_type != "multipart/form-data" or not boundary or length < MIN_BODY:
            return None
        if spool.tell() != 0:
            return None
        fd = spool.fileno()
        if os.fstat(fd).st_size != length:
            return None
        return SpooledParts(fd, length, boundary)
    except (ValueError, OSError, UnicodeError, io.UnsupportedOperation):
        return None
