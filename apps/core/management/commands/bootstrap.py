from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.exceptions import DemoAccountsDisabled
from apps.core.schedules import schedules_ensure
from apps.core.services import demo_accounts_assert_allowed, demo_accounts_ensure


class Command(BaseCommand):
    help = "Create the demo accounts (with API tokens) and the periodic task schedules."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", default="yoyaku-demo", help="for new demo accounts")
        parser.add_argument(
            "--no-accounts",
            action="store_true",
            help="only the schedules (required with DEBUG off: demo accounts are for development)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["no_accounts"]:
            # Refuse before anything is written: a production bootstrap that forgot
            # --no-accounts must not leave half its work done either.
            try:
                demo_accounts_assert_allowed()
            except DemoAccountsDisabled as exc:
                raise CommandError(exc.message) from exc
        for name in schedules_ensure():
            self.stdout.write(f"schedule ensured: {name}")
        if options["no_accounts"]:
            return
        for account in demo_accounts_ensure(password=options["password"]):
            self.stdout.write(
                f"{account.role:9} username={account.username} "
                f"password={account.password} token={account.token}"
            )
