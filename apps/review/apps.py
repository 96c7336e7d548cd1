from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "apps.review"
    label = "review"
    verbose_name = "Grading and review"

    def ready(self) -> None:
        from apps.review import cleanup  # noqa: F401 - registers cleanup `claims` and the reaper
