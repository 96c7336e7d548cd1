from django.apps import AppConfig


class ScheduleConfig(AppConfig):
    name = "apps.schedule"
    label = "schedule"
    verbose_name = "Schedule"

    def ready(self) -> None:
        from apps.schedule import (
            metrics,  # noqa: F401 - declares the app's metrics
            registry,  # noqa: F401 - cleanup, health, periodic, topics
        )
        from apps.schedule.api.schema import header_booking_document

        header_booking_document()
