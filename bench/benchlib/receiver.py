"""A loopback HTTP receiver for webhook deliveries: the first receipt time of each path and
every webhook-id seen per path."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Serves POSTs on 127.0.0.1 (a free port) in a daemon thread until `shutdown()`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first: dict[str, float] = {}
        self.ids: dict[str, Counter[str]] = {}
        self.server = self._start()
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def record(self, path: str, webhook_id: str = "", at: float | None = None) -> None:
        with self.lock:
            self.first.setdefault(path, time.time() if at is None else at)
            self.ids.setdefault(path, Counter())[webhook_id] += 1

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _start(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.time()
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.record(self.path, self.headers.get("webhook-id", ""), at)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.request_queue_size = 1024
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return server


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def lateness_line(name: str, values: list[float]) -> str:
    """`name n= p50= p99= max=` in seconds, or that nothing was delivered."""
    if not values:
        return f"{name:<12} no deliveries"
    return (
        f"{name:<12} n={len(values):>5}  p50={statistics.median(values):7.3f}s  "
        f"p99={percentile(values, 0.99):7.3f}s  max={max(values):7.3f}s"
    )
