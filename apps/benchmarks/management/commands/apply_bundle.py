"""`manage.py apply_bundle PATH --user NAME [--dry-run]`: apply a bundle (a folder or a .zip)
as a user, exactly as `POST /api/challenges/` does."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.benchmarks.services.apply import challenge_apply
from apps.benchmarks.services.folders import folder_zip
from apps.core.exceptions import DomainError


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Apply a challenge bundle (a folder or a .zip) as a user; --dry-run prints the plan."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--user", required=True, help="username of the uploader")
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"No user named {options['user']}.")
        with tempfile.TemporaryDirectory(prefix="yoyaku-bundle-") as folder:
            if path.is_dir():
                bundle = Path(folder) / "bundle.zip"
                sha256 = folder_zip(path, bundle)
            elif path.is_file():
                bundle, sha256 = path, _sha256(path)
            else:
                raise CommandError(f"{path} is neither a folder nor a file.")
            try:
                result = challenge_apply(
                    user=user, bundle_path=bundle, sha256=sha256, dry_run=options["dry_run"]
                )
            except DomainError as exc:
                fields = exc.extra.get("fields")
                detail = f"\n{json.dumps(fields, indent=2)}" if fields else ""
                raise CommandError(f"{exc.code}: {exc.message}{detail}") from exc
        changes = [op.as_dict() for op in result.plan if op.op != "unchanged"]
        if result.dry_run:
            self.stdout.write(json.dumps({"slug": result.slug, "changes": changes}, indent=2))
            return
        assert result.challenge is not None  # noqa: S101 - set for every apply
        verb = "created" if result.created else ("updated" if changes else "unchanged")
        self.stdout.write(
            f"{result.slug}: {verb}, bundle version {result.challenge.bundle_version}"
        )
