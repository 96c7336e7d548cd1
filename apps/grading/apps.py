from typing import Any

from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "apps.grading"
    label = "grading"
    verbose_name = "Grading"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from apps.grading import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the lease reaper and the `grader` health check
        )

        post_spawn.connect(_worker_started, dispatch_uid="grading.grader_startup_check")


def _worker_started(sender: Any, proc_name: str, **kwargs: Any) -> None:
    """Each django-q2 worker process says at start whether it can isolate gradings."""
    from apps.grading.grader import grader_startup_check

    grader_startup_check()
