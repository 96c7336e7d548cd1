"""HTTP: round-robin over the web processes, every answer recorded."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Answer:
    at: float
    status: int  # 0: no answer (refused, reset, timeout)
    json_error_body: bool
    path: str


class RoundRobin(httpx.BaseTransport):
    """Sends each request to the next web port and records its status; 5xx bodies are read
    to check they are the SPEC's JSON error body."""

    counter = 0
    counter_lock = threading.Lock()

    def __init__(self, ports: list[int], answers: list[Answer], lock: threading.Lock) -> None:
        self.ports = ports
        self.answers = answers
        self.lock = lock
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with RoundRobin.counter_lock:
            RoundRobin.counter += 1
            port = self.ports[RoundRobin.counter % len(self.ports)]
        request.url = request.url.copy_with(port=port)
        started = time.time()
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError:
            with self.lock:
                self.answers.append(Answer(started, 0, False, request.url.path))
            raise
        json_body = False
        if response.status_code >= 500:
            response.read()
            try:
                body = json.loads(response.content)
                json_body = (
                    response.headers.get("content-type", "").startswith("application/json")
                    and body.get("success") is False
                    and isinstance(body.get("code"), str)
                    and isinstance(body.get("error"), str)
                )
            except (ValueError, AttributeError):
                json_body = False
        with self.lock:
            self.answers.append(Answer(started, response.status_code, json_body, request.url.path))
        return response

    def close(self) -> None:
        self.inner.close()
