"""Registrations of the core app (imported from `CoreConfig.ready()`): the hourly cleanup."""

from apps.core.queue import CLEANUP
from apps.core.schedules import PeriodicTask, register_periodic_task

register_periodic_task(PeriodicTask(name="yoyaku.cleanup", func=CLEANUP, minutes=60))
