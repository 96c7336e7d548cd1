"""The client's CPU to read one small JSON answer from a plain-HTTP server
(`yoyaku_client.direct._answer`), this tree's against another copy of direct.py, run after run
(thread CPU time per answer, min/median/max of 7 runs of 2,000 answers each).

    PYTHONPATH=client python bench/direct_answer.py /path/to/other/direct.py
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from types import ModuleType

import httpx

from yoyaku_client import direct as after

BODY = b'{"job_id": "' + b"a" * 32 + b'", "status": "queued", "note": "' + b"x" * 400 + b'"}'
HEAD = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
ANSWER = f"{HEAD}Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY
ANSWERS = 2000


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("before", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def microseconds_per_answer(module: ModuleType) -> float:
    pairs = [socket.socketpair() for _ in range(ANSWERS)]
    for _, server in pairs:
        server.sendall(ANSWER)
        server.shutdown(socket.SHUT_WR)
    request = httpx.Request("GET", "http://127.0.0.1/api/x/")
    started = time.thread_time()
    for client, _ in pairs:
        module._answer(client, request, 120.0)
    cpu = time.thread_time() - started
    for client, server in pairs:
        client.close()
        server.close()
    return cpu / ANSWERS * 1e6


def main() -> None:
    before = load(sys.argv[1])
    runs: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(7):
        runs["before"].append(microseconds_per_answer(before))
        runs["after"].append(microseconds_per_answer(after))
    for name, values in runs.items():
        values.sort()
        low, middle, high = values[0], values[len(values) // 2], values[-1]
        print(f"{name}: µs/answer min {low:.1f} median {middle:.1f} max {high:.1f}")


if __name__ == "__main__":
    main()
