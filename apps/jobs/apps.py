from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"

    def ready(self) -> None:
        from apps.jobs import (
            cleanup,  # noqa: F401 - registers the `keys` cleanup kind
            metrics,  # noqa: F401 - declares the app's metrics
        )
