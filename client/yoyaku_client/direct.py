"""Requests to a plain-HTTP server on a connection of their own, a file's bytes sent by
`sendfile`.

httpx sends a body from an iterator of `bytes`: every byte of a file is read into this process
(a copy out of the page cache) and written to the socket (a copy into the kernel's buffers).
Here the same request goes out on a socket of its own: the head and the multipart pieces
with `sendall`, each file with `socket.sendfile`, which gives the socket the file's pages with
no copy through this process; the answer is read by `yoyaku_client.answer`. A request without a
file (a JSON body or none) goes the same way, its body after the head, so a command that
talks to a plain-HTTP server never loads httpx. The request is a `wire.Request` (built as
httpx builds its requests: the URL, the headers: the token, the user agent, `Content-Length`,
`X-Content-SHA256`), sent with `Connection: close` and `Accept-Encoding: identity`; the
answer is a `wire.Response`, and a failure is the `httpx.TransportError` httpx raises for it
(httpx imported then, not before), so `Transport` retries and reports it as before.

Used for a plain-HTTP server when no proxy is configured: over TLS the bytes must pass
through this process to be encrypted (httpx sends those).
"""

from __future__ import annotations

import io
import os
import socket
import sys
import time
from typing import Any, NoReturn

from yoyaku_client import _httpx
from yoyaku_client.answer import Disconnected, ProtocolError, TooLarge, read_answer
from yoyaku_client.multipart import MultipartStream
from yoyaku_client.wire import Response, Timeout

__all__ = ["MAX_ANSWER_SIZE", "direct_possible", "send_request"]

#: Bytes of an answer's body read at most: the API's answers are JSON documents far smaller
#: (downloads are streamed through httpx); a larger or endless one is the server's error.
MAX_ANSWER_SIZE = 64 * 1024 * 1024


def direct_possible(base_url: str) -> bool:
    """A plain-HTTP server reached without a proxy, on a system with `sendfile`."""
    if not base_url.startswith("http://") or not hasattr(socket.socket, "sendfile"):
        return False
    if sys.platform not in ("darwin", "win32") and not any(
        name.lower().endswith("_proxy") for name in os.environ
    ):
        # Elsewhere `getproxies()` reads only these variables: with none set, no proxy can
        # be configured, and urllib.request (and ssl) stay unimported. macOS and Windows have
        # system settings besides, which only `getproxies()` reads.
        return True
    import urllib.request

    proxies = urllib.request.getproxies()  # what httpx reads from the environment too
    return not (proxies.get("http") or proxies.get("all"))


def _fail(kind: str, message: str, request: Any, cause: BaseException | None = None) -> NoReturn:
    """Raise httpx's `kind` of error (httpx is imported only when a request fails)."""
    error = getattr(_httpx.load(), kind)(message, request=request)
    raise error from cause


def send_request(request: Any, body: MultipartStream | None, timeout: Any) -> Response:
    """Send `request` with `body` written to its socket (without one, the request's own
    content, e.g. its JSON); its answer, read whole. `request` is a `wire.Request` (or an
    `httpx.Request`), `timeout` a `wire.Timeout` (or an `httpx.Timeout`)."""
    timeout = Timeout.of(timeout)
    url = request.url
    head = _head(request)  # a header that would end the head early is refused before connecting
    try:
        # getaddrinfo takes a host as bytes too; typeshed names str only.
        address = (_lookup_name(url.host), url.port or 80)
        sock = socket.create_connection(address, timeout=timeout.connect)  # type: ignore[arg-type]
    except TimeoutError as exc:
        _fail("ConnectTimeout", str(exc), request, exc)
    except OSError as exc:
        _fail("ConnectError", str(exc), request, exc)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout.write)
        try:
            if body is None:
                sock.sendall(head + request.read())
            else:
                sock.sendall(head)
                body.send_to(sock)
        except (ConnectionError, TimeoutError) as exc:
            # The server may have answered before reading the whole body (a refusal from the
            # head: too large, a bad token) and closed: that answer is the request's.
            try:
                return _answer(sock, request, min(timeout.read or 5.0, 5.0))
            except _httpx.load().TransportError:
                pass
            _fail(
                "WriteTimeout" if isinstance(exc, TimeoutError) else "WriteError",
                str(exc),
                request,
                exc,
            )
        return _answer(sock, request, timeout.read)
    finally:
        sock.close()


def _lookup_name(host: str) -> str | bytes:
    """`host` for `getaddrinfo`: an ASCII name as the bytes the IDNA codec would make of it
    (the codec's own fast path), so that a request to `127.0.0.1` or `localhost` does not load
    the codec (`encodings.idna`, `stringprep`: a few ms of a command's start); any other name
    as it is, for the codec to encode or refuse as before."""
    if host.isascii():
        labels = host.split(".")
        if all(0 < len(label) < 64 for label in labels[:-1]) and len(labels[-1]) < 64:
            return host.encode("ascii")
    return host


def _head(request: Any) -> bytes:
    target = request.url.raw_path.decode("ascii")
    lines = [f"{request.method} {target} HTTP/1.1"]
    for name, value in request.headers.multi_items():
        if name.lower() in ("connection", "accept-encoding"):
            continue
        if any(c in name + value for c in "\r\n\0"):  # a header of its own: refused (as h11 does)
            _fail("LocalProtocolError", f"Illegal header {name!r}", request)
        lines.append(f"{name}: {value}")
    lines += ["Accept-Encoding: identity", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _answer(sock: socket.socket, request: Any, timeout: float | None) -> Response:
    """The answer on `sock` as a `wire.Response`; a failure raises what httpx would.

    `timeout` bounds the whole answer (head and body), not each read: a server that drips a
    byte at a time cannot hold the client past it; the body is read in pieces up to
    `MAX_ANSWER_SIZE` whatever length the server announces."""
    deadline = None if timeout is None else time.monotonic() + timeout
    stream = io.BufferedReader(_Deadline(sock, deadline))
    try:
        status, headers, content = read_answer(stream, request.method, MAX_ANSWER_SIZE)
    except TooLarge as exc:
        _fail("RemoteProtocolError", f"Answer larger than {MAX_ANSWER_SIZE} bytes.", request, exc)
    except TimeoutError as exc:
        _fail("ReadTimeout", str(exc) or "timed out", request, exc)
    except Disconnected as exc:
        message = "Server disconnected without sending a response."
        _fail("RemoteProtocolError", message, request, exc)
    except ProtocolError as exc:
        _fail("RemoteProtocolError", str(exc), request, exc)
    except OSError as exc:
        _fail("ReadError", str(exc), request, exc)
    return Response(status, headers, content, request)


class _Deadline(io.RawIOBase):
    """`sock` read until `deadline` (a `time.monotonic()` value; None: no limit), whatever
    the pace of its bytes; what the answer is read from."""

    def __init__(self, sock: socket.socket, deadline: float | None) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)
