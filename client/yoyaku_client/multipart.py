"""A streamed multipart/form-data body with a known length and progress reports.

A file is read in `CHUNK_SIZE` pieces while it is sent, so a 100 MB upload never sits in
memory; the body's length is computed up front, so the request carries `Content-Length`
(the server refuses an over-size body from it before reading a byte).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from yoyaku_client.record import Record

__all__ = ["CHUNK_SIZE", "FilePart", "MultipartStream", "ProgressCallback", "multipart_body"]

CHUNK_SIZE = 1024 * 1024
#: What `send_to` hands the socket per `sendfile` call (a progress report after each).
SENDFILE_CHUNK = 4 * 1024 * 1024

#: Called with (bytes of the body sent so far, the body's length). A retried request starts
#: again from 0.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True, eq=False, repr=False)
class FilePart(Record):
    """A file to send: read from `path`, named `filename` in the form."""

    path: Path
    filename: str
    field: str = "file"

    @property
    def size(self) -> int:
        return os.stat(self.path).st_size


def _quote(value: str) -> str:
    # What browsers do (HTML living standard): the name stays raw UTF-8, only the characters
    # that would break the header are percent-encoded.
    return value.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


class MultipartStream:
    """Iterates the body once; `close()` closes the file being read."""

    def __init__(
        self,
        boundary: str,
        fields: Sequence[tuple[str, str]],
        files: Sequence[FilePart],
        progress: ProgressCallback | None,
    ) -> None:
        self.boundary = boundary
        self._fields = list(fields)
        self._files = list(files)
        self._progress = progress
        self._sizes = [part.size for part in self._files]
        self._open: list[object] = []
        self.length = sum(len(p) for p in self._preambles()) + sum(self._sizes)

    def _preambles(self) -> list[bytes]:
        """Every byte of the body except the files' contents, in order (one piece before each
        file, and the closing piece last)."""
        dash = f"--{self.boundary}".encode()
        text = b""
        for name, value in self._fields:
            text += dash + b"\r\n"
            text += f'Content-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
            text += value.encode() + b"\r\n"
        pieces: list[bytes] = []
        for index, part in enumerate(self._files):
            head = b"" if index == 0 else b"\r\n"
            head += dash + b"\r\n"
            head += (
                f'Content-Disposition: form-data; name="{_quote(part.field)}"; '
                f'filename="{_quote(part.filename)}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            pieces.append((text + head) if index == 0 else head)
        closing = (b"\r\n" if self._files else text) + dash + b"--\r\n"
        pieces.append(closing)
        return pieces

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        total = self.length
        report = self._progress
        if report is not None:
            report(0, total)
        pieces = self._preambles()
        # Each chunk is a bytes object of its own: the HTTP layer (h11) hands a lone `bytes`
        # chunk to the socket as it is, where a view of a reused buffer would be copied once
        # more (`b"".join` of a memoryview); the file's bytes are copied once, by `read`.
        for index, part in enumerate(self._files):
            yield pieces[index]
            sent += len(pieces[index])
            left = self._sizes[index]
            with open(part.path, "rb", buffering=0) as handle:
                self._open.append(handle)
                while left > 0:
                    chunk = handle.read(min(CHUNK_SIZE, left))
                    if not chunk:
                        raise OSError(f"{part.path} shrank while it was being sent")
                    left -= len(chunk)
                    sent += len(chunk)
                    yield chunk
                    if report is not None:
                        report(sent, total)
                self._open.remove(handle)
        yield pieces[-1]
        sent += len(pieces[-1])
        if report is not None:
            report(sent, total)

    def send_to(self, sock: socket.socket) -> None:
        """Write the body to `sock` (what iterating it yields, in order): the pieces between
        the files with `sendall`, each file with `sendfile`, which hands the socket the file's
        pages from the page cache without reading them into this process."""
        sent = 0
        total = self.length
        report = self._progress
        if report is not None:
            report(0, total)
        pieces = self._preambles()
        for index, part in enumerate(self._files):
            sock.sendall(pieces[index])
            sent += len(pieces[index])
            offset, size = 0, self._sizes[index]
            with open(part.path, "rb") as handle:
                self._open.append(handle)
                while offset < size:
                    count = sock.sendfile(handle, offset, min(SENDFILE_CHUNK, size - offset))
                    if not count:
                        raise OSError(f"{part.path} shrank while it was being sent")
                    offset += count
                    sent += count
                    if report is not None:
                        report(sent, total)
                self._open.remove(handle)
        sock.sendall(pieces[-1])
        sent += len(pieces[-1])
        if report is not None:
            report(sent, total)

    def close(self) -> None:
        for handle in self._open:
            close = getattr(handle, "close", None)
            if callable(close):
                close()
        self._open.clear()


def multipart_body(
    fields: Sequence[tuple[str, str]],
    files: Sequence[FilePart],
    *,
    progress: ProgressCallback | None = None,
    extra_headers: dict[str, str] | None = None,
) -> Callable[[], tuple[dict[str, str], MultipartStream]]:
    """A body factory for `Transport.request(body=...)`: a new stream (and boundary) per
    attempt, so a retried upload is sent whole again."""

    def build() -> tuple[dict[str, str], MultipartStream]:
        # 128 random bits, as `secrets.token_hex(16)` (without importing `secrets` and `random`)
        stream = MultipartStream(os.urandom(16).hex(), fields, files, progress)
        headers = {
            "Content-Type": f"multipart/form-data; boundary={stream.boundary}",
            "Content-Length": str(stream.length),
            **(extra_headers or {}),
        }
        return headers, stream

    return build
