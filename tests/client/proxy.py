"""A fault-injecting HTTP/1.1 proxy on 127.0.0.1: a real socket server in a thread.

It reads each request whole from the client (head and `Content-Length` body), counts it,
forwards it to the upstream server with `Connection: close`, reads the whole answer, and
sends it back, closing the client connection after each answer. Rules change that:

- `drop_answer(method, path)`: the request reaches the server and is answered, but the proxy
  closes the client's connection without sending the answer — "the connection closed after
  the request body was sent and before the answer", the case where only an idempotent retry
  is safe;
- `pause(method, path)`: when half of that request's body has arrived, the proxy stops
  reading and tells the test (`Pause.reached`); the request goes on only when the test sets
  `Pause.go` (a client killed meanwhile never gets its request to the server);
- `answer(method, path, head)`: the request is read whole and answered with `head` (a status
  line, headers and body) by the proxy itself; nothing reaches the server.

Every request is logged as (method, path) so tests can count what the client sent, and the
span of each (from its head's arrival to its answer's first byte sent, or its end) so they
can count how many were under way at once.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Rule:
    method: str
    path: re.Pattern[str]
    kind: str  # "drop", "pause" or "answer"
    times: int
    skip: int = 0
    canned: bytes = b""  # the "answer" rule's whole answer
    held: bool = False  # the "answer" rule waits for `go` before answering
    reached: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    # Set once the proxy is done with the request this rule took: forwarded and answered, or
    # given up because its client died mid-body.
    done: threading.Event = field(default_factory=threading.Event)

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and method == self.method and bool(self.path.search(path))

    def take(self) -> bool:
        """A matching request: True when the rule applies to it (after `skip` others)."""
        if self.skip > 0:
            self.skip -= 1
            return False
        self.times -= 1
        return True


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.log: list[tuple[str, str]] = []
        #: (method, path, body bytes) of each request forwarded whole to the server.
        self.forwarded: list[tuple[str, str, int]] = []
        #: (method, path, start, end) of each request, in `time.monotonic()` seconds.
        self.spans: list[tuple[str, str, float, float]] = []
        self.rules: list[Rule] = []
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # A small, fixed receive window (inherited by accepted sockets): a paused request
        # really stops the client's upload instead of landing whole in kernel buffers.
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self._server.settimeout(0.1)  # so that close() is noticed by the accepting thread
        self.port = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._accepter.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- rules and counts ---------------------------------------------------------------------

    def drop_answer(self, method: str, path: str, times: int = 1) -> Rule:
        rule = Rule(method, re.compile(path), "drop", times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def pause(self, method: str, path: str, times: int = 1, skip: int = 0) -> Rule:
        """Hold the request (after `skip` matching ones) once half its body has arrived."""
        rule = Rule(method, re.compile(path), "pause", times, skip)
        with self._lock:
            self.rules.append(rule)
        return rule

    def answer(
        self, method: str, path: str, canned: bytes, times: int = 1, *, held: bool = False
    ) -> Rule:
        """Answer the request with `canned` (the whole answer), never forwarding it; with
        `held`, once its body has arrived, only when the test sets `Rule.go`."""
        rule = Rule(method, re.compile(path), "answer", times, canned=canned, held=held)
        with self._lock:
            self.rules.append(rule)
        return rule

    def count(self, method: str, path: str) -> int:
        pattern = re.compile(path)
        with self._lock:
            return sum(1 for m, p in self.log if m == method and pattern.search(p))

    def body_bytes(self, method: str, path: str) -> int:
        """Bytes of the bodies of matching requests that reached the server."""
        pattern = re.compile(path)
        with self._lock:
            return sum(n for m, p, n in self.forwarded if m == method and pattern.search(p))

    def most_at_once(self, method: str, path: str) -> int:
        """The most matching requests that were under way at the same time."""
        pattern = re.compile(path)
        with self._lock:
            spans = [(a, b) for m, p, a, b in self.spans if m == method and pattern.search(p)]
        # Ends sort before starts at the same instant: a request that ended as another began
        # was not under way with it.
        events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        most = under_way = 0
        for _, step in events:
            under_way += step
            most = max(most, under_way)
        return most

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for rule in self.rules:
                rule.go.set()
        with contextlib.suppress(OSError):
            self._server.close()
        for thread in self._threads:
            thread.join(timeout=10)
        self._accepter.join(timeout=10)

    # --- the server ------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _rule_for(self, method: str, path: str) -> Rule | None:
        with self._lock:
            self.log.append((method, path))
            for rule in self.rules:
                if rule.matches(method, path) and rule.take():
                    return rule
        return None

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.closing(conn):
            conn.settimeout(60)
            try:
                self._relay(conn)
            except OSError:
                return

    def _relay(self, conn: socket.socket) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buffer += chunk
        head, _, body = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        path = target.split("?", 1)[0]
        headers = [line for line in lines[1:] if line]
        length = 0
        for line in headers:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
            if name.strip().lower() == "transfer-encoding":
                raise OSError("the proxy handles Content-Length bodies only")
        rule = self._rule_for(method, path)
        started = time.monotonic()
        answered: float | None = None  # when the answer began to go back: the client may go on
        try:
            paused = False
            while len(body) < length:
                if (
                    rule is not None
                    and rule.kind == "pause"
                    and not paused
                    and len(body) >= length // 2
                ):
                    paused = True
                    rule.reached.set()
                    rule.go.wait(timeout=120)
                chunk = conn.recv(min(1 << 20, length - len(body)))
                if not chunk:
                    return  # the client died mid-body: nothing reaches the server
                body += chunk
            if rule is not None and rule.kind == "pause" and not paused:
                rule.reached.set()
                rule.go.wait(timeout=120)
            if rule is not None and rule.kind == "answer":
                rule.reached.set()
                if rule.held:
                    rule.go.wait(timeout=120)
                answered = time.monotonic()
                conn.sendall(rule.canned)
                return
            with self._lock:
                self.forwarded.append((method, path, length))
            kept = [h for h in headers if h.split(":", 1)[0].strip().lower() != "connection"]
            request = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")
            answer = b""
            with socket.create_connection(self.upstream, timeout=60) as upstream:
                upstream.sendall(request + body[:length])
                while True:
                    chunk = upstream.recv(1 << 20)
                    if not chunk:
                        break
                    answer += chunk
            if rule is not None and rule.kind == "drop":
                return  # the server answered; the client never hears it
            answer_head, sep, answer_body = answer.partition(b"\r\n\r\n")
            answer_lines = [
                line
                for line in answer_head.decode("latin-1").split("\r\n")
                if line.split(":", 1)[0].strip().lower() != "connection"
            ]
            answered = time.monotonic()
            conn.sendall(
                "\r\n".join([*answer_lines, "Connection: close"]).encode("latin-1")
                + sep
                + answer_body
            )
        finally:
            with self._lock:
                self.spans.append((method, path, started, answered or time.monotonic()))
            if rule is not None:
                rule.done.set()
