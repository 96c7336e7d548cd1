"""An HTTP/1.1 answer read from a connection the server closes after it (`Connection: close`).

What `http.client.HTTPResponse` does for a direct request (`yoyaku_client.direct`), with its
bounds: a line of at most 65,536 bytes, at most 100 header lines (a folded one counts), a
head that ends with the connection refused, informational (1xx) answers skipped, a body by
`Transfer-Encoding: chunked`, by `Content-Length` or up to the end of the connection, none for
`HEAD`, 204 and 304. `http.client` imports `email`'s parser and `ssl` (about a seventh of the
command line's start-up) for what is here a few lines.

Raises `Disconnected` when the connection ends before a status line, `ProtocolError` for
anything that is not an HTTP/1.x answer (with `http.client`'s words where it has some),
`TooLarge` past `limit` bytes of body; `OSError` and `TimeoutError` from the reads pass
through.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Disconnected", "ProtocolError", "TooLarge", "read_answer"]

_MAX_LINE = 65536
_MAX_HEADERS = 100
_PIECE = 64 * 1024


class _Stream(Protocol):
    """What the answer is read from: an `io.BufferedReader` over the connection."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def read(self, size: int = -1, /) -> bytes: ...


class ProtocolError(Exception):
    """Not an HTTP/1.x answer."""


class Disconnected(ProtocolError):
    """The connection ended before a status line."""


class TooLarge(Exception):
    """The body is over the limit."""


def _line(stream: _Stream) -> bytes:
    line = stream.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise ProtocolError("got more than 65536 bytes when reading a line")
    return line


def _status(stream: _Stream) -> int:
    line = _line(stream)
    if not line:
        raise Disconnected("Remote end closed connection without response")
    parts = line.decode("iso-8859-1").split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ProtocolError(f"Bad status line: {line[:80]!r}")
    code = parts[1]
    # ASCII digits only: `isdigit` holds for "²", which `int` refuses.
    if len(code) != 3 or not (code.isascii() and code.isdigit()) or int(code) < 100:
        raise ProtocolError(f"Bad status line: {line[:80]!r}")
    return int(code)


def _headers(stream: _Stream) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    for _ in range(_MAX_HEADERS + 1):  # every line counts, a folded one too (as http.client)
        line = _line(stream)
        if not line:  # a head cut before its blank line is not an answer
            raise ProtocolError("the connection ended inside the answer's head")
        if line in (b"\r\n", b"\n"):
            return items
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and items:  # a folded line continues the last header
            name, value = items[-1]
            items[-1] = (name, f"{value} {text.strip()}")
            continue
        name, colon, value = text.partition(":")
        if not colon:
            continue  # as the email parser: a line without a colon is not a header
        items.append((name.strip(), value.strip()))
    raise ProtocolError(f"got more than {_MAX_HEADERS} headers")


def _get(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _chunked(stream: _Stream, limit: int) -> bytes:
    pieces: list[bytes] = []
    size = 0
    while True:
        line = _line(stream).split(b";", 1)[0].strip()
        try:
            count = int(line, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size: {line[:40]!r}") from None
        if count < 0:
            raise ProtocolError(f"bad chunk size: {line[:40]!r}")
        if count == 0:
            break
        if size + count > limit:
            raise TooLarge()
        size += _read_into(stream, count, pieces)
        if _line(stream) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk does not end with a line break")
    for _ in range(_MAX_HEADERS + 1):  # the trailer, up to its blank line
        if _line(stream) in (b"\r\n", b"\n", b""):
            return b"".join(pieces)
    raise ProtocolError(f"got more than {_MAX_HEADERS} trailer lines")


def _read_into(stream: _Stream, count: int, pieces: list[bytes]) -> int:
    left = count
    while left > 0:
        piece = stream.read(min(_PIECE, left))
        if not piece:
            raise ProtocolError(f"IncompleteRead({count - left} bytes read, {left} more expected)")
        pieces.append(piece)
        left -= len(piece)
    return count


def read_answer(
    stream: _Stream, method: str, limit: int
) -> tuple[int, list[tuple[str, str]], bytes]:
    """The status, the headers (in order, names as sent) and the body of the answer."""
    status = _status(stream)
    while 100 <= status < 200:  # informational answers come before the one that counts
        _headers(stream)
        status = _status(stream)
    headers = _headers(stream)
    if method == "HEAD" or status in (204, 304):
        return status, headers, b""
    if (_get(headers, "transfer-encoding") or "").lower().rstrip().endswith("chunked"):
        return status, headers, _chunked(stream, limit)
    length: int | None = None
    raw = _get(headers, "content-length")
    if raw is not None:
        try:
            length = int(raw)
        except ValueError:
            length = None
        if length is not None and length < 0:
            length = None
    pieces: list[bytes] = []
    if length is not None:
        if length > limit:
            raise TooLarge()
        _read_into(stream, length, pieces)
        return status, headers, b"".join(pieces)
    size = 0
    while piece := stream.read(_PIECE):  # no length: the body ends with the connection
        size += len(piece)
        if size > limit:
            raise TooLarge()
        pieces.append(piece)
    return status, headers, b"".join(pieces)
