from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "apps.quotas"
    label = "quotas"

    def ready(self) -> None:
        from apps.quotas import (
            cleanup,  # noqa: F401 - registers the `reservations` cleanup kind
            metrics,  # noqa: F401 - declares the app's metrics
        )
