from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Platform"

    def ready(self) -> None:
        from apps.core import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the hourly cleanup task
        )
