"""Periodic django-q2 schedules, declared by apps and created by `manage.py bootstrap`.

django-q2's `Schedule.name` is not unique, so schedules are written with
`update_or_create(name=...)` from a command that runs on deploy, never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    func: str
    minutes: int
    kwargs: str = ""


_TASKS: dict[str, PeriodicTask] = {}


def register_periodic_task(task: PeriodicTask) -> None:
    _TASKS[task.name] = task


def periodic_tasks() -> list[PeriodicTask]:
    return [_TASKS[name] for name in sorted(_TASKS)]


def schedules_ensure() -> list[str]:
    """Create or update one django-q2 MINUTES schedule per registered task; idempotent.

    Duplicates left by earlier deploys under the same name are removed.
    """
    from django_q.models import Schedule

    names: list[str] = []
    with transaction.atomic():
        for task in periodic_tasks():
            rows = list(Schedule.objects.filter(name=task.name).order_by("pk"))
            for extra in rows[1:]:
                extra.delete()
            values = {
                "func": task.func,
                "schedule_type": Schedule.MINUTES,
                "minutes": task.minutes,
                "kwargs": task.kwargs,
                "repeats": -1,
            }
            if rows:
                Schedule.objects.filter(pk=rows[0].pk).update(**values)
            else:
                Schedule.objects.create(name=task.name, **values)
            names.append(task.name)
    return names
