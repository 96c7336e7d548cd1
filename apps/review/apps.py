from typing import Any

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "apps.review"
    label = "review"
    verbose_name = "Grading and review"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from apps.core.health import register_health_check
        from apps.review import (
            cleanup,  # noqa: F401 - registers cleanup `claims` and the reaper
            metrics,  # noqa: F401 - declares the app's metrics
        )
        from apps.review.grader import grader_health

        register_health_check("grader", grader_health)
        post_spawn.connect(_worker_started, dispatch_uid="review.grader_startup_check")


def _worker_started(sender: Any, proc_name: str, **kwargs: Any) -> None:
    """Each django-q2 worker process says at start whether it can isolate gradings."""
    from apps.review.grader import grader_startup_check

    grader_startup_check()
