from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "apps.submissions"
    label = "submissions"

    def ready(self) -> None:
        from apps.submissions import (
            cleanup,  # noqa: F401 - registers the `drafts` cleanup kind
            metrics,  # noqa: F401 - declares the app's metrics
        )
