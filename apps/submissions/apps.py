from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "apps.submissions"
    label = "submissions"

    def ready(self) -> None:
        from apps.submissions import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the `drafts` and `orphan_files` cleanup kinds
        )
