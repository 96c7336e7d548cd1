"""Peers of the plan watcher, run in bench/schedule.py's window with the same receiver: Celery
tasks with an ETA (Redis broker, a worker process of 4 threads) and APScheduler's in-process
BackgroundScheduler with date triggers. Both are optional (requirements/bench.txt): a peer
whose package is missing is reported as such and left out."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
CELERY_BROKER = os.environ.get("BENCH_CELERY_REDIS_URL", "redis://127.0.0.1:6379/12")


def missing(package: str) -> bool:
    return importlib.util.find_spec(package) is None


def _post(url: str) -> None:
    request = urllib.request.Request(url, data=b"{}", method="POST")  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=5):  # noqa: S310 - loopback
        pass


class Peers:
    """Starts what is installed; `book(moment, url)` books one delivery on every started peer
    under `url + "/<peer>"`; `stop()` ends them."""

    def __init__(self, *, redis: bool) -> None:
        self.names: list[str] = []
        self.notes: list[str] = []
        self._bookers: dict[str, Callable[[dt.datetime, str], None]] = {}
        self._worker: subprocess.Popen[bytes] | None = None
        self._scheduler: Any = None
        if missing("celery"):
            self.notes.append("Celery ETA: not installed (pip install -r requirements/bench.txt)")
        elif not redis:
            self.notes.append("Celery ETA: no Redis reachable")
        else:
            self._celery()
        if missing("apscheduler"):
            self.notes.append("APScheduler: not installed (pip install -r requirements/bench.txt)")
        else:
            self._apscheduler()

    def _celery(self) -> None:
        os.environ["BENCH_CELERY_BROKER"] = CELERY_BROKER
        sys.path.insert(0, str(ROOT))
        from bench.benchlib.celery_peer import app, hit

        self._worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "bench.benchlib.celery_peer", "worker"),
                *("--pool", "threads", "--concurrency", "4", "--loglevel", "WARNING"),
                *("--without-heartbeat", "--without-gossip", "--without-mingle"),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        # Ready before anything is booked: a worker still starting would be counted as late.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not app.control.ping(timeout=0.5):
            pass

        def book(moment: dt.datetime, url: str) -> None:
            hit.apply_async((url,), eta=moment)

        self.names.append("celery")
        self._bookers["celery"] = book

    def _apscheduler(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        scheduler = BackgroundScheduler(timezone=dt.UTC)
        scheduler.start()
        self._scheduler = scheduler

        def book(moment: dt.datetime, url: str) -> None:
            scheduler.add_job(_post, "date", run_date=moment, args=[url], misfire_grace_time=60)

        self.names.append("apscheduler")
        self._bookers["apscheduler"] = book

    def book(self, moment: dt.datetime, url: str) -> dict[str, str]:
        """Book `url/<peer>` at `moment` on every peer; returns the path suffix per peer."""
        for name, booker in self._bookers.items():
            booker(moment, f"{url}/{name}")
        return {name: f"/{name}" for name in self._bookers}

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        if self._worker is not None:
            self._worker.terminate()
            try:
                self._worker.wait(15)
            except subprocess.TimeoutExpired:
                self._worker.kill()
