"""`manage.py run_plan_watcher`: arm and fire schedule plans on time (SPEC §6)."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.schedule.watcher import PlanWatcher


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
        watcher.run(once=options["once"])
        self.stdout.write(
            f"plan watcher {watcher.owner} stopped: {watcher.stats.ticks} ticks, "
            f"{watcher.stats.dispatched} plans fired"
        )
