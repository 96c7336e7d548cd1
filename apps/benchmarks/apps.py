from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "apps.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from apps.benchmarks import registry  # noqa: F401
