"""Registrations of the schedule app (imported from `ScheduleConfig.ready()`): the cleanup
kind, the `/healthz` watcher check and the every-minute fallback watcher pass."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.core.cleanup import CleanupReport, register_cleanup
from apps.core.health import register_health_check
from apps.core.queue import PLANS_FIRE_DUE
from apps.core.schedules import PeriodicTask, register_periodic_task
from apps.core.selectors import heartbeat_get
from apps.core.services import heartbeats_purge
from apps.schedule import topics  # noqa: F401 - registers the task topics
from apps.schedule.selectors import WATCHER_HEARTBEAT_PREFIX
from apps.schedule.selfcalls import consumed_signatures_purge
from apps.schedule.services.lives import life_history_purge
from apps.schedule.watcher import HEARTBEAT_NAME


@register_cleanup(
    "schedule",
    "Finished Lives older than SCHEDULE_HISTORY_DURATION_DAYS, used self-call signatures "
    "too old to match any request, heartbeats of watchers silent for a day.",
)
def schedule_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    lives = life_history_purge(now=now, dry_run=dry_run)
    signatures = consumed_signatures_purge(now=now, dry_run=dry_run)
    watchers = heartbeats_purge(
        prefix=WATCHER_HEARTBEAT_PREFIX, older_than=now - dt.timedelta(days=1), dry_run=dry_run
    )
    note = [f"{signatures} used self-call signature(s)"] if signatures else []
    if watchers:
        note.append(f"{watchers} heartbeat(s) of watchers silent for a day")
    return CleanupReport(
        kind="schedule", count=lives.count + signatures + watchers, items=[*lives.items, *note]
    )


def watcher_health() -> tuple[bool, dict[str, Any]]:
    """Alive when a watcher ticked within three watch intervals (at least 30 s)."""
    beat = heartbeat_get(name=HEARTBEAT_NAME)
    if beat is None:
        return False, {"last_tick": None, "alive": False}
    window = max(3 * float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000, 30.0)
    alive = timezone.now() - beat.last_tick <= dt.timedelta(seconds=window)
    return alive, {"last_tick": beat.last_tick.isoformat(), "alive": alive}


register_health_check("watcher", watcher_health)
register_periodic_task(
    PeriodicTask(
        name="yoyaku.schedule.watcher_pass",
        func=PLANS_FIRE_DUE,
        minutes=1,
    )
)
