"""Registrations of the benchmarks app (imported from `BenchmarksConfig.ready()`): what the
apps below it call through their registries without importing this app."""

from __future__ import annotations

from apps.core.queue import PHASES_REVEAL_OVERDUE
from apps.core.schedules import PeriodicTask, register_periodic_task

register_periodic_task(
    PeriodicTask(name="yoyaku.benchmarks.reveal_overdue", func=PHASES_REVEAL_OVERDUE, minutes=1)
)
