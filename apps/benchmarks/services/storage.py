"""Stored bundles nobody names, and their cleanup kind `orphan_bundles`.

Applying a bundle stores it (`bundles/<slug>/<hex>/bundle.zip`) before the transaction that
writes the rows; a refusal or an error deletes it, and a replaced bundle is deleted after
commit unless a scoring version still names it. What that cannot cover leaves a stored bundle
that no row names: a web process killed between storing and committing, a delete that failed,
and the bundles of scoring versions that went with a phase a later bundle removed. The cleanup
deletes those once older than `STORED_ORPHAN_GRACE_MINUTES`, which keeps every apply still in
flight. Storage is Django's storage API (local files or S3); no transaction is held.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.files.storage import Storage, storages

from apps.benchmarks.selectors import bundle_files_named
from apps.benchmarks.services.apply import BUNDLE_PREFIX
from apps.core.cleanup import CleanupReport

logger = logging.getLogger(__name__)

KIND = "orphan_bundles"


def _storage() -> Storage:
    return storages["default"]


def _listdir(storage: Storage, folder: str) -> tuple[list[str], list[str]]:
    try:
        return storage.listdir(folder)
    except FileNotFoundError:
        return [], []


def _stored_names(storage: Storage, folder: str) -> list[str]:
    """Every stored name under `folder`, walked with the storage API (local or S3)."""
    folders, files = _listdir(storage, folder)
    names = [f"{folder}/{name}" for name in files]
    for sub in folders:
        names.extend(_stored_names(storage, f"{folder}/{sub}"))
    return names


def _stored_delete(storage: Storage, names: list[str]) -> list[str]:
    """Delete `names`; the ones that could not be deleted are logged and left for the next
    run. Returns those deleted."""
    deleted: list[str] = []
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            logger.exception("Could not delete stored bundle %s", name)
        else:
            deleted.append(name)
    return deleted


def stored_bundles_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Cleanup kind `orphan_bundles`: stored bundles that neither a challenge nor a scoring
    version names, last written more than `STORED_ORPHAN_GRACE_MINUTES` before `now`.

    One challenge folder at a time: its objects are listed first, then the names rows hold
    are read, so an apply that commits in between only adds names (and its young file is
    kept by the grace anyway). `dry_run` lists what would be deleted. Idempotent."""
    storage = _storage()
    cutoff = now - dt.timedelta(minutes=float(settings.STORED_ORPHAN_GRACE_MINUTES))
    slugs, _ = _listdir(storage, BUNDLE_PREFIX)
    orphans: list[str] = []
    for slug in sorted(slugs):
        folder = f"{BUNDLE_PREFIX}/{slug}"
        stored = _stored_names(storage, folder)
        if not stored:
            continue
        named = bundle_files_named(prefix=f"{folder}/")
        orphans.extend(
            name
            for name in stored
            if name not in named and storage.get_modified_time(name) <= cutoff
        )
    if dry_run:
        return CleanupReport(kind=KIND, count=len(orphans), items=orphans)
    deleted = _stored_delete(storage, orphans)
    return CleanupReport(kind=KIND, count=len(deleted), items=deleted)
