"""A hostile plain-HTTP server on loopback for the client's attack tests (the `hostile`
fixture of tests/client/conftest.py makes them)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

Handle = Callable[[socket.socket], None]


class Hostile:
    """A loopback server answering every connection with `handle`; it keeps what each
    connection sent (read until the head's end and what follows within 0.2 s)."""

    def __init__(self, handle: Handle) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.handle = handle
        self.received: list[bytes] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                self.received.append(_read_head(conn))
                with contextlib.suppress(OSError):  # the client gave up: what it should do
                    self.handle(conn)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.listener.close()


def _read_head(conn: socket.socket) -> bytes:
    conn.settimeout(0.2)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    conn.settimeout(None)
    return data


def endless(opening: bytes, line: bytes, seconds: float, copies: int) -> Handle:
    """A handle that sends `opening`, then `copies` of `line` at a time for `seconds`."""

    def handle(conn: socket.socket) -> None:
        conn.sendall(opening)
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            conn.sendall(line * copies)

    return handle
