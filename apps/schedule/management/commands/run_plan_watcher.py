"""`manage.py run_plan_watcher`: arm and fire schedule plans on time (SPEC §6)."""

from __future__ import annotations

import gc
import signal
import sys
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.schedule.watcher import PlanWatcher

# Seconds a thread holding the interpreter lock keeps it from a waiting one (Python's default
# is 0.005).
SWITCH_INTERVAL = 0.001


class Command(BaseCommand):
    help = (
        "Every BOOKING_PLAN_WATCH_INTERVAL ms: claim due plans (with a lease), fire each at its "
        "time on an in-process timer through a django-q2 worker, invalidate late plans and purge "
        "history. SIGTERM/SIGINT stop it cleanly, giving back unfired claims."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument("--owner", default="", help="Claim owner id (default host:pid).")

    def handle(self, *args: Any, **options: Any) -> None:
        watcher = PlanWatcher(owner=options["owner"]) if options["owner"] else PlanWatcher()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            watcher.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"plan watcher {watcher.owner} started")
        # Everything loaded so far (Django, the apps, the delivery path) lives as long as the
        # process: exempt from the collector, a full collection no longer walks it, so one
        # landing at a plan's time pauses its thread for far less.
        gc.collect()
        gc.freeze()
        # A delivery thread waking at its plan's time waits for the interpreter lock while
        # another thread runs Python (the next plan's start, a tick): at most this long.
        sys.setswitchinterval(SWITCH_INTERVAL)
        watcher.run(once=options["once"])
        self.stdout.write(
            f"plan watcher {watcher.owner} stopped: {watcher.stats.ticks} ticks, "
            f"{watcher.stats.dispatched} plans fired"
        )
