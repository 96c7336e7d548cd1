from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "apps.review"
    label = "review"
    verbose_name = "Review"

    def ready(self) -> None:
        from apps.review import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the `claims` cleanup kind
        )
