from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Platform"

    def ready(self) -> None:
        from apps.core import (
            metrics,  # noqa: F401 - declares the app's metrics
            periodic,  # noqa: F401 - registers the periodic tasks
        )
        from apps.core.api import converters  # noqa: F401 - registers the API's path converters
