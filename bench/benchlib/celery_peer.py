"""The Celery app of bench/schedule.py's Celery ETA peer (a worker runs it with
`celery -A bench.benchlib.celery_peer worker`): one task, a POST to the receiver."""

from __future__ import annotations

import os
import urllib.request

from celery import Celery

app = Celery("yoyaku-bench-peer", broker=os.environ.get("BENCH_CELERY_BROKER", ""))
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False)


def _hit(url: str) -> None:
    """Deliver one ETA task's webhook."""
    request = urllib.request.Request(url, data=b"{}", method="POST")  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=5):  # noqa: S310 - loopback
        pass


hit = app.task(name="bench.peer.hit")(_hit)
