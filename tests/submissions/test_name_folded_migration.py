"""The migration to `name_folded` backfills every row on SQLite and PostgreSQL, and keeps the
files of names the old `LOWER()` rule let in twice (the later one gets a suffix)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("submissions", "0002_submission_submissions_review_pending")]
AFTER = [("submissions", "0003_submissionfile_name_folded")]
NFC_E = unicodedata.normalize("NFC", "é.py")
NFD_E = unicodedata.normalize("NFD", "é.py")


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _migrate_to_latest() -> None:
    """Every app at its latest migration again (the tests that follow expect the schema
    whole: later migrations of this app, and the apps whose migrations depend on it)."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_backfill_folds_every_name_and_keeps_old_duplicates() -> None:
    old_apps = _migrate(BEFORE)
    try:
        user = old_apps.get_model("auth", "User").objects.create(username="old")
        submission = old_apps.get_model("submissions", "Submission").objects.create(
            id="a" * 32, owner_id=user.pk
        )
        files = old_apps.get_model("submissions", "SubmissionFile")
        # Two forms of one name: `LOWER()` tells them apart, the new rule does not.
        for name in ("Main.PY", NFC_E, NFD_E):
            files.objects.create(
                submission=submission, filename=name, size=1, sha256="0" * 64, storage_name=name
            )

        new_apps = _migrate(AFTER)

        rows = new_apps.get_model("submissions", "SubmissionFile").objects.order_by("id")
        folded = [(row.filename, row.name_folded) for row in rows]
        later = rows.get(filename=NFD_E)
        assert folded == [
            ("Main.PY", "main.py"),
            (NFC_E, NFC_E),
            (NFD_E, f"{NFC_E}/{later.pk}"),
        ]
    finally:
        _migrate_to_latest()
