from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "apps.quotas"
    label = "quotas"

    def ready(self) -> None:
        from apps.quotas import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the `reservations` cleanup kind
        )
