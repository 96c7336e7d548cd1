"""django-q2 tasks of the schedule app: load by id, call one service; all idempotent."""

from __future__ import annotations

from apps.schedule.batch import plan_execute_batch
from apps.schedule.execution.executor import plan_execute as plan_execute_service
from apps.schedule.execution.executor import plans_fire_due
from apps.schedule.task_runs import task_run_execute


def plan_execute(plan_id: int, token: str) -> str:
    """Run one armed delivery of a plan (a duplicate delivery is skipped)."""
    return plan_execute_service(plan_id=plan_id, token=token)


def plan_execute_many(items: list[tuple[int, str]]) -> list[str]:
    """Deliveries of several plans due at the same moment, run side by side in one worker
    (a burst costs one broker round-trip per batch, not per plan)."""
    return plan_execute_batch(items=[(int(pid), str(token)) for pid, token in items])


def watcher_pass_periodic() -> int:
    """The every-minute fallback: fire plans already due even when no watcher process runs."""
    return len(plans_fire_due(owner="django-q2-schedule"))


def task_run(task_run_id: int) -> str:
    return task_run_execute(task_run_id=task_run_id)
