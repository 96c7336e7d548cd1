from apps.core.schedules import PeriodicTask, register_periodic_task

register_periodic_task(
    PeriodicTask(name="yoyaku.cleanup", func="apps.core.tasks.cleanup_periodic", minutes=60)
)
