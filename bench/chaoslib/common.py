"""The run's constants and small helpers."""

from __future__ import annotations

import base64
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
BIN = Path(PYTHON).parent
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"yoyaku-chaos-webhook-secret-0123").decode()
METRICS_TOKEN = "chaos-metrics"  # noqa: S105 - a throwaway deployment's token
CONCURRENT_LIMIT = 2
GRADING_TIMEOUT = 30
WATCH_INTERVAL_MS = 1000  # the watchers' lease is five intervals
WATCHER_LEASE = 5 * WATCH_INTERVAL_MS / 1000
BUCKET = "yoyaku-chaos"
FAULT_KINDS = ("web_kill", "worker_kill", "watcher_kill", "watcher_stop", "redis_restart")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: S110 - the thing waited for is not up yet
            pass
        time.sleep(interval)
    return False


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
