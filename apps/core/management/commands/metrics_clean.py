"""`manage.py metrics_clean`: empty the metrics folder before a host's processes start."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from apps.core.metrics_files import metrics_dir_clean


class Command(BaseCommand):
    help = (
        "Delete every file in PROMETHEUS_MULTIPROC_DIR. Run it when no process of this host "
        "is running (on deploy, before the web, worker and watcher start; `make run` does): "
        "a running process keeps writing to the files it opened."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="List, delete nothing.")

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        folder, names = metrics_dir_clean(dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{folder}: {verb} {len(names)} file(s)")
