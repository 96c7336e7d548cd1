"""Registrations of the grading app (imported from `GradingConfig.ready()`): the `/healthz`
grader check and the every-minute lease reaper."""

from __future__ import annotations

from apps.core.health import register_health_check
from apps.core.queue import REAP_EXPIRED_LEASES
from apps.core.schedules import PeriodicTask, register_periodic_task
from apps.grading.grader import grader_health

register_health_check("grader", grader_health, private=True)
register_periodic_task(
    PeriodicTask(name="yoyaku.grading.reap_expired_leases", func=REAP_EXPIRED_LEASES, minutes=1)
)
