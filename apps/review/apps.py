from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "apps.review"
    label = "review"
    verbose_name = "Review"

    def ready(self) -> None:
        from apps.core.readers import readers_register
        from apps.review import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - the `claims` cleanup kind
        )
        from apps.review.access import job_get_readable, submission_get_readable

        readers_register(submission=submission_get_readable, job=job_get_readable)
