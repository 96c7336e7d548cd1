from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Platform"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from apps.core import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the hourly cleanup task
        )
        from apps.core.api import converters  # noqa: F401 - registers the API's path converters
        from apps.core.cluster import worker_signals_install

        post_spawn.connect(worker_signals_install, dispatch_uid="core.worker_signals")
