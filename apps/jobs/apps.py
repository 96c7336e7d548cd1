from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"

    def ready(self) -> None:
        from apps.jobs import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the `keys` cleanup kind
        )
