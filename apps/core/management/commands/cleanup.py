from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.cleanup import cleanup_kinds, cleanup_run


class Command(BaseCommand):
    help = "Remove stale data: expired idempotency keys and reservations, old drafts, etc."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="show, delete nothing")
        parser.add_argument(
            "--only", default="", help="comma-separated kinds: " + ",".join(cleanup_kinds())
        )

    def handle(self, *args: Any, **options: Any) -> None:
        only = [name.strip() for name in options["only"].split(",") if name.strip()] or None
        try:
            reports = cleanup_run(only=only, dry_run=options["dry_run"])
        except KeyError as exc:
            known = ", ".join(cleanup_kinds()) or "none"
            raise CommandError(f"unknown kind: {exc.args[0]} (known: {known})") from exc
        verb = "would remove" if options["dry_run"] else "removed"
        for report in reports:
            self.stdout.write(f"{report.kind}: {verb} {report.count}")
            for item in report.items:
                self.stdout.write(f"  {item}")
