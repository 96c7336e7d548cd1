"""Webhook receivers on loopback that verify and record every delivery."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.chaoslib.common import WEBHOOK_SECRET


@dataclass(frozen=True)
class Delivery:
    receiver: str
    webhook_id: str
    life_uuid: str
    plan: str
    at: float
    status: int
    signature_ok: bool


class Receivers:
    """Three loopback receivers: `ok` answers 200; `flaky` answers 503 to the first attempt of
    every webhook-id, then 200; `down` always answers 500."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.servers: dict[str, ThreadingHTTPServer] = {}
        self.secret = base64.b64decode(WEBHOOK_SECRET.removeprefix("whsec_"))

    def verify(self, headers: Any, body: bytes) -> bool:
        msg_id = headers.get("webhook-id", "")
        stamp = headers.get("webhook-timestamp", "")
        given = headers.get("webhook-signature", "")
        if not (msg_id and stamp and given):
            return False
        signed = f"{msg_id}.{stamp}.".encode() + body
        expected = base64.b64encode(hmac.new(self.secret, signed, hashlib.sha256).digest())
        fresh = abs(time.time() - int(stamp)) < 300
        return fresh and any(
            hmac.compare_digest(part.partition(",")[2].encode(), expected)
            for part in given.split()
            if part.startswith("v1,")
        )

    def start(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        for name in ("ok", "flaky", "down"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(name))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers[name] = server
            ports[name] = int(server.server_address[1])
        return ports

    def stop(self) -> None:
        for server in self.servers.values():
            server.shutdown()

    def _handler(self, name: str) -> type[BaseHTTPRequestHandler]:
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                msg_id = self.headers.get("webhook-id", "")
                with receivers.lock:
                    if name == "ok":
                        status = 200
                    elif name == "flaky":
                        status = 200 if msg_id in receivers.seen else 503
                        receivers.seen.add(msg_id)
                    else:
                        status = 500
                    receivers.deliveries.append(
                        Delivery(
                            receiver=name,
                            webhook_id=msg_id,
                            life_uuid=self.headers.get("X-Schedule-Life-UUID", ""),
                            plan=self.headers.get("X-Schedule-Plan", ""),
                            at=time.time(),
                            status=status,
                            signature_ok=receivers.verify(self.headers, body),
                        )
                    )
                payload = b'{"ok": true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
